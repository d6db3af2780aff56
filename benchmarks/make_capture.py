#!/usr/bin/env python3
"""Write LARGE real Kafka captures for benchmarks (not committed).

    sudo python benchmarks/make_capture.py [--out benchmarks/data] [--scale 1.0]
                                           [--only NAME,...] [--broker tansu|mock]
                                           [--producers N] [--value-bytes B]

many-small-produce.pcap  ~200k Produce requests of one small record each
                         (librdkafka linger.ms=0, batch.num.messages=1, acks=1),
                         several producer processes in parallel; ~150 MB at scale 1.
large-batches.pcap       lz4 batches of 64 KB+ (linger.ms=50), then the same data
                         fetched back by a consumer; ~200 MB at scale 1.

Fixed-size shapes (--scale multiplies them too; the names say their size at 1):

one-conn-small-20k.pcap  20,000 one-record Produce exchanges on ONE producer
one-conn-small-200k.pcap connection (one librdkafka producer, the same settings,
                         a 40-byte value; its bootstrap connection carries a few
                         more): ~7.5 MB and ~74 MB. A capture that cannot be
                         split by connection.
large-batches-54mb.pcap  large-batches at 0.27 and 2.68 of its size: ~54 MB
large-batches-537mb.pcap (~75 exchanges) and ~537 MB (~565: Produce requests of
                         0.35-0.5 MB, Fetch responses of ~5.6 MB).

The default (no --only) writes many-small-produce and large-batches.
--producers and --value-bytes override a shape's producer count and value size.

Same technique as samples/record.py: a netns whose lo has MTU 1500 and no
GSO (so every frame is <= 1514 bytes), tcpdump on it, broker and clients
inside it. Beside each pcap, <name>.json holds what the clients reported.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.brokers import in_netns, netns, run_tansu, tcpdump

TANSU_PORT = 9092

# Per-capture sizing at --scale 1.
SMALL_REQUESTS = 200_000
SMALL_VALUE = 400          # bytes; ~750 B of frames per request/response pair
SMALL_PRODUCERS = 4
ONE_CONN_VALUE = 40        # bytes; ~380 B of frames per request/response pair
LARGE_RECORDS = 90_000
LARGE_VALUE = 2048         # half random, half text: lz4 gets ~50%, batches stay 64 KB+
LARGE_PRODUCERS = 2


@dataclass(frozen=True)
class Shape:
    kind: str              # "small": one-record Produce requests; "large": lz4 batches, fetched back
    records: int           # at --scale 1
    producers: int
    value: int             # bytes per record value (large: half random, half text)


SHAPES = {
    "many-small-produce": Shape("small", SMALL_REQUESTS, SMALL_PRODUCERS, SMALL_VALUE),
    "large-batches": Shape("large", LARGE_RECORDS, LARGE_PRODUCERS, LARGE_VALUE),
    "one-conn-small-20k": Shape("small", 20_000, 1, ONE_CONN_VALUE),
    "one-conn-small-200k": Shape("small", 200_000, 1, ONE_CONN_VALUE),
    "large-batches-54mb": Shape("large", round(LARGE_RECORDS * 0.27), LARGE_PRODUCERS, LARGE_VALUE),
    "large-batches-537mb": Shape("large", round(LARGE_RECORDS * 2.68), LARGE_PRODUCERS, LARGE_VALUE),
}
DEFAULT_SHAPES = ("many-small-produce", "large-batches")


# --------------------------------------------------------------------------
# Workers: run inside the netns, print one JSON line with what the client reported

def _produce(bootstrap: str, cid: str, topic: str, partition: int, count: int, value,
             conf: dict) -> dict:
    """Produce `count` records; `value(i)` gives the i-th value."""
    from confluent_kafka import Producer
    stats = {"client_id": cid, "topic": topic, "partition": partition, "delivered": 0, "errors": {},
             "min_offset": None, "max_offset": None}

    def cb(err, msg):
        if err is not None:
            stats["errors"][err.name()] = stats["errors"].get(err.name(), 0) + 1
            return
        stats["delivered"] += 1
        off = msg.offset()
        stats["min_offset"] = off if stats["min_offset"] is None else min(stats["min_offset"], off)
        stats["max_offset"] = off if stats["max_offset"] is None else max(stats["max_offset"], off)

    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid, **conf})
    t0 = time.monotonic()
    for i in range(count):
        key = b"k%08d" % i
        while True:
            try:
                p.produce(topic, value(i), key, partition=partition, on_delivery=cb)
                break
            except BufferError:  # local queue full: let deliveries drain
                p.poll(0.05)
        p.poll(0)
    stats["undelivered"] = p.flush(120)
    stats["seconds"] = round(time.monotonic() - t0, 2)
    return stats


def worker_small(bootstrap: str, index: int, count: int, size: int) -> dict:
    fixed = random.Random(index).randbytes((size + 1) // 2).hex().encode()[:size]
    # One partition per producer: every request then carries exactly one record.
    return _produce(bootstrap, f"kd-bench-small-{index}", "bench-small", index, count, lambda i: fixed,
                    {"linger.ms": 0, "batch.num.messages": 1, "acks": 1,
                     "queue.buffering.max.messages": 50_000})


def worker_large_produce(bootstrap: str, index: int, count: int, size: int) -> dict:
    # Fresh random half per record: identical values would let lz4 shrink a batch to nothing.
    rnd = random.Random(index)
    half = size // 2
    text = (b"kafka-dissect benchmark payload " * (half // 32 + 1))[:half]
    return _produce(bootstrap, f"kd-bench-large-{index}", "bench-large", index, count,
                    lambda i: rnd.randbytes(half) + text,
                    {"linger.ms": 50, "batch.size": 1_000_000, "batch.num.messages": 10_000,
                     "compression.type": "lz4", "acks": 1, "queue.buffering.max.kbytes": 262_144})


def worker_large_consume(bootstrap: str, partitions: int, count: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": "kd-bench-large-consumer",
                  "group.id": "kd-bench-large", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 4_194_304})
    c.assign([TopicPartition("bench-large", p, 0) for p in range(partitions)])
    stats = {"client_id": "kd-bench-large-consumer", "consumed": {}, "errors": {}}
    got = 0
    t0 = time.monotonic()
    idle_until = time.monotonic() + 60
    while got < count and time.monotonic() < idle_until:
        for m in c.consume(10_000, 1.0):
            if m.error():
                stats["errors"][m.error().name()] = stats["errors"].get(m.error().name(), 0) + 1
                continue
            s = stats["consumed"].setdefault(str(m.partition()), {"count": 0, "min_offset": m.offset()})
            s["count"] += 1
            s["max_offset"] = m.offset()
            got += 1
            idle_until = time.monotonic() + 60
    c.close()
    stats["seconds"] = round(time.monotonic() - t0, 2)
    return stats


def worker_mock_host() -> None:
    """Host a librdkafka mock cluster until stdin closes; print its bootstrap first."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": "unused:9092", "client.id": "kd-bench-mock-host",
                  "test.mock.num.brokers": 1})
    md = p.list_topics(timeout=10)
    print(",".join(f"{b.host}:{b.port}" for b in md.brokers.values()), flush=True)
    sys.stdin.read()


