"""`kdissect analyze` at scale: wall time, CPU time and peak memory of the whole process tree (Python + JVM).

    python benchmarks/bench_analyze.py DATASET [DATASET...] [--copies N] [--master local[2]] [--keep DIR]

Builds a dataset of N copies of the given datasets (each copy's ``capture`` column renamed, so copies
stay distinct connections and exchanges, not duplicates), then runs ``kdissect analyze --json`` on it
and reports exchanges, wall seconds, CPU seconds and the peak summed RSS of kdissect and its JVM,
sampled every 0.2 s from /proc. Big real captures come from ``sudo python benchmarks/make_capture.py``
decoded with ``kdissect decode``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

TABLES = ("exchanges", "partitions", "anomalies", "records")


def replicate(sources: list[Path], copies: int, out: Path) -> int:
    """Write ``copies`` renamed copies of every table file; return the number of exchanges."""
    exchanges = 0
    for table in TABLES:
        for src in sources:
            files = sorted((src / table).glob("*.parquet")) if (src / table).is_dir() else []
            if not files:
                continue
            (out / table).mkdir(parents=True, exist_ok=True)
            for f in files:
                t = pq.read_table(f)
                for i in range(copies):
                    capture = pc.binary_join_element_wise(pa.scalar(f"copy{i}-"), t["capture"], "")
                    copy = t.set_column(t.schema.get_field_index("capture"), "capture", capture)
                    pq.write_table(copy, out / table / f"{src.name}-{i}-{f.name}", compression="zstd")
                    if table == "exchanges":
                        exchanges += copy.num_rows
    return exchanges


def tree_usage(pid: int, cpu: dict[int, float]) -> int:
    """Summed RSS (bytes) of ``pid`` and all its descendants; their CPU seconds so far go into ``cpu``.

    /proc is read rather than getrusage: pyspark does not wait for its JVM, so the JVM's CPU never
    reaches RUSAGE_CHILDREN.
    """
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    ticks: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        p = int(entry)
        children.setdefault(int(fields[1]), []).append(p)
        rss[p] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        ticks[p] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        if p in ticks:
            cpu[p] = max(cpu.get(p, 0.0), ticks[p])
        stack.extend(children.get(p, []))
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep", type=Path, help="build the replicated dataset here and keep it")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kdissect-bench-analyze-"))
    ds = args.keep or work / "ds"
    try:
        t0 = time.monotonic()
        n = replicate(args.datasets, args.copies, ds)
        print(f"dataset: {n} exchanges in {ds} (built in {time.monotonic() - t0:.1f} s)", flush=True)
        print(f"load before: {open('/proc/loadavg').read().strip()}", flush=True)
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "kdissect", "analyze", str(ds), "--master", args.master,
                                 "--json", str(work / "results.json")], stdout=subprocess.DEVNULL)
        peak, per_pid = 0, {}
        while proc.poll() is None:
            peak = max(peak, tree_usage(proc.pid, per_pid))
            time.sleep(0.2)
        wall = time.monotonic() - t0
        cpu = sum(per_pid.values())  # CPU of each process of the tree at its last sighting
        print(f"load after: {open('/proc/loadavg').read().strip()}")
        print(f"kdissect analyze --master {args.master}: exit {proc.returncode}, {n} exchanges, wall {wall:.1f} s, "
              f"CPU {cpu:.1f} s (python + JVM, sampled), peak RSS (python + JVM) {peak / 2**20:.0f} MiB")
        return proc.returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
