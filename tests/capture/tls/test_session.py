"""The TLS session on its own, fed a real connection's streams with its real keys."""

from __future__ import annotations

from pathlib import Path

from capture.tls.keylog import KeyLog
from capture.tls.session import NO_KEYS, Notice, Plain, TlsSession
from tests.fuzz.seeds import tls_records
from tests.fuzz.targets import chunks

TLS = Path(__file__).resolve().parents[3] / "samples" / "tls"


def _streams() -> list[list[tuple[int, bytes]]]:
    # Whole connections from the fuzz seeds (the first seed of each connection, capture order).
    out = []
    for i, data in enumerate(tls_records()):
        if i % 3 == 0:
            out.append([(tag & 1, b) for tag, b in chunks(data)])
    return out


def test_plaintext_is_the_same_fed_whole_or_byte_by_byte() -> None:
    log = KeyLog(sorted(TLS.glob("*.keys")))
    checked = 0
    for items in _streams()[:12]:
        a, b = TlsSession(log), TlsSession(log)
        whole = [o for side, data in items for o in a.feed(side, data, 0)]
        dribbled = [o for side, data in items for i in range(len(data)) for o in b.feed(side, data[i:i + 1], 0)]
        join = lambda outs, s: b"".join(o.data for o in outs if isinstance(o, Plain) and o.side == s)  # noqa: E731
        assert not [o for o in whole if isinstance(o, Notice)]
        assert join(whole, 0) == join(dribbled, 0) and join(whole, 1) == join(dribbled, 1)
        checked += bool(join(whole, 0))
    assert checked >= 8


def test_no_key_log_says_what_the_handshake_said() -> None:
    s = TlsSession(None)
    for side, data in _streams()[0]:
        s.feed(side, data, 0)
    s.close(0)
    assert s.ended is not None and s.ended.kind == NO_KEYS and "no TLS keys given" in s.ended.detail
    assert s.info.version in ("TLS 1.2", "TLS 1.3") and s.info.sni == "broker.kafka.test"