# --------------------------------------------------------------------------
# Orchestration

def spawn(ns: str, *args: str, stdin=None) -> subprocess.Popen:
    return subprocess.Popen(in_netns(ns, [sys.executable, __file__, "--worker", *args]),
                            stdout=subprocess.PIPE, stdin=stdin, text=True)


def run_workers(ns: str, jobs: list[list[str]]) -> list[dict]:
    procs = [spawn(ns, *j) for j in jobs]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"worker failed ({p.returncode}): {p.args}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def split(total: int, n: int) -> list[int]:
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def make(name: str, shape: Shape, out_dir: Path, scale: float, broker: str) -> None:
    pcap = out_dir / f"{name}.pcap"
    t0 = time.monotonic()
    with ExitStack() as stack:
        ns = stack.enter_context(netns(f"kd-bench-{name}"[:30]))
        host = None
        if broker == "tansu":
            bs = stack.enter_context(run_tansu(TANSU_PORT, ns=ns))
        else:
            host = spawn(ns, "mock-host", stdin=subprocess.PIPE)
            bs = host.stdout.readline().strip()
            stack.callback(host.wait)
            stack.callback(host.stdin.close)
        stack.enter_context(tcpdump(pcap, ns=ns))
        counts = split(max(1, int(shape.records * scale)), shape.producers)
        if shape.kind == "small":
            results = run_workers(ns, [["small", bs, str(i), str(n), str(shape.value)]
                                       for i, n in enumerate(counts)])
        else:
            results = run_workers(ns, [["large-produce", bs, str(i), str(n), str(shape.value)]
                                       for i, n in enumerate(counts)])
            delivered = sum(r["delivered"] for r in results)
            results += run_workers(ns, [["large-consume", bs, str(shape.producers), str(delivered)]])
    secs = time.monotonic() - t0
    size = pcap.stat().st_size
    summary = {"capture": pcap.name, "broker": broker, "bootstrap": bs, "scale": scale,
               "producers": shape.producers, "value_bytes": shape.value,
               "seconds": round(secs, 1), "bytes": size, "clients": results}
    (out_dir / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{name}: {size / 1e6:.1f} MB in {secs:.1f}s ({broker}); "
          + "; ".join(f"{r['client_id']}: {r.get('delivered', sum(s['count'] for s in r.get('consumed', {}).values()))}"
                      for r in results))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "data"))
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies record counts (0.05 = quick test)")
    ap.add_argument("--only", help="comma-separated names: " + ",".join(SHAPES))
    ap.add_argument("--broker", choices=["tansu", "mock"], default="tansu")
    ap.add_argument("--producers", type=int, help="producer connections (default: the shape's)")
    ap.add_argument("--value-bytes", type=int, help="bytes per record value (default: the shape's)")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "mock-host":
            worker_mock_host()
            return
        fn = {"small": worker_small, "large-produce": worker_large_produce,
              "large-consume": worker_large_consume}[kind]
        print(json.dumps(fn(rest[0], *map(int, rest[1:]))), flush=True)
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tcpdump)")
    names = args.only.split(",") if args.only else list(DEFAULT_SHAPES)
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        sys.exit(f"unknown capture {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        shape = SHAPES[name]
        if args.producers:
            shape = replace(shape, producers=args.producers)
        if args.value_bytes:
            shape = replace(shape, value=args.value_bytes)
        make(name, shape, out, args.scale, args.broker)


if __name__ == "__main__":
    main()
