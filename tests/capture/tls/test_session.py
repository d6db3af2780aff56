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


def test_key_update_is_followed() -> None:
    """No client at hand sends KeyUpdate (Python's ssl cannot): a real TLS 1.3 client stream is
    rewritten with one after its first application record, the rest re-encrypted under the next keys."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from capture.tls.cipher import hash_len, hkdf_expand_label
    from capture.tls.records import RecordReader
    from capture.tls.session import CLIENT, SERVER

    log = KeyLog(sorted(TLS.glob("*.keys")))
    for items in _streams():                   # a whole TLS 1.3 AES-256-GCM connection
        probe = TlsSession(log)
        for side, data in items:
            probe.feed(side, data, 0)
        if probe.info.cipher == "TLS_AES_256_GCM_SHA384" and not probe.info.resumed and probe.ended is None:
            break
    assert probe.client_hello is not None
    secret = log.lookup(probe.client_hello.random)["CLIENT_TRAFFIC_SECRET_0"]

    def keys(s: bytes) -> tuple[AESGCM, int]:
        return AESGCM(hkdf_expand_label("sha384", s, b"key", 32)), int.from_bytes(
            hkdf_expand_label("sha384", s, b"iv", 12), "big")

    def seal(aead_iv: tuple[AESGCM, int], seq: int, inner: bytes) -> bytes:
        aead, iv = aead_iv
        header = b"\x17\x03\x03" + (len(inner) + 16).to_bytes(2, "big")
        return header + aead.encrypt((iv ^ seq).to_bytes(12, "big"), inner, header)

    client = b"".join(d for s, d in items if s == CLIENT)
    records = RecordReader().feed(client)
    protected = [i for i, (t, _, _) in enumerate(records) if t == 23]
    app = protected[1:]                        # the first protected record is the client's Finished
    old = keys(secret)
    inners = []
    for seq, i in enumerate(app):
        _, header, frag = records[i]
        aead, iv = old
        inners.append(aead.decrypt((iv ^ seq).to_bytes(12, "big"), frag, header))
    new = keys(hkdf_expand_label("sha384", secret, b"traffic upd", hash_len("sha384")))
    rewritten = b"".join(h + f for t, h, f in records[:app[0] + 1])
    rewritten += seal(old, 1, b"\x18\x00\x00\x01\x00" + b"\x16")            # KeyUpdate, update_not_requested
    rewritten += b"".join(seal(new, seq, inner) for seq, inner in enumerate(inners[1:]))

    def plaintext(client_bytes: bytes) -> bytes:
        s = TlsSession(log)
        for side, data in items:
            if side == SERVER:
                s.feed(side, data, 0)
        outs = s.feed(CLIENT, client_bytes, 0)
        assert not [o for o in outs if isinstance(o, Notice)]
        return b"".join(o.data for o in outs if isinstance(o, Plain))
    assert len(inners) > 2 and plaintext(rewritten) == plaintext(client)
