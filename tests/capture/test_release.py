"""Causal release (capture/release.py) on real captures reordered as skewed capture points reorder them."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture import CaptureOptions, Pipeline
from capture.causal import CausalLimits
from capture.flows import ConnectionEnd
from capture.reassembly import DATA
from capture.release import CausalRelease
from capture.stats import CaptureStats
from dissector.events import Anomaly, Exchange
from tests.capture import pcaptools as pt

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
NAMES = ["mock-produce-consume", "tansu-consume-group", "mixed"]


def exchanges(records: list, **opts: object) -> tuple[Pipeline, list, list]:
    p = Pipeline(CaptureOptions(**opts))  # type: ignore[arg-type]
    events = list(p.run(records))
    xs = sorted((ce.conn.id, x.request.correlation_id, x.status.name) for ce in events
                if isinstance(x := ce.event, Exchange) and x.request is not None)
    return p, xs, [ce.event for ce in events if isinstance(ce.event, Anomaly)]


@pytest.mark.parametrize("name", NAMES)
def test_replies_captured_before_their_requests_still_pair(name: str) -> None:
    _, records = pt.read_records(SAMPLES / f"{name}.pcap")
    _, want, _ = exchanges(records)
    p, got, anomalies = exchanges(pt.causal_shuffle(records, seed=3, dup_rate=0))
    assert got == want
    assert p.stats.causal_held > 0 and p.stats.causal_forced == 0
    assert not [a for a in anomalies if a.kind == "causal_order_limit"]


def test_past_the_cap_the_oldest_goes_without_what_it_waits_for_reported_once_per_connection() -> None:
    _, records = pt.read_records(SAMPLES / "mock-produce-consume.pcap")
    p, _, anomalies = exchanges(pt.causal_shuffle(records, seed=3, reply_swap=1.0, dup_rate=0),
                                max_causal_segments=0)
    limits = [a for a in anomalies if a.kind == "causal_order_limit"]
    assert p.stats.causal_forced > 0 and limits
    assert len(limits) <= p.stats.connections["kafka"]
    assert all("more than 0 segments" in a.detail for a in limits)


def test_what_waits_on_a_connection_goes_when_it_ends() -> None:
    """The capture stops between a reply and the request it answers: the reply still goes, at the end."""
    _, records = pt.read_records(SAMPLES / "tansu-admin-errors.pcap")
    shuffled = pt.causal_shuffle(records, seed=3, reply_swap=1.0, dup_rate=0)
    p = Pipeline()
    events: list = []
    for rec in shuffled:                        # up to the first packet after which something waits
        events += p.run([rec], final=False)
        waiting = [f for f in p.table.flows.values() if f.gate is not None]
        if waiting:
            break
    assert waiting
    events += p.finish(rec[0])
    assert all(f.gate is None for f in waiting) and p.stats.causal_forced == 0
    assert any(isinstance(ce.event, ConnectionEnd) for ce in events)


def test_emit_hands_on_at_once_what_waits_for_nothing() -> None:
    _, records = pt.read_records(SAMPLES / "tansu-admin-errors.pcap")
    p = Pipeline()
    list(p.run(records[:6], final=False))
    flow = next(iter(p.table.flows.values()))
    seen: list = []
    release = CausalRelease(p.options, CausalLimits(64, 10**10, 1024, 1 << 22), CaptureStats(),
                            lambda f, h, ops: seen.append((h, ops)) or [])
    op = (DATA, flow.h0.offset, b"x", 1, None)    # acknowledging nothing
    assert release.emit(flow, 0, [op], 1) == [] and seen == [(0, [op])] and flow.gate is None
    assert release.emit(flow, 0, [], 1) == [] and len(seen) == 1
