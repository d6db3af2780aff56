"""TLS record framing: across segments, several per segment, and what is not TLS."""

from __future__ import annotations

import pytest

from capture.tls.errors import TlsError
from capture.tls.records import APPLICATION_DATA, HANDSHAKE, MAX_FRAGMENT, RecordReader


def rec(ctype: int, body: bytes, version: int = 0x0303) -> bytes:
    return bytes([ctype]) + version.to_bytes(2, "big") + len(body).to_bytes(2, "big") + body


STREAM = rec(HANDSHAKE, b"h" * 300) + rec(APPLICATION_DATA, b"a" * 5000) + rec(APPLICATION_DATA, b"")


def test_whole_one_byte_at_a_time_and_with_a_partial_tail() -> None:
    whole = RecordReader().feed(STREAM)
    assert [(t, len(f)) for t, _, f in whole] == [(HANDSHAKE, 300), (APPLICATION_DATA, 5000), (APPLICATION_DATA, 0)]
    r = RecordReader()
    dribbled = [x for i in range(len(STREAM)) for x in r.feed(STREAM[i:i + 1])]
    assert dribbled == whole and r.pending == 0
    r = RecordReader()
    assert r.feed(STREAM + rec(APPLICATION_DATA, b"tail")[:7]) == whole
    assert r.pending == 7                                  # the next record's start, kept, untouched


@pytest.mark.parametrize("bad", [
    b"GET / HTTP/1.1\r\n",                                 # not TLS
    rec(APPLICATION_DATA, b"", version=0x0203),            # not version 3.x
    bytes([23, 3, 3]) + (MAX_FRAGMENT + 1).to_bytes(2, "big"),   # an absurd length
])
def test_what_is_not_a_record_header_raises_the_layer_error(bad: bytes) -> None:
    with pytest.raises(TlsError):
        RecordReader().feed(rec(HANDSHAKE, b"x") + bad)
