"""`kdissect analyze` / `kdissect doctor`, cold or warm: wall, CPU, peak memory (Python + JVM) and Spark jobs.

    python benchmarks/bench_analyze.py DATASET [DATASET...] [--copies N] [--engine sail --engine spark] [--keep DIR]
    python benchmarks/bench_analyze.py --doctor CAPTURE [CAPTURE...]
    python benchmarks/bench_analyze.py DATASET --remote sc://127.0.0.1:15002      # warm: a running server
    python benchmarks/bench_analyze.py DATASET --tree ../main --tree . --repeat 3  # before/after, alternating
    python benchmarks/bench_analyze.py DATASET --anchor                           # beside Spark's floor

Builds a dataset of N copies of the given datasets (each copy's ``capture`` column renamed, so copies
stay distinct connections and exchanges, not duplicates), then runs ``kdissect analyze --json`` on it
(``--doctor``: ``kdissect doctor --json`` on the captures) and reports per run:

* wall seconds, and CPU seconds and peak summed RSS of the command's whole process tree (kdissect and
  the JVM it starts), sampled every 0.1 s from /proc;
* the number of Spark jobs, counted from the Spark event log (its ``SparkListenerJobStart`` events,
  written by Spark's own event-logging listener, switched on through ``PYSPARK_SUBMIT_ARGS``) -- cold
  runs only: a Spark Connect server keeps its own log.

``--engine`` (repeatable; default ``sail``) runs on the embedded engine (``sail``: Sail in kdissect's own
process) or JVM Spark (``spark``, on ``--master``); given both, every round runs each, one after the other,
their answers are compared table by table (rows in any order, floats to 6 significant digits:
``tests/analysis/engines.py``) and each engine's median time is set against JVM Spark's.

``--tree DIR`` (repeatable) runs the kdissect of that checkout (``PYTHONPATH=DIR``) with this Python;
runs alternate between trees, so before and after share the machine's load, and the results JSON of
every tree is compared with the first's (``answers: same`` or the tables that differ). The load average
is printed around every run: the figures are only comparable on an otherwise idle machine.

``--anchor`` adds, in every round, ``benchmarks/anchors.py spark`` (a bare PySpark program: the same
reads and twenty aggregations of the same kinds, on the same master or server), measured the same way,
and DuckDB's figure once. A shared machine's speed drifts from one day to the next: the ratio of
kdissect's time to the anchor's, measured side by side, is what stays comparable.

Big real captures come from ``sudo python benchmarks/make_capture.py`` decoded with ``kdissect decode``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.analysis.engines import differences as engine_differences  # noqa: E402

TABLES = ("exchanges", "partitions", "anomalies", "records")
ANCHORS = Path(__file__).with_name("anchors.py")


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
    page, hz = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
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
        rss[p] = int(fields[21]) * page
        ticks[p] = (int(fields[11]) + int(fields[12])) / hz
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        if p in ticks:
            cpu[p] = max(cpu.get(p, 0.0), ticks[p])
        stack.extend(children.get(p, []))
    return total


def spark_jobs(event_dir: Path) -> int | None:
    """Jobs started, from the event log(s) Spark wrote under ``event_dir``; None without a log."""
    logs = [p for p in event_dir.rglob("*") if p.is_file() and not p.name.startswith(".")]
    if not logs:
        return None
    n = 0
    for log in logs:
        with open(log, encoding="utf-8", errors="replace") as fh:
            n += sum(1 for line in fh if line.startswith('{"Event":"SparkListenerJobStart"'))
    return n


def load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


@dataclass
class Run:
    tree: str
    code: int
    wall: float
    cpu: float
    peak: int
    jobs: int | None
    load_before: str
    load_after: str
    results: Path


def run_once(argv: list[str], tree: str | None, work: Path, tag: str, remote: bool,
             command: list[str] | None = None) -> Run:
    """One measured run of ``kdissect ARGV --json FILE`` (``command``: of that instead, its stdout kept
    in the run's results file)."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.path.abspath(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    events = work / f"events-{tag}"
    events.mkdir()
    if not remote:
        env["PYSPARK_SUBMIT_ARGS"] = (f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir={events.as_uri()} "
                                      "--conf spark.eventLog.compress=false --conf spark.eventLog.rolling.enabled=false "
                                      "pyspark-shell")
    results = work / f"results-{tag}.json"
    before = load()
    t0 = time.monotonic()
    with open(results, "wb") if command else open(os.devnull, "wb") as out:
        proc = subprocess.Popen(command or [sys.executable, "-m", "kdissect", *argv, "--json", str(results)],
                                stdout=out, stderr=subprocess.DEVNULL if command else None, env=env, cwd=work)
        peak, per_pid = 0, {}
        while proc.poll() is None:
            peak = max(peak, tree_usage(proc.pid, per_pid))
            time.sleep(0.1)
    wall = time.monotonic() - t0
    return Run(tree or ".", proc.returncode, wall, sum(per_pid.values()), peak,
               None if remote else spark_jobs(events), before, load(), results)


def phases(results: Path) -> str:
    """The anchor's own account of its phases (its stdout, one JSON line)."""
    try:
        out = json.loads(results.read_text().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return ""
    return (f"session {out['session_s']:.1f} s, read + cache {out['read_cache_s']:.1f} s, "
            f"{out['queries']} queries {out['queries_s']:.1f} s")


def report(run: Run, extra: str = "") -> None:
    jobs = "-" if run.jobs is None else run.jobs
    print(f"{run.tree}: exit {run.code}, wall {run.wall:.1f} s, CPU {run.cpu:.1f} s, "
          f"peak RSS {run.peak / 2**20:.0f} MiB, Spark jobs {jobs}  (load {run.load_before} -> {run.load_after})"
          + (f"\n    {extra}" if extra else ""), flush=True)


def differences(a: Path, b: Path) -> list[str]:
    """Names of the tables whose rows differ between two results files (missing files: every table): rows
    in any order, floats to 6 significant digits, as the engines are held to."""
    try:
        x, y = json.loads(a.read_text()), json.loads(b.read_text())
    except (OSError, ValueError):
        return ["(no results)"]
    return sorted(engine_differences(x, y))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", type=Path, help="datasets (analyze) or captures (--doctor)")
    ap.add_argument("--doctor", action="store_true", help="run kdissect doctor on captures instead of analyze")
    ap.add_argument("--copies", type=int, default=1, help="analyze N renamed copies of the datasets")
    ap.add_argument("--engine", action="append", choices=("sail", "spark"), default=[],
                    help="sail (the embedded engine, the default) or spark (JVM Spark on --master); give both to "
                         "run each and compare them")
    ap.add_argument("--master", default="local[*]", help="JVM Spark's master (--engine spark)")
    ap.add_argument("--remote", metavar="sc://HOST:PORT", help="use a running Spark Connect server (warm)")
    ap.add_argument("--tree", action="append", default=[], metavar="DIR",
                    help="a kdissect checkout to run (repeatable; runs alternate between them)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per tree")
    ap.add_argument("--keep", type=Path, help="build the replicated dataset here and keep it")
    ap.add_argument("--anchor", action="store_true",
                    help="analyze only: also run benchmarks/anchors.py (bare PySpark, same master or server) in "
                         "every round, and DuckDB once: the floor beside the figures")
    ap.add_argument("--arg", action="append", default=[], metavar="ARG",
                    help="one more argument for kdissect (repeatable), e.g. --arg=--conf --arg=spark.x=y")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kdissect-bench-analyze-"))
    try:
        if args.doctor:
            target = [str(p.resolve()) for p in args.inputs]
            print(f"doctor of {len(target)} capture(s), {sum(p.stat().st_size for p in args.inputs)} bytes")
        elif args.copies == 1 and not args.keep:
            target = [str(p.resolve()) for p in args.inputs]
            n = sum(pq.ParquetFile(f).metadata.num_rows for d in args.inputs for f in (d / "exchanges").glob("*.parquet"))
            print(f"dataset: {n} exchanges in {', '.join(target)}")
        else:
            ds = (args.keep or work / "ds").resolve()
            t0 = time.monotonic()
            n = replicate(args.inputs, args.copies, ds)
            print(f"dataset: {n} exchanges in {ds} (built in {time.monotonic() - t0:.1f} s)")
            target = [str(ds)]
        engines = [None] if args.remote else (args.engine or ["sail"])

        def how(engine: str | None) -> list[str]:
            if args.remote:
                return ["--remote", args.remote]
            return ["--engine", "spark", "--master", args.master] if engine == "spark" else ["--engine", "sail"]
        command = ["doctor" if args.doctor else "analyze", *target]
        for engine in engines:
            print(f"command: kdissect {' '.join([*command, *how(engine), *args.arg])} --json FILE", flush=True)
        trees = args.tree or [None]
        spark_how = ["--remote", args.remote] if args.remote else ["--master", args.master]
        anchor = [sys.executable, str(ANCHORS), "spark", *target, *spark_how] if args.anchor and not args.doctor \
            else None
        runs: list[Run] = []
        anchors: list[Run] = []
        for r in range(args.repeat):
            for i, tree in enumerate(trees):
                for engine in engines:
                    argv = [*command, *how(engine), *args.arg]
                    run = run_once(argv, tree, work, f"{r}-{i}-{engine}", bool(args.remote) or engine == "sail")
                    if engine is not None and len(engines) > 1:
                        run.tree = f"{run.tree} [{engine}]"
                    runs.append(run)
                    report(run)
            if anchor:
                run = run_once([], None, work, f"{r}-anchor", bool(args.remote), anchor)
                run.tree = "anchor (bare PySpark)"
                anchors.append(run)
                report(run, phases(run.results))
        for tree in dict.fromkeys(r.tree for r in runs + anchors):
            mine = [r for r in runs + anchors if r.tree == tree]
            print(f"{tree}: median of {len(mine)}: wall {statistics.median(r.wall for r in mine):.1f} s, "
                  f"CPU {statistics.median(r.cpu for r in mine):.1f} s, "
                  f"peak RSS {max(r.peak for r in mine) / 2**20:.0f} MiB (max)")
        if anchor:
            duck = subprocess.run([sys.executable, str(ANCHORS), "duckdb", *target], capture_output=True, text=True)
            print(f"anchor (DuckDB): {duck.stdout.strip() or duck.stderr.strip()[-200:]}")
        if len(engines) > 1:
            walls = {e: statistics.median(r.wall for r in runs if r.tree.endswith(f"[{e}]")) for e in engines}
            for e in engines:
                if e != "spark" and "spark" in walls:
                    print(f"{e}: {walls[e] / walls['spark']:.2f}x JVM Spark's wall time (medians)")
        first = runs[0]
        for run in runs[1:]:
            diff = differences(first.results, run.results)
            if diff:
                print(f"answers of {run.tree} differ from {first.tree}'s in: {', '.join(diff)}")
        if len(runs) > 1 and all(not differences(first.results, r.results) for r in runs[1:]):
            print("answers: same in every run")
        return max(r.code for r in runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
