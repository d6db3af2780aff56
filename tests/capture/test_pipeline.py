"""The pipeline with a recording connection: flows, roles, identity, closure, bounds."""

from __future__ import annotations

import random

from capture import CaptureOptions, ConnectionEnd, Pipeline
from dissector.events import Anomaly, Direction
from tests.capture import pcaptools as pt
from tests.capture.fakes import Recorder

B, C = Direction.TO_BROKER, Direction.TO_CLIENT
REQ = pt.api_versions_request(1) + pt.metadata_request(2)
RESP = pt.api_versions_response(1) + b"\0\0\0\x10" + b"m" * 16


def run(records, **opts):  # type: ignore[no-untyped-def]
    rec = Recorder()
    p = Pipeline(CaptureOptions(**opts), connection_factory=rec)
    events = list(p.run(records))
    return p, rec, events


def conversation(**kw) -> pt.Conversation:  # type: ignore[no-untyped-def]
    c = pt.Conversation(mss=50, **kw).handshake()
    c.send(True, REQ).send(False, RESP).send(True, pt.metadata_request(3)).close()
    return c


def test_a_whole_connection() -> None:
    c = conversation()
    p, rec, events = run(c.records)
    (conn,) = rec.made
    assert conn.data(B) == REQ + pt.metadata_request(3) and conn.data(C) == RESP
    assert conn.gaps(B) == [] and conn.gaps(C) == [] and conn.closed and not conn.mid_stream
    end = [e for e in events if isinstance(e.event, ConnectionEnd)]
    assert len(end) == 1 and end[0].event.reason == "fin"
    info = end[0].conn
    assert info.id == "10.0.0.1:50312-10.0.0.2:9092#1" and info.handshake_seen
    assert (info.client_ip, info.client_port, info.broker_ip, info.broker_port) == ("10.0.0.1", 50312, "10.0.0.2", 9092)
    # Ends at the second FIN; the last ACK is a straggler of a closed connection.
    assert info.first_ts == c.records[0][0] and info.last_ts == c.records[-2][0]
    assert p.stats.connections == {"kafka": 1} and p.stats.packets == len(c.records)


def test_reordered_and_duplicated_segments_give_identical_streams() -> None:
    c = conversation()
    _, rec, _ = run(pt.reorder_and_duplicate(c.records, seed=7, window=5, dup_rate=0.3))
    (conn,) = rec.made
    assert conn.data(B) == REQ + pt.metadata_request(3) and conn.data(C) == RESP
    assert conn.gaps(B) == conn.gaps(C) == []


def test_a_dropped_segment_is_a_gap_of_its_size() -> None:
    c = pt.Conversation(mss=50).handshake()
    c.send(True, REQ * 3)
    lost = c.records[5]                       # third data segment of the request
    c.send(False, RESP).close()
    recs = [r for r in c.records if r is not lost]
    p, rec, events = run(recs)
    (conn,) = rec.made
    assert conn.gaps(B) == [50]
    assert conn.data(B) == (REQ * 3)[:100] + (REQ * 3)[150:]
    gap = [e.event for e in events if isinstance(e.event, Anomaly) and e.event.kind == "gap"]
    assert gap[0].extra["reason"] == "lost" and p.stats.gap_bytes == 50


def test_sequence_numbers_wrapping_around() -> None:
    c = pt.Conversation(mss=40, isn_client=0xFFFFFFFF - 60, isn_server=0xFFFFFF00).handshake()
    c.send(True, REQ).send(False, RESP * 3).close()
    recs = list(c.records)
    random.Random(5).shuffle(recs[3:-3])
    _, rec, _ = run(recs)
    assert rec.made[0].data(B) == REQ and rec.made[0].data(C) == RESP * 3


