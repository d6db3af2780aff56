"""Causal order across the two directions (capture/causal.py), on hand-made skewed captures.

The transformation test on every real sample is in test_samples.py; these pin the edges:
the wait's bounds, what a real loss becomes, and the negative latency report.
"""

from __future__ import annotations

from capture import CaptureOptions, Pipeline
from dissector.events import Anomaly, Exchange, Status
from tests.capture import pcaptools as pt

REQ1, RESP1 = pt.api_versions_request(1), pt.api_versions_response(1)
REQ2, RESP2 = pt.api_versions_request(2), pt.api_versions_response(2)


def run(records, **opts):  # type: ignore[no-untyped-def]
    p = Pipeline(CaptureOptions(**opts))
    events = [ce.event for ce in p.run(records)]
    exchanges = [e for e in events if isinstance(e, Exchange)]
    anomalies = [e for e in events if isinstance(e, Anomaly)]
    return p, exchanges, anomalies


def restamp(records):  # type: ignore[no-untyped-def]
    stamps = sorted(r[0] for r in records)
    return [(t, lt, d, w) for t, (_, lt, d, w) in zip(stamps, records)]


def two_exchanges() -> pt.Conversation:
    c = pt.Conversation().handshake()
    c.send(True, REQ1, ack_after=False).send(False, RESP1, ack_after=False)
    c.send(True, REQ2, ack_after=False).send(False, RESP2, ack_after=False)
    return c.close()


def test_replies_captured_before_their_requests_pair_up() -> None:
    recs = two_exchanges().records
    # handshake (3), req1, resp1, req2, resp2: each reply moved ahead of its request
    skewed = restamp(recs[:3] + [recs[4], recs[3], recs[6], recs[5]] + recs[7:])
    p, exchanges, anomalies = run(skewed)
    assert [(x.status, x.request.correlation_id) for x in exchanges] == [(Status.OK, 1), (Status.OK, 2)]
    assert all(x.latency_ns < 0 for x in exchanges)              # kept as the capture measured it
    (neg,) = [a for a in anomalies if a.kind == "negative_latency"]   # once per connection
    assert neg.extra["latency_ns"] == exchanges[0].latency_ns
    assert p.stats.causal_held == 2 and p.stats.causal_forced == 0
    assert not [a for a in anomalies if a.kind in ("gap", "causal_order_limit")]


def test_in_capture_order_nothing_waits() -> None:
    p, exchanges, anomalies = run(two_exchanges().records)
    assert [x.status for x in exchanges] == [Status.OK, Status.OK]
    assert p.stats.causal_held == 0 and not [a for a in anomalies if a.kind == "negative_latency"]


def test_a_request_the_capture_lost_lets_its_reply_go_after_the_wait() -> None:
    c = pt.Conversation().handshake()
    c.send(True, REQ1, ack_after=False)
    lost = c.records[-1]
    c.send(False, RESP1, ack_after=False)
    c.ts += 2_000_000_000
    c.send(True, REQ2, ack_after=False).send(False, RESP2, ack_after=False).close()
    p, exchanges, anomalies = run([r for r in c.records if r is not lost])
    statuses = sorted((x.status.value, x.response.correlation_id if x.response else None) for x in exchanges)
    assert statuses == [("ok", 2), ("orphan_response", 1)]
    assert [a.extra["bytes"] for a in anomalies if a.kind == "gap"] == [len(REQ1)]   # reported once
    # RESP1 waits for REQ1, RESP2 for REQ2 (itself behind REQ1's hole), until the end declares the hole.
    assert p.stats.causal_held == 2 and p.stats.causal_forced == 0


def test_a_lost_request_is_given_up_after_a_bounded_number_of_segments() -> None:
    """Many exchanges after the loss: the wait ends after max_reorder_segments segments of the connection,
    not at the end of the capture, and everything after it pairs."""
    c = pt.Conversation().handshake()
    c.send(True, REQ1, ack_after=False)
    lost = c.records[-1]
    c.send(False, RESP1, ack_after=False)
    for corr in range(2, 40):
        c.send(True, pt.api_versions_request(corr), ack_after=False)
        c.send(False, pt.api_versions_response(corr), ack_after=False)
    records = [r for r in c.records if r is not lost]      # no FIN: the connection is still open at the end
    p = Pipeline(CaptureOptions(max_reorder_segments=16))
    events = []
    for ce in p.run(records, final=False):
        events.append(ce.event)
    gaps = [e for e in events if isinstance(e, Anomaly) and e.kind == "gap"]
    assert [(g.extra["bytes"], g.extra["reason"]) for g in gaps] == [(len(REQ1), "acked")]
    paired = [e for e in events if isinstance(e, Exchange) and e.status is Status.OK]
    assert len(paired) >= 38 - 10            # all but the last few, still waiting when the input stopped


