"""Connections at rest (capture/dormant.py): compact while quiet, the same rows once woken.

Every sample is decoded with connections put to rest as soon as there are more than one live
(``soft_flows=1``) and must give exactly the events of a decode where none rests; the edges
(port reuse, eviction, what a record holds) on hand-built conversations.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture import CaptureOptions, ConnectionEnd, Pipeline
from capture.capfile import open_capture
from capture.dormant import canonical, is_kafka, rest
import hotpath as compiled
from dissector.events import Anomaly, Exchange
from tests.capture import pcaptools as pt

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("**/*.pcap"))


def events(records_or_path, **opts):  # type: ignore[no-untyped-def]
    p = Pipeline(CaptureOptions(**opts))
    src = open_capture(records_or_path) if isinstance(records_or_path, Path) else records_or_path
    out = []
    for ce in p.run(src):
        ev = ce.event
        conn = ce.conn.id if ce.conn is not None else None
        if isinstance(ev, Exchange):
            r, s = ev.request, ev.response
            out.append(("x", conn, r and (r.api_key, r.correlation_id, r.size, r.first_ts, repr(r.body)),
                        s and (s.correlation_id, s.size, s.first_ts, repr(s.body)), ev.status.value))
        elif isinstance(ev, Anomaly):
            out.append(("a", conn, ev.kind, ev.detail))
        else:
            out.append(("e", conn, repr(ev)))
    return sorted(map(repr, out)), p


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_resting_connections_give_the_same_events(path: Path) -> None:
    plain, _ = events(path)
    resting, p = events(path, soft_flows=1)
    assert resting == plain
    if path.parent.name == "samples" and "admin" not in path.name:
        assert p.stats.rested > 0


def conversation(port: int, corr: int = 1) -> pt.Conversation:
    """A connection that opens, has one exchange and stays open, a millisecond per port after the others."""
    c = pt.Conversation(client=("10.0.0.1", port), server=("10.0.0.2", 9092),
                        ts=1_700_000_000_000_000_000 + (port - 40000) * 1_000_000)
    c.handshake().send(True, pt.api_versions_request(corr)).send(False, pt.api_versions_response(corr))
    return c


def test_a_resting_connection_wakes_where_it_left_off() -> None:
    """Quiet connections rest once a newer one comes; the first one's next exchange continues its stream."""
    first = conversation(40000)
    rest_of_first = pt.Conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 9092))
    rest_of_first.seq, rest_of_first.ts = dict(first.seq), first.ts + 100_000_000
    others = [conversation(40001 + i) for i in range(4)]
    rest_of_first.send(True, pt.metadata_request(2)).send(False, pt.api_versions_response(2)).close()
    records = first.records + [r for c in others for r in c.records] + rest_of_first.records
    plain, _ = events(records)
    resting, p = events(records, soft_flows=2)
    assert resting == plain
    assert p.stats.rested >= 1 and p.stats.woken == 1
    ends = [e for e in resting if "ConnectionEnd" in e and "40000" in e]
    assert len(ends) == 1 and "reason='fin'" in ends[0]


def test_a_syn_on_a_resting_connection_ends_it_and_starts_the_next() -> None:
    first = conversation(40000)
    filler = [conversation(40001 + i) for i in range(3)]
    again = pt.Conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 9092), isn_client=777_777,
                            ts=first.ts + 100_000_000)
    again.handshake().send(True, pt.api_versions_request(5)).send(False, pt.api_versions_response(5)).close()
    records = first.records + [r for c in filler for r in c.records] + again.records
    plain, _ = events(records)
    resting, p = events(records, soft_flows=2)
    assert resting == plain and p.stats.woken == 1
    reused = [e for e in resting if "reason='reused'" in e]
    assert len(reused) == 1 and "10.0.0.1:40000-10.0.0.2:9092#1" in reused[0]
    assert any("10.0.0.1:40000-10.0.0.2:9092#2" in e for e in resting)