def test_port_reuse_numbers_connections() -> None:
    a = conversation()
    b = conversation(isn_client=99_999_999, ts=a.ts + 10**9)
    _, rec, events = run(a.records + b.records)
    ids = sorted({e.conn.id for e in events if e.conn})
    assert ids == ["10.0.0.1:50312-10.0.0.2:9092#1", "10.0.0.1:50312-10.0.0.2:9092#2"]
    assert [c.data(B) for c in rec.made] == [REQ + pt.metadata_request(3)] * 2


def test_new_syn_without_fin_ends_the_old_connection() -> None:
    a = pt.Conversation(mss=50).handshake().send(True, REQ)
    b = pt.Conversation(mss=50, isn_client=77_000_000, ts=a.ts + 1000).handshake().send(True, REQ)
    _, rec, events = run(a.records + b.records)
    reasons = [e.event.reason for e in events if isinstance(e.event, ConnectionEnd)]
    assert reasons == ["reused", "end_of_capture"] and len(rec.made) == 2


def test_midstream_roles_from_the_request_frames() -> None:
    c = pt.Conversation(mss=1000).handshake()
    c.send(True, pt.api_versions_request(7)).send(False, pt.api_versions_response(7))
    c.send(True, pt.metadata_request(8, ["orders"])).send(False, RESP)
    # Start the capture after the handshake and the first request: the broker speaks first.
    recs = c.records[4:]
    _, rec, events = run(recs)
    (conn,) = rec.made
    info = events[0].conn
    assert info.id == "10.0.0.1:50312-10.0.0.2:9092#1" and not info.handshake_seen
    assert conn.mid_stream
    assert conn.data(B) == pt.metadata_request(8, ["orders"])


def test_midstream_roles_even_on_unknown_ports() -> None:
    c = pt.Conversation(client=("10.0.0.1", 4000), server=("10.0.0.2", 45000), mss=1000).handshake()
    c.send(True, pt.metadata_request(8, ["t"])).send(False, RESP)
    _, _, events = run(c.records[3:])
    assert events[0].conn.broker_port == 45000


def test_one_sided_responses_on_a_kafka_port() -> None:
    c = pt.Conversation(mss=1000).handshake()
    c.send(True, pt.api_versions_request(7)).send(False, pt.api_versions_response(7))
    recs = [r for r in c.records[3:] if len(r[2]) > 60 and r[2][34:36] == b"\x23\x84"]   # from 9092 only
    _, rec, events = run(recs)
    assert rec.made and rec.made[0].data(C) == pt.api_versions_response(7)
    assert events[0].conn.broker_port == 9092


def test_rst_closes() -> None:
    c = pt.Conversation(mss=50).handshake().send(True, REQ).reset(False)
    c.send(True, b"after the reset", ack_after=False)
    _, rec, events = run(c.records)
    assert rec.made[0].data(B) == REQ
    assert [e.event.reason for e in events if isinstance(e.event, ConnectionEnd)] == ["rst"]


def test_end_of_capture_with_hole_and_unacked_tail() -> None:
    c = pt.Conversation(mss=50).handshake().send(True, REQ * 3, ack_after=False)
    recs = c.records[:4] + c.records[5:-1]             # lose the second segment and the last
    recs.append(pt.Conversation(mss=50, isn_client=c.seq[True], isn_server=c.seq[False], ts=c.ts + 1000)
                .packet(False, pt.ACK))                # the broker acknowledges everything
    _, rec, _ = run(recs)
    assert rec.made[0].gaps(B) == [50, 30]
    assert rec.made[0].data(B) == (REQ * 3)[:50] + (REQ * 3)[100:150]


