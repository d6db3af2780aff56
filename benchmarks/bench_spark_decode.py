#!/usr/bin/env python3
"""``kdissect decode`` versus ``kdissect spark-decode`` with 1 and 2 executor cores (not a timed test).

    python benchmarks/bench_spark_decode.py LARGE.pcap [SMALL...] [--work /tmp/bench-spark]

LARGE: one large real capture (``benchmarks/make_capture.py`` writes them);
SMALL: the small captures (default: the bundled samples and the public captures).
Each case runs as its own process; wall time is reported for all, CPU time
only for ``decode`` (getrusage of waited children does not see the JVM and its
Python workers, which the command does not wait for itself), and
every spark-decode output is checked row for row against decode's. Spark's
fixed overhead is the spark-decode time of the smallest sample minus its
decode time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO.parent / "shared" / "public-captures"      # shared/ beside the checkout


def rows(outdir: Path) -> dict[str, list[str]]:
    return {t: sorted(repr(r) for f in sorted((outdir / t).glob("*.parquet")) for r in pq.read_table(f).to_pylist())
            for t in ("exchanges", "partitions", "anomalies")}


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it started)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "kdissect", *args, "-q"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("large")
    ap.add_argument("small", nargs="*")
    ap.add_argument("--work", default="/tmp/bench-spark-decode")
    a = ap.parse_args()
    small = [Path(p) for p in a.small] or sorted((REPO / "samples").glob("*.pcap")) + sorted(PUBLIC.glob("*.pcap*"))
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    (work / "small").mkdir(parents=True)
    for p in small:
        shutil.copy(p, work / "small" / p.name)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    tiny = min(small, key=lambda p: p.stat().st_size)
    cases = [
        ("large", "decode -j1", ["decode", a.large, "--jobs", "1"]),
        ("large", "spark local[1]", ["spark-decode", a.large, "--master", "local[1]", "--shards", "1"]),
        ("large", "spark local[2]", ["spark-decode", a.large, "--master", "local[2]", "--shards", "2"]),
        ("small", "decode -j1", ["decode", str(work / "small"), "--jobs", "1"]),
        ("small", "spark local[1]", ["spark-decode", str(work / "small"), "--master", "local[1]"]),
        ("small", "spark local[2]", ["spark-decode", str(work / "small"), "--master", "local[2]"]),
        ("tiny", "decode -j1", ["decode", str(tiny), "--jobs", "1"]),
        ("tiny", "spark local[1]", ["spark-decode", str(tiny), "--master", "local[1]"]),
    ]
    print(f"load before: {open('/proc/loadavg').read().strip()}")
    print(f"large: {a.large} ({os.path.getsize(a.large) / 1e6:.1f} MB); small: {len(small)} files; tiny: {tiny.name}")
    times: dict[tuple[str, str], float] = {}
    reference: dict[str, dict[str, list[str]]] = {}
    for what, label, args in cases:
        out = work / f"{what}-{label.replace(' ', '_').replace('[', '').replace(']', '')}"
        wall, cpu = run([*args, "-o", str(out)], env)
        times[(what, label)] = wall
        got = rows(out)
        if label.startswith("decode"):
            reference[what] = got
            same = "reference"
        else:
            same = "identical" if got == reference[what] else "DIFFERENT"
        shown = f"{cpu:8.1f} s" if label.startswith("decode") else "     n/a  "
        print(f"{what:6} {label:15} wall {wall:8.1f} s  cpu {shown}  rows {same}", flush=True)
    for what in ("large", "small"):
        one, two = times[(what, "spark local[1]")], times[(what, "spark local[2]")]
        print(f"{what}: 2 cores / 1 core speed-up {one / two:.2f}x")
    print(f"Spark fixed overhead (tiny capture): {times[('tiny', 'spark local[1]')] - times[('tiny', 'decode -j1')]:.1f} s")
    print(f"load after: {open('/proc/loadavg').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
