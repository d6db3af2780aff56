"""Property tests: encode/decode round trips for every message, frames through a
Connection, and robustness of decoders and connections against damaged bytes."""

from __future__ import annotations

import contextlib
import copy
import signal
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dissector import schema
from dissector.connection import Connection, Options
from dissector.decoders import Decoders
from dissector.embedded import decode_group_payloads
from dissector.encoder import EncodeError, encode_body, encode_data, request_frame, response_frame
from dissector.events import Direction, Exchange, Request, Response, Status

from tests.dissector.strategies import (
    all_api_versions,
    all_messages,
    body_strategy,
    data_strategy,
    message_and_body,
    uuids,
)

RAW = Decoders(records_hook=lambda b: b)
SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
TS = 1_000
TO_BROKER, TO_CLIENT = Direction.TO_BROKER, Direction.TO_CLIENT
HOT = {0: "Produce", 1: "Fetch", 3: "Metadata", 11: "JoinGroup"}


def _ids(v) -> str:
    return "-".join(map(str, v)) if isinstance(v, tuple) else str(v)


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail instead of hanging: a decoder or connection stuck in a loop is a bug."""
    def alarm(signum, frame):
        raise TimeoutError(f"no answer within {seconds}s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_roundtrip(key: int, kind: str, version: int, body: dict) -> bytes:
    data = encode_body(key, kind, version, body)
    d = RAW.decode(key, kind, version, data, 0)
    assert d is not None
    assert d.failure is None, (d.failure, data.hex())
    assert d.end == len(data), (d.end, len(data))
    assert d.body == body
    return data


# -- body round trips ------------------------------------------------------------

@pytest.mark.parametrize("key,kind,version", all_messages(), ids=_ids)
def test_roundtrip_every_message(key, kind, version):
    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=SUPPRESS)
    @given(body_strategy(key, kind, version))
    def check(body):
        check_roundtrip(key, kind, version, body)
    check()


@pytest.mark.parametrize("key,kind,version", [m for m in all_messages() if m[0] in HOT], ids=_ids)
def test_roundtrip_hot_messages_deeper(key, kind, version):
    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=SUPPRESS)
    @given(body_strategy(key, kind, version))
    def check(body):
        check_roundtrip(key, kind, version, body)
    check()


def _data_versions():
    from dissector.schema._generated import DATA
    out = []
    for name in DATA:
        lo, hi = schema.data_versions(name)
        out += [(name, v) for v in range(lo, hi + 1) if schema.data_message(name, v) is not None]
    return out


@pytest.mark.parametrize("name,version", _data_versions(), ids=_ids)
def test_roundtrip_data_messages(name, version):
    fn = RAW.get_data(name, version)

    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=SUPPRESS)
    @given(data_strategy(name, version))
    def check(body):
        from dissector.decoders import run
        data = encode_data(name, version, body)
        d = run(fn, data, 0)
        assert d.failure is None and d.end == len(data) and d.body == body
    check()


# -- encoder facts, checked against hand-written bytes ------------------------------

def test_encoder_classic_and_compact_encodings():
    # Metadata v0 request: classic int32 array of int16 strings.
    assert encode_body(3, "request", 0, {"topics": [{"name": "ab"}]}) == b"\x00\x00\x00\x01\x00\x02ab"
    # Metadata v1: a null array is -1.
    assert encode_body(3, "request", 1, {"topics": None}) == b"\xff\xff\xff\xff"
    # Metadata v9: compact array (n+1), compact string (n+1), empty tag sections.
    assert encode_body(3, "request", 9, {"topics": [{"name": "ab"}], "allow_auto_topic_creation": True}) == \
        b"\x02\x03ab\x00\x01\x00\x00\x00"
    # Metadata v12: a null compact string is 0; uuids from Kafka's base64 form; missing keys take
    # the spec's default (allow_auto_topic_creation: true).
    body = {"topics": [{"topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "name": None}]}
    assert encode_body(3, "request", 12, body) == b"\x02" + bytes(15) + b"\x01\x00\x00" + b"\x01\x00\x00"


def test_encoder_tagged_fields():
    base = {"transactional_id": None, "acks": 1, "timeout_ms": 0, "topic_data": []}
    assert encode_body(0, "request", 9, base) == b"\x00\x00\x01\x00\x00\x00\x00\x01\x00"
    # Unknown tags are written back, sorted by tag, after the known ones.
    data = encode_body(0, "request", 9, {**base, "_unknown_tags": {7: b"\x01\x02", 3: b""}})
    assert data.endswith(b"\x01\x02\x03\x00\x07\x02\x01\x02")
    # Produce v10 response: node_endpoints (tag 0) only when not at its default ([]).
    resp = {"responses": [], "throttle_time_ms": 0, "node_endpoints": []}
    assert encode_body(0, "response", 10, resp) == b"\x01\x00\x00\x00\x00\x00"
    resp["node_endpoints"] = [{"node_id": 1, "host": "h", "port": 9, "rack": None}]
    assert encode_body(0, "response", 10, resp) == \
        b"\x01\x00\x00\x00\x00" + b"\x01\x00\x0d" + b"\x02\x00\x00\x00\x01\x02h\x00\x00\x00\x09\x00\x00"


def test_encoder_nullable_struct_marker():
    nullable = [(k, kind, v, f.name) for k, kind, v in all_messages()
                for f in schema.message(k, kind, v).fields if f.type == "struct" and f.nullable and f.tag is None]
    assert nullable, "the schema has top-level nullable structs (KIP-893)"
    key, kind, version, name = nullable[0]
    fields = {f.name: f for f in schema.message(key, kind, version).fields}
    null = encode_body(key, kind, version, {name: None})
    full = encode_body(key, kind, version, {name: {}})
    assert null != full
    d = RAW.decode(key, kind, version, null, 0)
    assert d.failure is None and d.body[name] is None and fields[name].nullable
    assert RAW.decode(key, kind, version, full, 0).body[name] is not None


def test_encoder_rejects_bad_bodies():
    with pytest.raises(EncodeError):
        encode_body(3, "request", 0, {"topics": None})  # not nullable before v1
    with pytest.raises(EncodeError):
        encode_body(0, "request", 9, {"acks": 70000})
    with pytest.raises(EncodeError):
        encode_body(999, "request", 0, {})


def test_frame_headers():
    # ControlledShutdown v0: request header v0, no client id.
    frame = request_frame(7, 0, 5, "ignored", {"broker_id": 1})
    assert frame == struct.pack(">ihhii", 12, 7, 0, 5, 1)
    # Metadata v1: header v1 with a classic client id; v9: header v2, client id still classic, then tags.
    assert request_frame(3, 1, 5, "c", {"topics": None})[4:15] == struct.pack(">hhih", 3, 1, 5, 1) + b"c"
    assert request_frame(3, 9, 5, None, {"topics": None})[4:15] == struct.pack(">hhih", 3, 9, 5, -1) + b"\x00"
    # Responses: header v1 (tags) if flexible, but never for ApiVersions.
    assert response_frame(3, 9, 5, b"")[4:] == b"\x00\x00\x00\x05\x00"
    assert response_frame(3, 8, 5, b"")[4:] == b"\x00\x00\x00\x05"
    assert response_frame(18, 3, 5, b"")[4:] == b"\x00\x00\x00\x05"


@given(uuids)
def test_uuid_forms_agree(u):
    import uuid as uuidlib
    from base64 import urlsafe_b64decode

    from dissector.encoder import uuid_bytes
    raw = urlsafe_b64decode(u + "==")
    assert uuid_bytes(u) == uuid_bytes(raw) == uuid_bytes(uuidlib.UUID(bytes=raw)) == raw


# -- frames through a Connection -------------------------------------------------

def feed_all(pieces: list[tuple[Direction, bytes]], mode: str = "whole", close: bool = False,
             decoders: Decoders = RAW) -> list:
    conn = Connection(Options(keep_secrets=True), decoders=decoders)
    events: list = []
    with deadline(20):
        for direction, data in pieces:
            if mode == "bytes":
                for i in range(len(data)):
                    events += conn.feed(direction, data[i:i + 1], TS)
            else:
                events += conn.feed(direction, data, TS)
        if close:
            events += conn.close(TS)
    return events


def _expected_bodies(key: int, req: dict, resp: dict) -> tuple[dict, dict]:
    # The connection decodes consumer-protocol bytes inside group apis; so must the expectation.
    exp_req, exp_resp = copy.deepcopy(req), copy.deepcopy(resp)
    decode_group_payloads(RAW, key, "request", exp_req, None)
    decode_group_payloads(RAW, key, "response", exp_resp, exp_req)
    return exp_req, exp_resp


@st.composite
def exchanges(draw, key: int, version: int):
    req = draw(body_strategy(key, "request", version))
    if key == 0:
        assume(req["acks"] != 0)  # acks=0 expects no response
    resp = draw(body_strategy(key, "response", version))
    corr = draw(st.integers(0, 2**31 - 1))
    client_id = draw(st.one_of(st.none(), st.text("abcxyz-_.0123456789", max_size=10)))
    return req, resp, corr, client_id


@pytest.mark.parametrize("key,version", all_api_versions(), ids=_ids)
def test_connection_exchange(key, version):
    @settings(max_examples=2, deadline=None, database=None, suppress_health_check=SUPPRESS)
    @given(exchanges(key, version), st.binary(min_size=1, max_size=12))
    def check(ex, junk):
        req, resp, corr, client_id = ex
        rf = request_frame(key, version, corr, client_id, req)
        pf = response_frame(key, version, corr, resp)
        pieces = [(TO_BROKER, rf), (TO_CLIENT, pf)]
        events = feed_all(pieces)
        assert [type(e) for e in events] == [Request, Response, Exchange], events
        r, p, x = events
        exp_req, exp_resp = _expected_bodies(key, req, resp)
        assert x.status is Status.OK and x.request is r and x.response is p
        assert (r.api_key, r.api_version, r.correlation_id, r.size) == (key, version, corr, len(rf))
        assert r.client_id == (client_id if (key, version) != (7, 0) else None)
        assert r.failure is None and p.failure is None
        assert r.body == exp_req
        assert p.body == exp_resp
        # h11-style: how the bytes are cut must not matter.
        assert feed_all(pieces, "bytes") == events
        # Unrelated bytes after a frame change nothing before them.
        assert feed_all([(TO_BROKER, rf + junk)])[:1] == events[:1]
        assert feed_all([(TO_BROKER, rf), (TO_CLIENT, pf + junk)])[:3] == events
    check()


# -- robustness ------------------------------------------------------------------

ROBUST = settings(max_examples=150, deadline=None, database=None, suppress_health_check=SUPPRESS)


@ROBUST
@given(message_and_body())
def test_every_truncation_fails_cleanly(mb):
    key, kind, version, body = mb
    data = encode_body(key, kind, version, body)
    with deadline(20):
        for n in range(len(data)):
            d = RAW.decode(key, kind, version, data[:n], 0)
            assert d.failure is not None, (key, kind, version, n, data.hex())
            assert 0 <= d.failure.offset <= n


@ROBUST
@given(message_and_body(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4))
def test_flipped_bytes_never_raise(mb, flips):
    key, kind, version, body = mb
    data = bytearray(encode_body(key, kind, version, body))
    assume(data)
    for pos, mask in flips:
        data[pos % len(data)] ^= mask
    with deadline(20):
        d = RAW.decode(key, kind, version, bytes(data), 0)
    assert d is not None and (d.failure is not None or d.end <= len(data))


@ROBUST
@given(st.sampled_from(all_messages()), st.binary(max_size=200))
def test_garbage_never_raises(msg, data):
    key, kind, version = msg
    with deadline(20):
        d = RAW.decode(key, kind, version, data, 0)
    assert d is not None and (d.failure is not None or d.end <= len(data))


@st.composite
def exchange_streams(draw):
    key, version = draw(st.sampled_from(all_api_versions()))
    req, resp, corr, client_id = draw(exchanges(key, version))
    return request_frame(key, version, corr, client_id, req), response_frame(key, version, corr, resp)


CONN = settings(max_examples=60, deadline=None, database=None, suppress_health_check=SUPPRESS)


@CONN
@given(exchange_streams(), st.integers(0, 10**6), st.booleans())
def test_cut_streams_same_events_however_fed(frames, cut, cut_response):
    """A stream that ends mid-frame gives the same events whole or byte by byte."""
    rf, pf = frames
    if cut_response:
        pieces = [(TO_BROKER, rf), (TO_CLIENT, pf[:cut % len(pf)])]
    else:
        pieces = [(TO_BROKER, rf[:cut % len(rf)])]
    whole = feed_all(pieces, close=True)
    assert feed_all(pieces, "bytes", close=True) == whole


@CONN
@given(exchange_streams(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=6),
       st.integers(1, 7))
def test_damaged_streams_never_raise(frames, flips, chunk):
    rf, pf = (bytearray(f) for f in frames)
    for pos, mask in flips:
        target = rf if pos % 2 else pf
        target[(pos // 2) % len(target)] ^= mask
    pieces = [(TO_BROKER, bytes(rf)), (TO_CLIENT, bytes(pf))]
    feed_all(pieces, close=True)
    feed_all(pieces, "bytes", close=True)
    # Real decoders too (records summaries, redaction), in odd-sized chunks.
    conn = Connection()
    with deadline(20):
        for direction, data in pieces:
            for i in range(0, len(data), chunk):
                conn.feed(direction, data[i:i + chunk], TS)
        conn.close(TS)


@CONN
@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=64)), max_size=8), st.booleans())
def test_garbage_streams_never_raise(pieces, mid_stream):
    conn = Connection(mid_stream=mid_stream)
    with deadline(20):
        for to_client, data in pieces:
            conn.feed(TO_CLIENT if to_client else TO_BROKER, data, TS)
        conn.close(TS)
    conn2 = Connection(mid_stream=mid_stream)
    with deadline(20):
        for to_client, data in pieces:
            for i in range(len(data)):
                conn2.feed(TO_CLIENT if to_client else TO_BROKER, data[i:i + 1], TS)
        conn2.close(TS)


@CONN
@given(exchange_streams(), st.binary(min_size=1, max_size=40))
def test_garbage_before_a_stream_never_raises(frames, junk):
    rf, pf = frames
    feed_all([(TO_BROKER, junk + rf), (TO_CLIENT, junk + pf)], close=True)
    feed_all([(TO_BROKER, junk + rf), (TO_CLIENT, junk + pf)], "bytes", close=True)


def test_orphan_response_with_unknown_tags_does_not_raise():
    # Regression: inference once called str methods on _unknown_tags' int keys.
    frame = response_frame(12, 4, 1, {"throttle_time_ms": 0, "error_code": 0, "_unknown_tags": {5: b""}})
    assert frame.hex() == "0000000e0000000100000000000000010500"
    events = Connection().feed(TO_CLIENT, frame, TS)
    assert events[-1].status is Status.ORPHAN_RESPONSE
