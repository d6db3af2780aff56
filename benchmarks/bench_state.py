#!/usr/bin/env python3
"""Peak RSS stays flat however long the capture: the state caps at work.

    python benchmarks/bench_state.py connections [--count 2000000] [--rate 10000]
    python benchmarks/bench_state.py idle        [--count 300000] [--rate 10000] [--max-flows N]
    python benchmarks/bench_state.py unanswered  [--count 1000000]
    python benchmarks/bench_state.py synflood    [--count 2000000] [--rate 10000]

``connections``: a synthetic capture of COUNT short Kafka connections (handshake,
an ApiVersions request and its response, FIN both ways), RATE new connections per
second of capture time, each from its own client address and port.
``idle``: COUNT connections that never close (handshake, one ApiVersions request and its
response, the client's ACK), all still open at the end: the cost of a live connection at
rest, with the flow table raised to COUNT (``--max-flows``) so none is evicted.
``unanswered``: one connection on which the client sends COUNT Metadata requests
and the broker only acknowledges them, never answers.
``synflood``: COUNT SYNs from distinct addresses that are never answered.

Frames are built once (tests/capture/pcaptools.py) and re-addressed per connection,
then streamed through the capture pipeline and the dissector as a record source
(the file readers stream and add nothing that grows). Every tenth of the way it
prints the work done, current and peak RSS, the connections tracked and CPU time:
peak RSS should stop growing early and stay flat.
"""

from __future__ import annotations

import argparse
import os
import resource
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from capture import CaptureOptions, Pipeline  # noqa: E402
from dissector.events import Anomaly, Exchange  # noqa: E402
from tests.capture import pcaptools as pt  # noqa: E402

NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def rss_mb() -> tuple[float, float]:
    with open("/proc/self/statm") as f:
        current = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def short_connections(count: int, rate: int) -> Iterator[tuple[int, int, bytes, int]]:
    c = pt.Conversation(client=("10.0.0.1", 40000), server=("10.255.0.1", 9092), ts=0).handshake()
    c.send(True, pt.api_versions_request(1)).send(False, pt.api_versions_response(1)).close()
    yield from _readdressed(c.records, count, rate)


def idle_connections(count: int, rate: int) -> Iterator[tuple[int, int, bytes, int]]:
    c = pt.Conversation(client=("10.0.0.1", 40000), server=("10.255.0.1", 9092), ts=0).handshake()
    c.send(True, pt.api_versions_request(1)).send(False, pt.api_versions_response(1))
    yield from _readdressed(c.records, count, rate)


def _readdressed(records: list, count: int, rate: int) -> Iterator[tuple[int, int, bytes, int]]:  # type: ignore[type-arg]
    """``records`` of one connection, repeated COUNT times, each time from another client address and port."""
    template = [(ts, lt, bytes(data), from_client)
                for (ts, lt, data, _), from_client in zip(records, _from_client(records))]
    step = NS // rate
    pack_ip, pack_port = struct.Struct("!I").pack_into, struct.Struct("!H").pack_into
    for i in range(count):
        ip = (10 << 24) | (1 + i // 60000)
        port = 1024 + i % 60000
        base = T0 + i * step
        for ts, lt, data, from_client in template:
            frame = bytearray(data)
            pack_ip(frame, 26 if from_client else 30, ip)      # ethernet 14 + IPv4 src 12 / dst 16
            pack_port(frame, 34 if from_client else 36, port)
            yield base + ts, lt, bytes(frame), len(frame)


def syn_flood(count: int, rate: int) -> Iterator[tuple[int, int, bytes, int]]:
    c = pt.Conversation(client=("10.0.0.1", 40000), server=("10.255.0.1", 9092), ts=0)
    _, lt, data, _ = c.packet(True, pt.SYN)
    step = NS // rate
    pack_ip, pack_port = struct.Struct("!I").pack_into, struct.Struct("!H").pack_into
    for i in range(count):
        frame = bytearray(data)
        pack_ip(frame, 26, (10 << 24) | (1 + i // 60000))
        pack_port(frame, 34, 1024 + i % 60000)
        yield T0 + i * step, lt, bytes(frame), len(frame)


def _from_client(records: list) -> list[bool]:  # type: ignore[type-arg]
    return [rec[2][26:30] == bytes([10, 0, 0, 1]) for rec in records]


def unanswered(count: int) -> Iterator[tuple[int, int, bytes, int]]:
    c = pt.Conversation(client=("10.0.0.1", 40000), server=("10.255.0.1", 9092), ts=T0).handshake()
    for r in c.records:
        yield r
    for i in range(count):
        c.records.clear()
        c.send(True, pt.metadata_request(i & 0x7FFFFFFF), ack_after=(i % 8 == 7))
        yield from c.records
    c.records.clear()
    yield from c.close().records


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["connections", "idle", "unanswered", "synflood"])
    ap.add_argument("--count", type=int, default=None, help="connections (2,000,000) or requests (1,000,000)")
    ap.add_argument("--rate", type=int, default=10_000, help="new connections per second of capture time")
    ap.add_argument("--max-flows", type=int, default=None,
                    help="the flow table's cap (default: CaptureOptions'; idle: COUNT, so nothing is evicted)")
    args = ap.parse_args()
    count = args.count or {"unanswered": 1_000_000, "idle": 300_000}.get(args.kind, 2_000_000)
    options = CaptureOptions(ports=frozenset({9092}))
    if args.kind == "connections":
        source, per_unit = short_connections(count, args.rate), 10     # packets per connection
    elif args.kind == "idle":
        source, per_unit = idle_connections(count, args.rate), 7
        options.max_flows = max(options.max_flows, count)
    elif args.kind == "synflood":
        source, per_unit = syn_flood(count, args.rate), 1
    else:
        source, per_unit = unanswered(count), 1                      # about a packet per request
    if args.max_flows is not None:
        options.max_flows = args.max_flows
    p = Pipeline(options)
    print(f"{args.kind}: {count:,}  (load {open('/proc/loadavg').read().split()[0]})")
    print(f"{'done':>10} {'packets':>11} {'rss MB':>8} {'peak MB':>8} {'flows':>8} {'exchanges':>10} "
          f"{'anomalies':>9} {'cpu s':>8}")
    exchanges = anomalies = 0
    check = max(1, count * per_unit // 10)
    next_at = check
    cpu0 = time.process_time()

    def line(done: str) -> None:
        cur, peak = rss_mb()
        print(f"{done:>10} {p.stats.packets:>11,} {cur:8.1f} {peak:8.1f} {len(p.table):>8,} {exchanges:>10,} "
              f"{anomalies:>9,} {time.process_time() - cpu0:8.1f}", flush=True)

    def progress(stats: object) -> None:
        nonlocal next_at
        if p.stats.packets >= next_at:
            next_at += check
            line(f"{min(100, round(100 * p.stats.packets / (count * per_unit)))}%")

    p.on_progress = progress              # every 4096 packets, events or not
    for ce in p.run(source):
        ev = ce.event
        if isinstance(ev, Exchange):
            exchanges += 1
        elif isinstance(ev, Anomaly):
            anomalies += 1
    line("end")
    print(f"evicted {p.stats.evicted:,}; connections {p.stats.connections}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
