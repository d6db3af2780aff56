"""Flow tracking (capture/tracker.py) on real captures: rest and wake, sweeps, eviction, the end."""

from __future__ import annotations

from pathlib import Path

from capture import CaptureOptions, Pipeline
from capture.flows import KAFKA, ConnectionEnd
from capture.options import NS
from dissector.events import Anomaly, Exchange
from tests.capture import pcaptools as pt

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def records(name: str) -> list:
    return pt.read_records(SAMPLES / f"{name}.pcap")[1]


def digest(events: list) -> list:
    return sorted((ce.conn.id, x.request.correlation_id, x.status.name) for ce in events
                  if isinstance(x := ce.event, Exchange) and x.request is not None)


def ends(events: list) -> dict[str, str]:
    return {ce.conn.id: ce.event.reason for ce in events if isinstance(ce.event, ConnectionEnd)}


def test_quiet_connections_rest_and_wake_without_changing_what_is_decoded() -> None:
    recs = records("group-rebalance")              # 58 connections, many open at once
    want = list(Pipeline().run(recs))
    p = Pipeline(CaptureOptions(soft_flows=4))
    got = list(p.run(recs))
    assert p.stats.rested > 0 and p.stats.woken > 0
    assert digest(got) == digest(want) and ends(got) == ends(want)


def test_a_sweep_forgets_what_ended_and_keeps_idle_kafka_connections_until_crowded() -> None:
    recs = records("mock-produce-consume")[:150]    # cut while connections are open
    later = recs[-1][0] + 5 * NS
    p = Pipeline(CaptureOptions(idle_timeout=1.0, linger=1.0))
    list(p.run(recs, final=False))
    assert any(f.closed for f in p.table.flows.values())
    list(p.tracker.sweep(later))
    assert p.table.flows and all(f.state == KAFKA and not f.closed for f in p.table.flows.values())
    assert p.tracker.sweep_at == later + 10 * NS

    crowded = Pipeline(CaptureOptions(idle_timeout=1.0, linger=1.0, soft_flows=1))
    events = list(crowded.run(recs, final=False))
    swept = list(crowded.tracker.sweep(later))
    assert len(crowded.table) == 0 and set(ends(swept).values()) == {"idle"}
    assert digest(events + swept) == digest(list(Pipeline().run(recs)))


def test_at_the_hard_cap_the_least_recently_active_are_ended_and_reported() -> None:
    recs = records("group-rebalance")
    p = Pipeline(CaptureOptions(max_flows=5, report_limit=2))
    events = list(p.run(recs))
    full = [ce.event for ce in events if isinstance(ce.event, Anomaly) and ce.event.kind == "flow_table_full"]
    assert p.stats.evicted > 0 and 1 <= len(full) <= 2
    assert "evicted" in ends(events).values()


def test_the_end_of_the_input_ends_every_connection_those_at_rest_too() -> None:
    recs = records("group-rebalance")
    p = Pipeline(CaptureOptions(soft_flows=4))
    events = list(p.run(recs, final=False))
    assert p.table.dormant or p.stats.rested
    events += p.finish(recs[-1][0])
    assert len(p.table) == 0
    assert ends(events) == ends(list(Pipeline().run(recs)))