def test_a_reply_ahead_of_its_request_waits_however_idle_the_connection() -> None:
    """Reordering is counted in packets: a request captured after its reply, seconds later (an idle
    connection, a capture restamped in order), still pairs with it."""
    c = two_exchanges()
    recs = c.records
    late_req = recs[3]
    moved = recs[:3] + [recs[4]] + [(r[0] + 5_000_000_000, *r[1:]) for r in [late_req] + recs[5:]]
    p, exchanges, anomalies = run(moved)
    assert [(x.status, x.request.correlation_id) for x in exchanges] == [(Status.OK, 1), (Status.OK, 2)]
    assert not [a for a in anomalies if a.kind == "gap"]


def lost_request_then_big_reply(mss: int, frames: int) -> list:  # type: ignore[type-arg]
    """A Kafka connection whose second request the capture lost, answered by ``frames`` frames."""
    c = pt.Conversation(mss=mss).handshake()
    c.send(True, REQ1).send(False, RESP1)
    c.send(True, REQ2, ack_after=False)
    lost = c.records[-1]
    c.send(False, pt.api_versions_response(2) * frames, ack_after=False).close()
    return [r for r in c.records if r is not lost]


def test_the_wait_is_bounded_in_segments_and_reported_once() -> None:
    p, exchanges, anomalies = run(lost_request_then_big_reply(20, 20), max_causal_segments=8)
    assert [a.kind for a in anomalies].count("causal_order_limit") == 1
    assert p.stats.causal_forced > 0
    assert [x.status for x in exchanges if x.response is None or x.response.correlation_id == 1] == [Status.OK]
    assert sum(1 for x in exchanges if x.status is Status.ORPHAN_RESPONSE) == 20


def test_the_wait_is_bounded_in_bytes() -> None:
    p, exchanges, anomalies = run(lost_request_then_big_reply(1400, 400), max_causal_bytes=4000)
    assert [a.kind for a in anomalies].count("causal_order_limit") == 1
    assert p.stats.causal_forced > 0
    assert sum(1 for x in exchanges if x.status is Status.ORPHAN_RESPONSE) == 400


def test_the_cap_biting_before_kafka_is_recognised_is_reported_once_it_is() -> None:
    """The first request lost, its long reply waits on it and the cap lets it go, all while the connection
    is still undecided: the report comes with the connection once it is known to be Kafka."""
    c = pt.Conversation(mss=20).handshake()
    c.send(True, REQ1, ack_after=False)
    lost = c.records[-1]
    c.send(False, RESP1 * 20, ack_after=False)
    c.send(True, REQ2).send(False, RESP2).close()
    p = Pipeline(CaptureOptions(max_causal_segments=8))
    events = list(p.run([r for r in c.records if r is not lost]))
    caps = [ce for ce in events if isinstance(ce.event, Anomaly) and ce.event.kind == "causal_order_limit"]
    assert p.stats.causal_forced > 0
    assert len(caps) == 1 and caps[0].conn is not None
    assert any(isinstance(ce.event, Exchange) and ce.event.status is Status.OK for ce in events)


# -- the gate alone (capture.causal), without a pipeline -------------------------------------------

def _halves(isn0: int = 1000, isn1: int = 5000):  # type: ignore[no-untyped-def]
    from capture.reassembly import HalfStream
    a, b = HalfStream(), HalfStream()
    a.next_seq, b.next_seq = isn0, isn1
    return a, b


def test_the_gate_lets_an_operation_go_once_what_it_acknowledges_has_gone() -> None:
    from capture.causal import CausalGate, CausalLimits, first_waiting
    from capture.reassembly import DATA
    halves = _halves()
    reply = (DATA, 0, b"reply", 10, 1000 + 7)       # acknowledges 7 bytes of half 0 not seen yet
    request = (DATA, 0, b"request", 11, None)
    assert first_waiting(halves[0], [(DATA, 0, b"x", 9, None), reply]) == 1
    gate = CausalGate()
    gate.hold(1, reply, reply[4])
    limits = CausalLimits(max_reorder_segments=64, max_wait=10**9, max_segments=100, max_bytes=1 << 20)
    assert list(gate.ready(halves, 12, limits)) == []             # nothing may go yet
    gate.hold(0, request, None)
    # The request goes first; the reply once its half has been handed on, in the same pass.
    halves[0].take_next(request[2])
    assert list(gate.ready(halves, 12, limits)) == [(0, request, False), (1, reply, False)]
    assert not gate


def test_past_its_caps_the_gate_sends_the_oldest_without_what_it_waits_for() -> None:
    from capture.causal import CausalGate, CausalLimits
    from capture.reassembly import DATA
    halves = _halves()
    gate = CausalGate()
    ops = [(DATA, i * 4, b"late", 10 + i, 1000 + 50) for i in range(3)]
    for op in ops:
        gate.hold(1, op, op[4])
    limits = CausalLimits(max_reorder_segments=64, max_wait=10**9, max_segments=2, max_bytes=1 << 20)
    assert list(gate.ready(halves, 20, limits)) == [(1, ops[0], True)]    # down to the cap, oldest first
    assert len(gate.held[1]) == 2
    # The connection ending lets everything go, the hole it waited for declared lost first.
    assert [x[1:] for x in gate.ready(halves, 20, limits, everything=True)][-2:] == [(ops[1], False), (ops[2], False)]
    assert not gate
