"""Choosing the protocol generation per connection, and Kafka 0.8.0's own v0 apis still decoding."""

from __future__ import annotations

import struct
import zlib

import pytest

from dissector.connection import Connection
from dissector.events import Direction, Exchange, Request
from dissector.protocols import AutoConnection, ProtocolChoice, connection_factory
from dissector.schema import error_name
from dissector.topics import TopicRegistry
from dissector.v07.connection import V07Connection
from dissector.v07.events import V07Request
from tests.capture.pcaptools import kafka_request
from tests.dissector.v07.build import fetch, fetch_response, message, offsets, offsets_response, produce

B, C = Direction.TO_BROKER, Direction.TO_CLIENT


def s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def arr(items: list[bytes]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


def resp(corr: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), corr) + body


def v0_message_set(value: bytes, offset: int = 0) -> bytes:
    m = struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", len(value)) + value   # magic, attrs, null key, value
    m = struct.pack(">I", zlib.crc32(m)) + m
    return struct.pack(">qi", offset, len(m)) + m


# The Kafka 0.8.0 protocol guide's requests, by hand: (api key, request body, response body, error code)
MSET = v0_message_set(b"hello")
KAFKA_080 = [
    (3, arr([s("t")]),                                                                 # Metadata v0
     arr([struct.pack(">i", 1) + s("broker") + struct.pack(">i", 9092)])
     + arr([struct.pack(">h", 0) + s("t") + arr([struct.pack(">hii", 0, 0, 1) + arr([struct.pack(">i", 1)])
                                                + arr([struct.pack(">i", 1)])])]), 0),
    (0, struct.pack(">hi", 1, 1000) + arr([s("t") + arr([struct.pack(">ii", 0, len(MSET)) + MSET])]),  # Produce v0
     arr([s("t") + arr([struct.pack(">ihq", 0, 0, 41)])]), 0),
    (1, struct.pack(">iii", -1, 100, 1) + arr([s("t") + arr([struct.pack(">iqi", 0, 41, 1 << 20)])]),  # Fetch v0
     arr([s("t") + arr([struct.pack(">ihqi", 0, 0, 42, len(MSET)) + MSET])]), 0),
    (2, struct.pack(">i", -1) + arr([s("t") + arr([struct.pack(">iqi", 0, -1, 1)])]),   # Offsets v0
     arr([s("t") + arr([struct.pack(">ih", 0, 0) + arr([struct.pack(">q", 42)])])]), 0),
    (8, s("g") + arr([s("t") + arr([struct.pack(">iq", 0, 42) + s("")])]),             # OffsetCommit v0
     arr([s("t") + arr([struct.pack(">ih", 0, 0)])]), 0),
    (9, s("g") + arr([s("t") + arr([struct.pack(">i", 0)])]),                           # OffsetFetch v0
     arr([s("t") + arr([struct.pack(">iq", 0, -1) + s("") + struct.pack(">h", 3)])]), 3),
]


def test_kafka_0_8_0_v0_apis_decode_and_use_the_0_8_error_table():
    conn = AutoConnection(topics=TopicRegistry())
    out = []
    for corr, (key, req_body, resp_body, _) in enumerate(KAFKA_080, 1):
        out += conn.feed(B, kafka_request(key, 0, corr, "kafka-0.8.0", req_body), corr * 10)
        out += conn.feed(C, resp(corr, resp_body), corr * 10 + 1)
    out += conn.close(1000)
    assert conn.protocol == "0.8+" and isinstance(conn.inner, Connection)
    exchanges = [e for e in out if isinstance(e, Exchange)]
    assert [(e.request.api_name, e.request.api_version, e.status.value, e.request.failure, e.response.failure)
            for e in exchanges] == [(n, 0, "ok", None, None) for n in
                                    ("Metadata", "Produce", "Fetch", "ListOffsets", "OffsetCommit", "OffsetFetch")]
    assert exchanges[5].response.body["topics"][0]["partitions"][0]["error_code"] == 3
    assert error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"     # not 0.7's WRONG_PARTITION
    assert exchanges[1].request.body["topic_data"][0]["partition_data"][0]["records"].record_count == 1


