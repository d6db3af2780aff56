"""0.7 frames: every request type, response shapes, and telling 0.7 from 0.8+ and from noise."""

from __future__ import annotations

import pytest

from dissector.framing import request_frame_decodes
from dissector.protocols import first_request_protocol, sniff_request
from dissector.framing import Sniff
from dissector.v07 import wire
from tests.capture.pcaptools import kafka_request
from tests.dissector.v07.build import (
    fetch,
    fetch_response,
    message,
    multifetch,
    multifetch_response,
    multiproduce,
    offsets,
    offsets_response,
    produce,
)


def _body(frame: bytes) -> bytes:
    return frame[4:]


def test_every_request_type_parses_completely():
    msgs = message(b"hi")
    cases = [
        (produce("events", 3, msgs), 0, {"topic": "events", "partition": 3, "messages_length": len(msgs)}),
        (fetch("events", 1, 42, 300), 1, {"topic": "events", "partition": 1, "offset": 42, "max_size": 300}),
        (offsets("events", 0, -2, 5), 4, {"topic": "events", "partition": 0, "time": -2, "max_number": 5}),
    ]
    for frame, kind, fields in cases:
        got_kind, body, end = wire.parse_request(_body(frame), strict=True)
        assert got_kind == kind and end == len(frame) - 4
        assert {k: body[k] for k in fields} == fields
    kind, body, _ = wire.parse_request(_body(multifetch([("a", 0, 0, 10), ("bb", 1, 5, 20)])), strict=True)
    assert kind == 2 and [(e["topic"], e["offset"]) for e in body["fetches"]] == [("a", 0), ("bb", 5)]
    kind, body, _ = wire.parse_request(_body(multiproduce([("a", 0, msgs), ("b", 2, msgs + msgs)])), strict=True)
    assert kind == 3 and [e["messages"].batch_count for e in body["produces"]] == [1, 2]


def test_responses_parse_against_their_request():
    req = wire.parse_request(_body(multifetch([("a", 0, 100, 10), ("b", 1, 7, 20)])))[1]
    body, end = wire.parse_response(_body(multifetch_response([(0, message(b"x")), (3, b"")])), 2, req)
    assert [(e["topic"], e["error_code"], e["messages"].first_offset) for e in body["fetches"]] == [
        ("a", 0, 100), ("b", 3, None)]
    with pytest.raises(wire.DissectError):   # one set for two requested partitions
        wire.parse_response(_body(multifetch_response([(0, b"")])), 2, req)
    body, _ = wire.parse_response(_body(offsets_response([10, 0])), 4, None)
    assert body == {"error_code": 0, "offsets": [10, 0]}
    body, _ = wire.parse_response(_body(fetch_response(error=1)), 1, None)
    assert body["error_code"] == 1 and body["messages"].batch_count == 0


def test_response_shapes():
    assert wire.OFFSETS in wire.response_shapes(_body(offsets_response([1, 2])))
    assert wire.response_shapes(_body(fetch_response(message(b"abc")))) == [wire.FETCH]
    assert wire.MULTIFETCH in wire.response_shapes(_body(multifetch_response([(0, message(b"abc"))])))
    assert wire.response_shapes(b"\x00\x09garbage") == []


def test_a_produce_to_a_five_letter_topic_is_0_7_though_it_starts_like_produce_v5():
    frame = _body(produce("clock", 0, message(b"tick")))
    assert frame[:4] == b"\x00\x00\x00\x05"          # api key 0, version 5 to a 0.8+ reader
    assert not request_frame_decodes(frame)
    assert first_request_protocol(frame) == "0.7"
    assert sniff_request(produce("clock", 0, message(b"tick"))) is Sniff.KAFKA


def test_0_8_requests_stay_0_8_plus():
    frame = kafka_request(3, 0, 1, "c", b"\x00\x00\x00\x00")
    assert first_request_protocol(frame[4:]) == "0.8+"
    assert not wire.request_is_plausible(frame[4:])


@pytest.mark.parametrize("data", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40,
    b"\x00\x00\x00\x10\x00\x01\x00\x03abc\x00\x00\x00\x00" + b"\x00" * 5,   # FETCH of the wrong size
    b"\x00\x00\x00\x0e\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",  # topic "\x01"
])
def test_noise_is_not_0_7(data):
    assert wire.sniff(data) is False
    assert wire.find_request(data, 0)[0] is None


def test_sniff_needs_the_whole_frame():
    frame = fetch("events", 0, 0)
    assert wire.sniff(frame[:12]) is None
    assert wire.sniff(frame) is True


def test_find_request_skips_to_a_provable_frame():
    junk = b"\x00\x01\x02junk\x00\x00\x00\x05"
    at, need = wire.find_request(junk + fetch("t", 0, 9), 0)
    assert (at, need) == (len(junk), 0)
