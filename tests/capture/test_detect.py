"""Finding Kafka: port lists, and never claiming HTTP, TLS, PostgreSQL or Redis."""

from __future__ import annotations

import struct

import pytest

from capture import CaptureOptions, ConnectionEnd, Pipeline, parse_ports
from capture.detect import Detector, KafkaProbe, Verdict, looks_like_tls
from tests.capture import pcaptools as pt
from tests.capture.fakes import Recorder


def test_parse_ports() -> None:
    assert parse_ports("9092") == {9092}
    assert parse_ports("9092, 9093,30000-30002") == {9092, 9093, 30000, 30001, 30002}
    for bad in ("", "x", "0", "70000", "9093-9092", "1-2-3", ","):
        with pytest.raises(ValueError):
            parse_ports(bad)


def _tls_client_hello() -> bytes:
    sni = b"kafka.example.com"
    ext = struct.pack(">HHHBH", 0, len(sni) + 5, len(sni) + 3, 0, len(sni)) + sni
    body = (b"\x03\x03" + b"\x11" * 32 + b"\x00" + struct.pack(">H", 4) + b"\x13\x01\x13\x02" + b"\x01\x00"
            + struct.pack(">H", len(ext)) + ext)
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def _pg_startup() -> bytes:
    params = b"user\0postgres\0database\0orders\0application_name\0psql\0\0"
    return struct.pack(">ii", 8 + len(params), 196608) + params


HTTP = b"GET /api/v1/things HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.0\r\nAccept: */*\r\n\r\n"
HTTP_REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
REDIS = b"*3\r\n$3\r\nSET\r\n$5\r\nmykey\r\n$7\r\nmyvalue\r\n"
REDIS_REPLY = b"+OK\r\n"
PG_SSL = struct.pack(">ii", 8, 80877103)
TLS_APPDATA = b"\x17\x03\x03\x00\x20" + b"\xaa" * 32

OTHERS = {
    "http": (HTTP, HTTP_REPLY),
    "tls": (_tls_client_hello(), b"\x16\x03\x03\x00\x31\x02\x00\x00\x2d" + b"\x03\x03" + b"\x22" * 43),
    "postgres": (_pg_startup(), b"R\0\0\0\x08\0\0\0\0" + b"S\0\0\0\x16application_name\0psql\0"),
    "postgres_ssl": (PG_SSL, b"N"),
    "redis": (REDIS, REDIS_REPLY),
}


def run(records, **opts):  # type: ignore[no-untyped-def]
    rec = Recorder()
    p = Pipeline(CaptureOptions(**opts), connection_factory=rec)
    return p, rec, list(p.run(records))


@pytest.mark.parametrize("name", sorted(OTHERS))
@pytest.mark.parametrize("port", [8080, 9092, 6379, 5432, 443])
@pytest.mark.parametrize("midstream", [False, True])
def test_other_protocols_are_not_claimed(name: str, port: int, midstream: bool) -> None:
    req, reply = OTHERS[name]
    c = pt.Conversation(server=("10.0.0.2", port), mss=1000).handshake()
    for _ in range(3):
        c.send(True, req).send(False, reply)
    recs = c.close().records
    if midstream:
        recs = recs[3:]
    p, rec, events = run(recs)
    assert rec.made == [], f"{name} on {port} taken for Kafka"
    if name == "tls" and port == 9092:
        assert p.stats.connections == {"tls": 1}
        assert events[0].conn.state == "tls" and events[0].event.kind == "tls"
        assert isinstance(events[-1].event, ConnectionEnd)
    else:
        assert events == [] and p.stats.connections == {"not_kafka": 1}


def test_tls_mid_stream_on_a_kafka_port_is_tls() -> None:
    c = pt.Conversation(server=("10.0.0.2", 9093), mss=1000).handshake()
    c.send(True, TLS_APPDATA).send(False, TLS_APPDATA)
    p, rec, events = run(c.records[3:])
    assert rec.made == [] and p.stats.connections == {"tls": 1}
    assert events[0].conn.broker_port == 9093


def test_tls_on_an_explicit_port() -> None:
    c = pt.Conversation(server=("10.0.0.2", 31000), mss=1000).handshake().send(True, _tls_client_hello())
    p, _, _ = run(c.records, ports=frozenset({31000}))
    assert p.stats.connections == {"tls": 1}


