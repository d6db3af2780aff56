#!/usr/bin/env python3
"""``kdissect decode`` end to end against ``tshark -T fields`` on the same capture.

    python benchmarks/bench_vs_tshark.py [CAPTURE ...] [--no-half] [--repeat N]

Default captures: benchmarks/data/many-small-produce.pcap and large-batches.pcap
(written by ``sudo python benchmarks/make_capture.py``). Each tool runs in its
own child process; wall time is the best of ``--repeat`` runs, peak memory the
child's max RSS from ``wait4``. Each capture is also run cut to its first half
of packets: a peak RSS that stays put from half to full shows memory does not
grow with the capture. tshark gets the Kafka ports kdissect found
(``-d tcp.port==P,kafka``) and prints the fields of the comparison: time,
stream, api key, version, correlation id, client id, error, topic, partition.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
DEFAULT = ("many-small-produce.pcap", "large-batches.pcap")

TSHARK_FIELDS = ("frame.time_epoch", "tcp.stream", "kafka.request_key", "kafka.request.version",
                 "kafka.correlation_id", "kafka.client_id", "kafka.error", "kafka.topic_name",
                 "kafka.partition_id")

PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
               b"\xa1\xb2\x3c\x4d": ">"}


@dataclass
class Run:
    wall: float        # seconds, best of the repeats
    rss_mb: float      # peak resident set of the child, MiB (max over repeats)


def measure(cmd: list[str], repeat: int, env: dict[str, str] | None = None, stdout=subprocess.DEVNULL) -> Run:
    """Wall time and peak RSS of ``cmd`` in a child of its own."""
    best, peak = float("inf"), 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN would mix in earlier runs).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0:
            sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{err[-2000:]}")
        best, peak = min(best, wall), max(peak, usage.ru_maxrss / 1024)   # ru_maxrss: KiB on Linux
    return Run(best, peak)


def pcap_packets(path: Path) -> tuple[int, str]:
    """Packet count of a classic pcap, and its byte order."""
    with path.open("rb") as f:
        head = f.read(24)
        order = PCAP_MAGICS.get(head[:4])
        if order is None:
            raise ValueError(f"{path}: not a classic pcap (use editcap to cut pcapng)")
        rec = struct.Struct(order + "IIII")
        n = 0
        while len(hdr := f.read(16)) == 16:
            f.seek(rec.unpack(hdr)[2], os.SEEK_CUR)
            n += 1
    return n, order


def cut_pcap(src: Path, dst: Path, packets: int, order: str) -> None:
    """The first ``packets`` records of ``src`` as a pcap of their own."""
    rec = struct.Struct(order + "IIII")
    with src.open("rb") as f, dst.open("wb") as out:
        out.write(f.read(24))
        for _ in range(packets):
            hdr = f.read(16)
            if len(hdr) < 16:
                break
            out.write(hdr + f.read(rec.unpack(hdr)[2]))


def kafka_ports(dataset: Path) -> list[int]:
    import pyarrow.dataset as ds
    table = ds.dataset(dataset / "exchanges", format="parquet").to_table(columns=["broker_port"])
    return sorted({p for p in table.column("broker_port").to_pylist() if p is not None})


def bench(path: Path, work: Path, repeat: int, records: bool) -> tuple[int, Run, Run, list[int]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = work / f"{path.stem}-dataset"
    cmd = [sys.executable, "-m", "kdissect", "decode", str(path), "-o", str(out), "-q"]
    ours = measure(cmd + ["--records"] if records else cmd, repeat, env)
    ports = kafka_ports(out) or [9092]
    cmd = ["tshark", "-n", "-r", str(path)]
    for p in ports:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    cmd += ["-Y", "kafka", "-T", "fields"] + [a for f in TSHARK_FIELDS for a in ("-e", f)]
    with (work / f"{path.stem}-tshark.tsv").open("wb") as tsv:   # written out, as kdissect writes Parquet
        theirs = measure(cmd, repeat, stdout=tsv)
    return pcap_packets(path)[0], ours, theirs, ports


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement; the best wall time counts")
    ap.add_argument("--no-half", action="store_true", help="skip the half-capture runs")
    ap.add_argument("--records", action="store_true",
                    help="kdissect also decodes every record (the records table), as tshark does for display")
    args = ap.parse_args(argv)

    if shutil.which("tshark") is None:
        print("tshark not found: apt-get install tshark", file=sys.stderr)
        return 1
    captures = args.captures or [DATA / name for name in DEFAULT]
    missing = [c for c in captures if not c.exists()]
    if missing:
        for c in missing:
            print(f"missing {c}: make it with  sudo python benchmarks/make_capture.py --only {c.stem}",
                  file=sys.stderr)
        captures = [c for c in captures if c.exists()]
        if not captures:
            return 2

    rows = []
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as tmp:
        work = Path(tmp)
        for cap in captures:
            runs = [(cap.name, cap)]
            if not args.no_half:
                total, order = pcap_packets(cap)
                half = work / f"{cap.stem}-half.pcap"
                cut_pcap(cap, half, total // 2, order)
                runs.insert(0, (f"{cap.name} (first half)", half))
            for label, path in runs:
                packets, ours, theirs, ports = bench(path, work, args.repeat, args.records)
                rows.append((label, path.stat().st_size, packets, ours, theirs, ports))
                print(f"done: {label}", file=sys.stderr, flush=True)

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; best of {args.repeat} run(s); "
          f"kdissect {'with' if args.records else 'without'} --records")
    print(f"{'capture':<40} {'MB':>7} {'packets':>9}  {'tool':<8} {'wall s':>7} {'MB/s':>7} "
          f"{'peak RSS MB':>11}")
    for label, size, packets, ours, theirs, ports in rows:
        mb = size / 1e6
        for i, (tool, r) in enumerate((("kdissect", ours), ("tshark", theirs))):
            head = f"{label:<40} {mb:>7.1f} {packets:>9,}" if i == 0 else " " * 58
            print(f"{head}  {tool:<8} {r.wall:>7.2f} {mb / r.wall:>7.1f} {r.rss_mb:>11.0f}")
        print(" " * 58 + f"  tshark/kdissect: time {theirs.wall / ours.wall:.2f}x, "
              f"memory {theirs.rss_mb / ours.rss_mb:.2f}x  (ports {','.join(map(str, ports))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