def test_a_connection_with_only_its_handshake_rests_and_wakes_to_be_decoded() -> None:
    """A client that connected and waits (or a SYN flood) rests as its sequence numbers; its first request,
    whenever it comes, is detected and decoded as if it had stayed live."""
    first = pt.Conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 9092),
                            ts=1_700_000_000_000_000_000 - 1_000_000).handshake()
    rest_of_first = pt.Conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 9092))
    rest_of_first.seq, rest_of_first.ts = dict(first.seq), first.ts + 100_000_000
    rest_of_first.send(True, pt.api_versions_request(7)).send(False, pt.api_versions_response(7)).close()
    others = [conversation(40001 + i) for i in range(4)]
    records = first.records + [r for c in others for r in c.records] + rest_of_first.records
    plain, live = events(records)
    resting, p = events(records, soft_flows=2)
    assert resting == plain and p.stats.woken == 1
    assert p.stats.connections == live.stats.connections == {"kafka": 5}
    assert any("'x'" in e and "40000" in e and "'ok'" in e for e in resting)

    p = Pipeline(CaptureOptions())
    list(p.run(first.records, final=False))
    (flow,) = p.table.flows.values()
    record = rest(flow, p.table.words)
    assert record is not None and len(record) < 160 and not is_kafka(record)


def test_what_stays_live_and_what_a_record_costs() -> None:
    c = conversation(40000)
    mid = pt.Conversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 9092))
    mid.seq, mid.ts = dict(c.seq), c.ts + 1000
    mid.send(True, pt.metadata_request(9), ack_after=False)        # a request awaiting its response
    p = Pipeline(CaptureOptions())
    list(p.run(c.records, final=False))
    (flow,) = p.table.flows.values()
    record = rest(flow, p.table.words)
    assert record is not None and len(record) < 256                # a handful of numbers, not kilobytes
    list(p.run(mid.records, final=False))
    assert rest(flow, p.table.words) is None                       # in the middle of an exchange: stays live
    assert canonical(flow.key) == canonical(flow.rkey)


def test_at_the_cap_resting_connections_are_ended_first_and_reported() -> None:
    convs = [conversation(40000 + i) for i in range(12)]
    records = sorted((r for c in convs for r in c.records), key=lambda r: r[0])
    p = Pipeline(CaptureOptions(soft_flows=2, max_flows=10))
    got = list(p.run(records))
    assert p.stats.rested >= 8 and p.stats.evicted >= 1
    full = [ce.event for ce in got if isinstance(ce.event, Anomaly) and ce.event.kind == "flow_table_full"]
    assert len(full) >= 1
    ends = [(ce.conn.client_port, ce.event.reason) for ce in got if isinstance(ce.event, ConnectionEnd)]
    assert len(ends) == 12 and sum(reason == "evicted" for _, reason in ends) == p.stats.evicted
    assert min(port for port, reason in ends if reason == "end_of_capture") > \
        max(port for port, reason in ends if reason == "evicted")             # the oldest went
    assert sum(isinstance(ce.event, Exchange) for ce in got) == 12            # each ended after its exchange


_IDLE = """
import os, sys
sys.path.insert(0, ".")
from benchmarks.bench_state import idle_connections
from capture import CaptureOptions, Pipeline
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
p = Pipeline(CaptureOptions(ports=frozenset({9092}), max_flows=200_000))
run = p.run(idle_connections(120_000, 10_000), final=False)
marks = []
for n, _ in enumerate(run):
    if n in (20_000, 110_000):
        marks.append((n, rss()))
(a, ra), (b, rb) = marks
print((rb - ra) / (b - a))
"""


@pytest.mark.slow
def test_a_live_connection_at_rest_costs_well_under_a_kilobyte() -> None:
    """bench_state.py idle in small: the resident memory each more quiet connection costs (4.4 KB each
    before they rested)."""
    if not compiled.available():
        pytest.skip("measured on the compiled build")
    env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"}
    proc = subprocess.run([sys.executable, "-c", _IDLE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    per_connection = float(proc.stdout.split()[-1])
    assert per_connection < 700, per_connection