def test_kafka_on_any_port_is_found() -> None:
    c = pt.Conversation(server=("10.0.0.2", 12345), mss=1000).handshake()
    c.send(True, pt.api_versions_request(0)).send(False, pt.api_versions_response(0))
    p, rec, _ = run(c.records)
    assert len(rec.made) == 1 and p.stats.connections == {"kafka": 1}


def test_a_large_first_request_is_decided_on_its_header() -> None:
    big = pt.kafka_request(0, 3, 1, "producer", b"\xff\xff\x00\x01\x00\x00\x75\x30" + b"\0" * 200_000)
    c = pt.Conversation(server=("10.0.0.2", 12345), mss=1400).handshake().send(True, big)
    _, rec, _ = run(c.records)
    assert len(rec.made) == 1
    assert rec.made[0].data(pt_direction_broker()) == big


def pt_direction_broker():  # type: ignore[no-untyped-def]
    from dissector.events import Direction
    return Direction.TO_BROKER


def test_undecided_buffering_is_bounded() -> None:
    # Binary noise both ways on a non-Kafka port, joined mid-stream: given up once both
    # directions buffered the limit, long before the capture ends.
    from capture.flows import IGNORED
    c = pt.Conversation(server=("10.0.0.2", 7000), mss=1000)
    for i in range(100):
        c.packet(i % 2 == 0, pt.ACK | pt.PSH, bytes([i % 251]) * 1000)
    p = Pipeline(CaptureOptions(detect_limit=4096), connection_factory=Recorder())
    assert list(p.run(c.records, final=False)) == []
    (flow,) = p.table.flows.values()
    assert flow.state == IGNORED and flow.ops is None and flow.bufs is None     # nothing kept once decided
    assert p.stats.connections == {"not_kafka": 1}


@pytest.mark.parametrize("port", [9092, 12345])
def test_a_connection_without_data_is_not_counted_as_not_kafka(port: int) -> None:
    """Handshakes and ACKs alone say nothing about the protocol: such connections (a health check that
    only connects, a SYN flood) are neither decoded nor counted among the TCP connections not Kafka."""
    quiet = pt.Conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", port)).handshake().close()
    syn_only = pt.Conversation(client=("10.0.0.1", 40001), server=("10.0.0.2", port))
    syn_only.packet(True, pt.SYN)
    other = pt.Conversation(client=("10.0.0.1", 40002), server=("10.0.0.2", port)).handshake()
    other.send(True, HTTP).send(False, HTTP_REPLY).close()
    p, rec, events = run(quiet.records + syn_only.records + other.records)
    assert rec.made == [] and events == []
    assert p.stats.connections == {"not_kafka": 1}          # the HTTP one alone


def one_byte_short(corr: int) -> bytes:
    """A Metadata v0 request whose last topic lacks a byte, its size saying so (a client encoder's bug)."""
    bad = pt.metadata_request(corr, ["topic-a"])
    return struct.pack(">i", len(bad) - 5) + bad[4:-1]


def decode_all(records, **opts):  # type: ignore[no-untyped-def]
    from dissector.events import Anomaly, Exchange
    p = Pipeline(CaptureOptions(**opts))
    events = [ce.event for ce in p.run(records)]
    return (p, [e for e in events if isinstance(e, Exchange)], [e for e in events if isinstance(e, Anomaly)])


@pytest.mark.parametrize("port", [9092, 29092, 12345])
@pytest.mark.parametrize("midstream", [False, True])
def test_a_first_request_that_does_not_decode_is_malformed_not_a_lost_connection(port: int, midstream: bool) -> None:
    """Default detection, a Kafka port or not: a plausible header (known api key and version, sane size)
    is enough; the bad request is reported, the exchanges after it decode as with --ports."""
    c = pt.Conversation(server=("10.0.0.2", port)).handshake()
    c.send(True, one_byte_short(1))
    for corr in (2, 3):
        c.send(True, pt.api_versions_request(corr)).send(False, pt.api_versions_response(corr))
    recs = c.close().records
    if midstream:
        recs = recs[3:]
    p, exchanges, anomalies = decode_all(recs)
    _, explicit, _ = decode_all(recs, ports=frozenset({port}))
    assert p.stats.connections == {"kafka": 1}
    assert [(x.request.correlation_id, x.status.value) for x in exchanges] == \
        [(x.request.correlation_id, x.status.value) for x in explicit]
    assert [(x.request.api_key, x.request.correlation_id, x.status.value) for x in exchanges][-2:] == \
        [(18, 2, "ok"), (18, 3, "ok")]
    if not midstream:
        assert exchanges[0].request.failure is not None and [a.kind for a in anomalies] == ["malformed"]