def test_a_0_7_first_request_makes_a_0_7_connection():
    conn = AutoConnection()
    out = conn.feed(B, produce("clock", 0, message(b"tick"))[:9], 1)   # not decidable yet
    assert out == [] and conn.protocol is None
    out = conn.feed(B, produce("clock", 0, message(b"tick"))[9:], 2)
    out += conn.feed(B, fetch("clock", 0, 0), 3) + conn.feed(C, fetch_response(message(b"tick")), 4)
    out += conn.close(5)
    assert conn.protocol == "0.7" and isinstance(conn.inner, V07Connection)
    assert [type(e).__name__ for e in out if isinstance(e, (Request, Exchange))] == [
        "V07Request", "Exchange", "V07Request", "Exchange"]
    # decided once: later calls go straight to the 0.7 connection
    assert conn.feed.__self__ is conn.inner


def test_a_0_7_connection_joined_mid_stream():
    conn = AutoConnection(mid_stream=True)
    data = fetch("events", 0, 0)[5:] + offsets("events", 0)
    out = conn.feed(B, data, 1) + conn.feed(C, offsets_response([30]), 2)
    out += conn.feed(B, fetch("events", 0, 30), 3) + conn.feed(C, fetch_response(message(b"x")), 4) + conn.close(5)
    assert conn.protocol == "0.7"
    assert [e.status.value for e in out if isinstance(e, Exchange)] == ["ok", "ok"]


def test_after_joining_mid_stream_a_fetch_shaped_answer_is_not_trusted():
    # It could be the last set of a MULTIFETCH answer to a request sent before the capture began.
    conn = AutoConnection(mid_stream=True)
    out = conn.feed(B, fetch("events", 0, 0)[5:] + fetch("events", 0, 30), 1)
    out += conn.feed(C, fetch_response(message(b"x")), 2) + conn.close(3)
    assert [e.status.value for e in out if isinstance(e, Exchange)] == ["no_response", "orphan_response"]


def test_undecidable_bytes_fall_back_to_0_8_plus_within_the_hold_limit():
    conn = AutoConnection()
    junk = b"\x7f" * 10
    assert conn.feed(B, junk, 1) == [] or conn.protocol == "0.8+"
    conn.close(2)
    assert conn.protocol == "0.8+"


def test_forcing_by_port():
    choice = ProtocolChoice("0.8+", ((9092, "0.7"), (9100, "0.7"), (9101, "0.7")))
    factory = connection_factory(None, TopicRegistry(), choice)
    assert isinstance(factory(False, 9101), V07Connection)
    assert isinstance(factory(False, 9093), Connection)
    assert isinstance(connection_factory(None, TopicRegistry())(False), AutoConnection)


def test_forced_0_7_reads_0_8_bytes_as_0_7_and_says_what_does_not_fit():
    out = V07Connection().feed(B, kafka_request(3, 0, 1, "c", arr([])), 1)
    req = next(e for e in out if isinstance(e, V07Request))
    assert req.api_name == "MultiProduce" and req.body["topic_partition_count"] == 0
    assert [e.kind for e in out if not isinstance(e, (Request, Exchange))] == ["trailing_bytes"]


def test_a_first_0_7_request_larger_than_the_hold_limit_is_decided_by_its_header():
    big = produce("events", 0, message(b"x" * (600 << 10)) * 3)       # 1.8 MiB
    conn = AutoConnection()
    out = []
    for i in range(0, len(big), 65536):
        out += conn.feed(B, big[i:i + 65536], i)
    out += conn.close(10**9)
    assert conn.protocol == "0.7"
    req = next(e for e in out if isinstance(e, V07Request))
    assert req.failure is None and req.body["messages"].record_count == 3
