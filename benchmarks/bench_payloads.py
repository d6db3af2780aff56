#!/usr/bin/env python3
"""Record payload decoding: ``decode --records --schemas`` against ``decode --records`` on a large Avro capture.

    sudo python benchmarks/bench_payloads.py make [--kind event|order] [--out benchmarks/data] [--records 200000]
    python benchmarks/bench_payloads.py run [--kind event|order] [--data benchmarks/data] [--rounds 3]

``make`` records ``avro-<kind>.pcap`` as ``samples/record_payloads.py`` records its samples, at scale: a
netns (lo MTU 1500, no GSO), tansu, tcpdump with a 256 MiB buffer, one confluent-kafka
``SerializingProducer`` with ``AvroSerializer`` (mock:// registry) writing ``--records`` distinct values
lz4-compressed (``event``: a typical flat PageView event; ``order``: the samples' feature-packed Order),
then a consumer reading them back; the registry's schemas go to ``avro-<kind>.schemas/``. Not committed (hundreds of MB).

``run`` decodes it with ``kdissect decode -j 1 -q`` both ways, alternating, ``--rounds`` times each, in
one run (the machine may be shared: compare figures of one run only), and prints wall and CPU seconds,
records per second and peak RSS, then the ratio. "Memory flat in the number of records": the same decode
on the first quarter of the capture (``tcpdump -r ... -c``) must peak at about the same RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TANSU_PORT = 9092
# Two value schemas: a typical flat event (eight fields: longs, strings, an enum, a timestamp, a double,
# a boolean, a nullable string), and the samples' feature-packed Order (decimal, timestamp, date, enum,
# an array of records, a map, bytes, a union of two records), the costliest to read.
EVENT = {"type": "record", "name": "PageView", "namespace": "kd.bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "CLICK", "BUY"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "url", "type": "string"}, {"name": "duration", "type": "double"},
    {"name": "mobile", "type": "boolean"}, {"name": "referrer", "type": ["null", "string"], "default": None}]}


def event(i: int) -> dict:
    import datetime as dt
    return {"id": i, "user": f"user-{i % 9973}", "kind": ("VIEW", "CLICK", "BUY")[i % 3],
            "at": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=37 * i),
            "url": f"https://shop.example/p/{i % 5000}", "duration": (i % 977) / 7,
            "mobile": bool(i & 1), "referrer": None if i % 4 else f"https://ref.example/{i % 31}"}


def produce(bootstrap: str, count: int, schemas: str, kind: str) -> None:
    """Inside the netns: ``count`` Avro values, then a consumer reading them back."""
    sys.path.insert(0, str(REPO / "samples"))
    from record_payloads import ORDER_V1, order, _export_schemas
    from confluent_kafka import Consumer, SerializingProducer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import StringSerializer

    sr = SchemaRegistryClient.new_client({"url": "mock://bench"})
    p = SerializingProducer({"bootstrap.servers": bootstrap, "client.id": "kd-bench-avro", "compression.type": "lz4",
                             "linger.ms": 20, "key.serializer": StringSerializer("utf_8"),
                             "value.serializer": AvroSerializer(sr, json.dumps(ORDER_V1 if kind == "order"
                                                                               else EVENT))})
    make_value = order if kind == "order" else event
    for i in range(count):                           # every value distinct, as in real traffic
        p.produce("orders", key=f"order-{i % 1000}", value=make_value(i))
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(120)
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": "kd-bench-reader", "group.id": "kd-bench",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["orders"])
    got, deadline = 0, time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            got += not m.error()
    c.close()
    _export_schemas(sr, Path(schemas))
    print(json.dumps({"produced": count, "consumed": got}))


def make(out: Path, count: int, kind: str) -> None:
    from tests.brokers import netns, run_tansu, tcpdump
    out.mkdir(parents=True, exist_ok=True)
    pcap = out / f"avro-{kind}.pcap"
    schemas = out / f"avro-{kind}.schemas"
    shutil.rmtree(schemas, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as tmp, ExitStack() as stack:
        ns = stack.enter_context(netns("kd-bench-payloads"))
        bs = stack.enter_context(run_tansu(TANSU_PORT, ns=ns, log=Path(tmp) / "tansu.log"))
        with tcpdump(pcap, ns=ns, bpf=["tcp", "port", str(TANSU_PORT)]):
            proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, __file__, "produce", "--bootstrap", bs,
                                   "--records", str(count), "--schemas", str(schemas), "--kind", kind],
                                  capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                sys.exit(proc.stderr[-3000:])
    print(proc.stdout.strip(), f"{pcap}: {pcap.stat().st_size / 1e6:.1f} MB")


def _decode(pcap: Path, out: Path, extra: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS bytes) of one ``kdissect decode`` process."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "kdissect"), "decode", str(pcap), "-o", str(out), "-q",
                    "-j", "1", "--records", *extra], check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss * 1024          # ru_maxrss: the largest child so far, in KiB


def _rss(pcap: Path, out: Path, extra: list[str]) -> int:
    """Peak RSS of one decode, in a fresh process (so earlier, larger children do not mask it)."""
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-c", code, str(Path(sys.executable).parent / "kdissect"), "decode",
                           str(pcap), "-o", str(out), "-q", "-j", "1", "--records", *extra],
                          check=True, capture_output=True, text=True)
    return int(proc.stdout.split()[-1]) * 1024


def run(data: Path, rounds: int, kind: str) -> None:
    pcap = data / f"avro-{kind}.pcap"
    schemas = data / f"avro-{kind}.schemas"
    if not pcap.exists():
        sys.exit(f"{pcap}: missing; record it first: sudo python {sys.argv[0]} make")
    import pyarrow.dataset as pads
    with tempfile.TemporaryDirectory(prefix="kd-bench-out-") as tmp:
        tmpd = Path(tmp)
        modes = {"records": [], "records+schemas": ["--schemas", str(schemas)]}
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for _ in range(rounds):
            for mode, extra in modes.items():              # alternating: both see the same machine load
                wall, cpu, _ = _decode(pcap, tmpd / mode, extra)
                times[mode].append((wall, cpu))
        rows = pads.dataset(tmpd / "records+schemas" / "records").to_table(columns=["value_decoded"])
        n = rows.num_rows
        decoded = n - rows.column("value_decoded").null_count
        quarter = tmpd / "quarter.pcap"
        packets = int(subprocess.run(["tcpdump", "-r", str(pcap), "-q"], capture_output=True, text=True)
                      .stdout.count("\n"))
        subprocess.run(["tcpdump", "-r", str(pcap), "-w", str(quarter), "-c", str(packets // 4)],
                       check=True, capture_output=True)
        rss = {(mode, part): _rss(p, tmpd / f"rss-{mode}-{part}", extra)
               for part, p in (("full", pcap), ("quarter", quarter)) for mode, extra in modes.items()}
    print(f"capture {pcap.name}: {pcap.stat().st_size / 1e6:.1f} MB, {n:,} record rows, {decoded:,} values decoded")
    best = {}
    for mode in modes:
        walls = [w for w, _ in times[mode]]
        cpus = [c for _, c in times[mode]]
        best[mode] = min(cpus)
        print(f"  --{mode:16s} wall {' '.join(f'{w:6.2f}' for w in walls)} s   CPU {' '.join(f'{c:6.2f}' for c in cpus)} s"
              f"   {n / min(cpus):,.0f} records/CPU-s   peak RSS {rss[(mode, 'full')] / 2**20:.0f} MiB "
              f"(first quarter: {rss[(mode, 'quarter')] / 2**20:.0f} MiB)")
    print(f"  speed with --schemas / without (best CPU): {best['records'] / best['records+schemas']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", default=str(REPO / "benchmarks" / "data"))
    m.add_argument("--records", type=int, default=200_000)
    m.add_argument("--kind", choices=("event", "order"), default="event")
    r = sub.add_parser("run")
    r.add_argument("--data", default=str(REPO / "benchmarks" / "data"))
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--kind", choices=("event", "order"), default="event")
    w = sub.add_parser("produce")            # inside the netns (make)
    w.add_argument("--bootstrap")
    w.add_argument("--records", type=int)
    w.add_argument("--schemas")
    w.add_argument("--kind")
    args = ap.parse_args()
    if args.cmd == "make":
        if os.geteuid() != 0:
            sys.exit("needs root (ip netns, tcpdump)")
        make(Path(args.out), args.records, args.kind)
    elif args.cmd == "produce":
        produce(args.bootstrap, args.records, args.schemas, args.kind)
    else:
        run(Path(args.data), args.rounds, args.kind)


if __name__ == "__main__":
    main()