def test_on_a_kafka_port_a_request_size_api_key_and_version_will_do() -> None:
    """A client id no header would carry (not printable): not a plausible header anywhere, but on a Kafka port
    the size, api key and version of a request are taken as Kafka, reported malformed."""
    junk = struct.pack(">hhih", 3, 0, 1, 4) + b"\x01\x02\x03\x04" + b"\xff" * 3
    first = struct.pack(">i", len(junk)) + junk
    for port, made in ((9092, True), (12345, False)):
        c = pt.Conversation(server=("10.0.0.2", port)).handshake()
        c.send(True, first).send(True, pt.api_versions_request(2)).send(False, pt.api_versions_response(2)).close()
        p, exchanges, _ = decode_all(c.records)
        if made:
            assert p.stats.connections == {"kafka": 1} and [x.status.value for x in exchanges][-1] == "ok"
        else:
            assert p.stats.connections == {"not_kafka": 1} and exchanges == []


def test_mid_stream_consecutive_request_headers_that_do_not_decode_are_kafka() -> None:
    """Joined mid-stream on no Kafka port, only requests that do not decode: two headers one right after the
    other (the second where the first frame's size ends it) are evidence enough."""
    c = pt.Conversation(server=("10.0.0.2", 12345)).handshake()
    for corr in range(1, 5):
        c.send(True, one_byte_short(corr))
    p, exchanges, anomalies = decode_all(c.records[3:])
    assert p.stats.connections == {"kafka": 1}
    # Joined mid-stream, the dissector resyncs only on a frame it can prove, which none is: the bytes are
    # reported, not decoded, and the connection is in the dataset.
    assert exchanges == [] and [a.kind for a in anomalies] == ["unsynced_tail"]
    # A single such header in noise is not: one frame proves nothing.
    c = pt.Conversation(server=("10.0.0.2", 12345)).handshake()
    c.send(True, bytes(range(200)) + one_byte_short(1) + bytes(range(200, 256)) * 3)
    p, _, _ = decode_all(c.records[3:])
    assert p.stats.connections == {"not_kafka": 1}


def test_looks_like_tls() -> None:
    assert looks_like_tls(_tls_client_hello(), handshake_only=True)
    assert looks_like_tls(TLS_APPDATA, handshake_only=False)
    assert not looks_like_tls(TLS_APPDATA, handshake_only=True)
    assert not looks_like_tls(pt.api_versions_request(1), handshake_only=False)


def test_detector_rules_with_the_real_probe() -> None:
    d = Detector(KafkaProbe.from_dissector(), None)
    req, resp = pt.metadata_request(5), pt.api_versions_response(5)
    # From the SYN: client known.
    assert d.decide((req, b""), (False, False), 0, (50000, 9092), False).verdict is Verdict.KAFKA
    assert d.decide((b"", resp), (False, False), 0, (50000, 9092), False).verdict is Verdict.NOT_KAFKA
    assert d.decide((req[:6], b""), (False, False), 0, (50000, 9092), False) is None
    # Mid-stream: the request side is the client, whichever half it is.
    dec = d.decide((resp, req), (False, False), None, (9092, 50000), False)
    assert dec.verdict is Verdict.KAFKA and dec.client_half == 1


def test_a_metadata_v0_request_is_not_taken_for_postgres() -> None:
    # Size, api key 3, version 0, then a correlation id reading "ne\0\0": the first 8 bytes and the next
    # three of a PostgreSQL startup message. Found by the detection fuzzer; PostgreSQL's whole message
    # is still told apart.
    d = Detector(KafkaProbe.from_dissector(), None)
    header = struct.pack(">ihhi", 524327, 3, 0, 0x6E650000) + b"\0\0" + b"\0" * 20
    assert d.decide((header, b""), (False, False), 0, (50312, 29092), True).verdict is Verdict.KAFKA
    pg = _pg_startup()
    assert d.decide((pg, b""), (False, False), 0, (50312, 5432), False).reason == "PostgreSQL startup"
