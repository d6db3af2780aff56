"""The reassembly fast path (capture/fastpath.py), driven segment by segment over real captures."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture import Pipeline
from capture.fastpath import established, segment
from capture.flows import KAFKA
from capture.packet import parser_for
from dissector.events import Exchange
from tests.capture import pcaptools as pt

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
NAMES = ["mock-produce-consume", "tansu-admin-errors", "legacy-clients"]


def segments(name: str) -> list[tuple[int, tuple]]:
    lt, records = pt.read_records(SAMPLES / f"{name}.pcap")
    parse = parser_for(lt)
    out = []
    for ts, _, data, wirelen in records:
        seg = parse(data, wirelen)
        if type(seg) is tuple:
            out.append((ts, seg))
    return out


def by_hand(p: Pipeline, segs: list[tuple[int, tuple]]) -> tuple[list, int]:
    """The pipeline's loop, spelt out: control segments its way, the rest through :func:`established`.
    Also how many of those went straight to a Kafka dissector (in order, nothing buffered)."""
    out: list = []
    straight = 0
    ts = 0
    for ts, seg in segs:
        key, _, _, seq, ack, flags, payload, missing = seg
        ent = p.table.index.get(key)
        if ent is None or flags & 7:
            out += p.control.segment(ent, seg, ts)
            continue
        flow, h, hs, peer = ent
        if payload and flow.state == KAFKA and not flow.skip and flow.gate is None and seq == hs.next_seq \
                and not hs.has_pending():
            straight += 1
        out += established(p.release, p.delivery, flow, h, hs, peer, seg, seq, ack, flags, payload, missing,
                           ts) or []
    out += p.finish(ts)
    return out, straight


@pytest.mark.parametrize("name", NAMES)
def test_established_is_the_loops_step_for_every_tracked_segment(name: str) -> None:
    _, records = pt.read_records(SAMPLES / f"{name}.pcap")
    want = [(ce.conn and ce.conn.id, repr(ce.event)) for ce in Pipeline().run(records)]
    got, straight = by_hand(Pipeline(), segments(name))
    assert [(ce.conn and ce.conn.id, repr(ce.event)) for ce in got] == want
    assert straight > len(want) // 4          # most data went the fast way


def test_a_segment_ahead_is_buffered_until_the_one_before_it_comes() -> None:
    segs = segments("mock-produce-consume")
    p = Pipeline()
    # Up to the first request's segment, in capture order; then hold it back and send the next data
    # segment of the same direction first.
    first = next(i for i, (_, s) in enumerate(segs) if s[6] and not s[5] & 7)
    for ts, s in segs[:first]:
        ent = p.table.index.get(s[0])
        if ent is None or s[5] & 7:
            p.control.segment(ent, s, ts)
        else:
            established(p.release, p.delivery, *ent, s, *s[3:], ts)
    ts, s1 = segs[first]
    nxt = next(i for i in range(first + 1, len(segs)) if segs[i][1][0] == s1[0] and segs[i][1][6])
    ts2, s2 = segs[nxt]
    flow, h, hs, peer = p.table.index[s1[0]]
    if s2[3] != (s1[3] + len(s1[6])) & 0xFFFFFFFF:
        pytest.skip("the next data segment does not follow the first directly")
    assert not established(p.release, p.delivery, flow, h, hs, peer, s2, *s2[3:], ts2)
    assert hs.has_pending()
    established(p.release, p.delivery, flow, h, hs, peer, s1, *s1[3:], ts)
    assert not hs.has_pending() and hs.next_seq == (s2[3] + len(s2[6])) & 0xFFFFFFFF


def test_an_ack_of_bytes_not_seen_goes_the_general_way_and_waits() -> None:
    """A reply captured before its request: its ACK acknowledges request bytes the capture has not
    shown yet, so it is held (causal order) and goes once the request has."""
    segs = segments("tansu-admin-errors")
    p = Pipeline()
    req = next(i for i, (_, s) in enumerate(segs) if s[6] and not s[5] & 7)
    resp = next(i for i in range(req + 1, len(segs)) if segs[i][1][6] and segs[i][1][0] != segs[req][1][0])
    events = []
    order = segs[:req] + [segs[resp], segs[req]] + segs[req + 1:resp] + segs[resp + 1:]
    for ts, s in order:
        ent = p.table.index.get(s[0])
        if ent is None or s[5] & 7:
            events += p.control.segment(ent, s, ts)
        else:
            if (ts, s) == segs[resp]:
                assert not established(p.release, p.delivery, *ent, s, *s[3:], ts)
                assert ent[0].gate is not None               # held for the request
                continue
            events += established(p.release, p.delivery, *ent, s, *s[3:], ts) or []
    events += p.finish(order[-1][0])
    _, records = pt.read_records(SAMPLES / "tansu-admin-errors.pcap")
    want = [ce.event for ce in Pipeline().run(records) if isinstance(ce.event, Exchange)]
    got = [ce.event for ce in events if isinstance(ce.event, Exchange)]
    assert [(x.request.correlation_id, x.status) for x in got] == \
        [(x.request.correlation_id, x.status) for x in want]
    assert p.stats.causal_held >= 1


def test_segments_of_a_skipped_flow_only_move_its_clock() -> None:
    segs = segments("tansu-admin-errors")
    p = Pipeline()
    ts, syn = segs[0]
    p.control.segment(None, syn, ts)
    flow, h, hs, peer = p.table.index[syn[0]]
    flow.skip = True
    later, s = next((t, s) for t, s in segs if s[6])
    assert established(p.release, p.delivery, flow, h, hs, peer, s, *s[3:], later) is None
    assert flow.last_ts == later and segment(p.release, flow, h, s, later) == []