def test_not_kafka_is_ignored_and_not_buffered_forever() -> None:
    c = pt.Conversation(server=("10.0.0.2", 8080), mss=1000).handshake()
    c.send(True, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").send(False, b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 100_000)
    p, rec, events = run(c.records)
    assert rec.made == [] and events == []
    assert p.stats.connections == {"not_kafka": 1}


def test_explicit_ports() -> None:
    k = conversation()
    other = pt.Conversation(server=("10.0.0.3", 9999), mss=50).handshake().send(True, REQ)
    p, rec, _ = run(k.records + other.records, ports=frozenset({9092}))
    assert len(rec.made) == 1 and p.stats.connections == {"kafka": 1}


def test_explicit_port_accepts_anything_but_tls() -> None:
    junk = pt.Conversation(server=("10.0.0.2", 7777), mss=50).handshake().send(True, b"\x01\x02\x03\x04\x05\x06")
    _, rec, _ = run(junk.records, ports=frozenset({7777}))
    assert rec.made[0].data(B) == b"\x01\x02\x03\x04\x05\x06"


def test_tls_on_a_kafka_port_is_reported_not_decoded() -> None:
    hello = bytes.fromhex("160301002e010000") + b"\x03\x03" + b"r" * 36
    c = pt.Conversation(server=("10.0.0.2", 9093), mss=1000).handshake().send(True, hello).close()
    p, rec, events = run(c.records)
    assert rec.made == []
    kinds = [(type(e.event).__name__, getattr(e.event, "kind", None)) for e in events]
    assert kinds == [("Anomaly", "tls"), ("ConnectionEnd", None)]
    assert events[0].conn.state == "tls" and p.stats.connections == {"tls": 1}


def test_fragments_are_reported_with_a_cap() -> None:
    frag = pt.ether(pt.ipv4("10.0.0.1", "10.0.0.2", b"x" * 8, frag=100))
    recs = [(i, 1, frag, len(frag)) for i in range(5)]
    p, _, events = run(recs, report_limit=3)
    assert [e.event.kind for e in events] == ["ip_fragment"] * 3
    assert "suppressed" in events[-1].event.detail and p.stats.ip_fragments == 5


def test_snaplen_truncation_is_reported_as_gaps() -> None:
    c = pt.Conversation(mss=1000).handshake().send(True, REQ + b"\0\0\0\x08" + b"p" * 8).close()
    snapped = pt.snap(c.records, 80)
    p, rec, events = run(snapped)
    gaps = [e.event for e in events if isinstance(e.event, Anomaly) and e.event.kind == "gap"]
    assert gaps and all(g.extra["reason"] == "truncated" for g in gaps)
    assert rec.made[0].data(B) == (REQ + b"\0\0\0\x08" + b"p" * 8)[:80 - 54]
    assert p.stats.truncated_segments == 1


def test_flow_table_cap_evicts_the_least_recent() -> None:
    recs = []
    for i in range(30):
        c = pt.Conversation(client=("10.0.0.1", 40000 + i), mss=1000, ts=10**18 + i * 10**6).handshake()
        c.send(True, pt.api_versions_request(i))
        recs += c.records
    p, _, events = run(recs, max_flows=10)
    assert p.stats.evicted >= 20 and len(p.table) <= 10
    ends = [e.event.reason for e in events if isinstance(e.event, ConnectionEnd)]
    assert ends.count("evicted") == p.stats.evicted and len(ends) == 30


def test_flow_table_cap_drops_ended_connections_first_and_reports_live_evictions() -> None:
    recs = []
    for i in range(30):                       # 30 whole connections, closed, then 5 left open
        c = pt.Conversation(client=("10.0.0.1", 40000 + i), mss=1000, ts=10**18 + i * 10**6).handshake()
        recs += c.send(True, pt.api_versions_request(i)).close().records
    p, _, events = run(recs, max_flows=10)
    assert p.stats.evicted == 0 and not [e for e in events if getattr(e.event, "kind", "") == "flow_table_full"]
    for i in range(30):
        c = pt.Conversation(client=("10.0.0.2", 40000 + i), mss=1000, ts=10**18 + i * 10**6).handshake()
        recs += c.send(True, pt.api_versions_request(i)).records
    p, _, events = run(recs, max_flows=10)
    full = [e.event for e in events if getattr(e.event, "kind", "") == "flow_table_full"]
    assert p.stats.evicted >= 20 and full and e_conn_none(events, "flow_table_full")
    assert sum(a.extra["evicted"] for a in full) == p.stats.evicted


def test_a_full_topic_registry_is_reported_once() -> None:
    from dissector.topics import TopicRegistry
    topics = TopicRegistry(max_entries=2)
    for i in range(5):
        topics.learn(f"id{i}", f"t{i}")
    p = Pipeline(CaptureOptions(), topics=topics)
    events = list(p.run(conversation().records))
    full = [e for e in events if getattr(e.event, "kind", "") == "topic_registry_full"]
    assert len(full) == 1 and full[0].conn is None


def e_conn_none(events, kind: str) -> bool:  # type: ignore[no-untyped-def]
    return all(e.conn is None for e in events if getattr(e.event, "kind", "") == kind)


def test_idle_closed_flows_are_swept() -> None:
    recs = []
    for i in range(5000):
        c = pt.Conversation(client=("10.0.0.1", 1024 + i), mss=1000, ts=10**18 + i * 10**8)
        c.handshake().send(True, pt.api_versions_request(i)).close()
        recs += c.records
    p, rec, _ = run(recs)
    assert len(rec.made) == 5000
    assert len(p.table) == 0        # all ended and swept (or closed at the end)


def test_a_dissector_exception_is_contained_and_reported() -> None:
    class Exploding:
        def __init__(self, mid_stream: bool) -> None:
            self.fed = 0

        def feed(self, direction, data, ts):  # type: ignore[no-untyped-def]
            self.fed += 1
            if self.fed == 2:
                raise KeyError("boom")
            return []

        def gap(self, direction, ts, nbytes):  # type: ignore[no-untyped-def]
            return []

        def close(self, ts):  # type: ignore[no-untyped-def]
            return []

    a = conversation()
    b = conversation(client=("10.0.0.9", 40000))
    p = Pipeline(CaptureOptions(), connection_factory=Exploding)
    events = list(p.run(a.records + b.records))
    errors = [e for e in events if isinstance(e.event, Anomaly) and e.event.kind == "dissector_error"]
    assert len(errors) == 2 and "KeyError" in errors[0].event.detail and errors[0].conn is not None
    assert p.stats.dissector_errors == 2
    assert len([e for e in events if isinstance(e.event, ConnectionEnd)]) == 2


def test_ipv6_and_cooked_links() -> None:
    c = pt.Conversation(client=("2001:db8::1", 50312), server=("2001:db8::2", 9092), mss=40, linktype=113)
    c.handshake().send(True, REQ).send(False, RESP).close()
    _, rec, events = run(c.records)
    assert rec.made[0].data(B) == REQ and rec.made[0].data(C) == RESP
    assert events[-1].conn.id == "[2001:db8::1]:50312-[2001:db8::2]:9092#1"


def test_stats_progress_fields() -> None:
    c = conversation()
    p, _, _ = run(c.records)
    s = p.stats
    assert s.packets == len(c.records) == s.tcp_segments and s.non_tcp == 0
    assert s.connections == {"kafka": 1} and s.gaps == 0 and s.duplicate_segments == 0


def test_first_client_segment_lost_after_a_handshake() -> None:
    c = pt.Conversation(mss=1000).handshake()
    c.send(True, pt.api_versions_request(1)).send(False, pt.api_versions_response(1))
    c.send(True, pt.metadata_request(2)).send(False, RESP).close()
    recs = c.records[:3] + c.records[4:]          # the first request never captured
    _, rec, _ = run(recs)
    (conn,) = rec.made
    assert conn.gaps(B) == [len(pt.api_versions_request(1))]
    assert conn.data(B) == pt.metadata_request(2)


def test_a_captures_connections_share_one_held_bytes_and_one_inference_budget() -> None:
    p = Pipeline(CaptureOptions())
    a, b = p.delivery.new_connection(False), p.delivery.new_connection(True)
    assert a.options.held is b.options.held is not None
    assert a.options.inference is b.options.inference is not None
    assert Pipeline(CaptureOptions()).delivery.new_connection(False).options.inference is not a.options.inference
