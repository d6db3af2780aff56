"""What ``kdissect analyze``, ``python -m analysis JOB`` and spark-submit share.

Reading the datasets, choosing the time window, computing a job's tables,
collecting them (each is small and aggregated: nothing else reaches the
driver), printing them aligned and writing them out as JSON, Parquet or CSV.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from analysis.exceptions import AnalysisError, UsageError
from analysis.options import Options, Present, window_for

# A job: the dataset and options in, named result tables out (lazy DataFrames).
Tables = Callable[[Any, Options], "dict[str, Any]"]
if TYPE_CHECKING:
    import pyarrow as pa
# pyarrow is imported where used: `kdissect --help` builds this module's arguments and should stay quick.
Results = dict[str, "pa.Table"]

JOBS = ("inventory", "latency", "errors", "throughput", "groups", "lag", "producers", "schemas", "findings")


def parse_time(text: str) -> dt.datetime:
    """ISO-8601 date or date-time; without an offset it is UTC (like every timestamp in the dataset)."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 time such as 2024-05-01T12:00:00Z, got {text!r}") \
            from None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def add_arguments(p: argparse.ArgumentParser, *, report: bool) -> None:
    p.add_argument("datasets", nargs="+", metavar="DATASET",
                   help="directories written by `kdissect decode` (several are read as one)")
    add_engine_arguments(p)
    p.add_argument("--since", type=parse_time, metavar="T", help="only traffic at or after T (ISO-8601, UTC)")
    p.add_argument("--until", type=parse_time, metavar="T", help="only traffic before T (ISO-8601, UTC)")
    p.add_argument("--window", metavar="INTERVAL",
                   help="time bucket of the *_over_time tables, e.g. '10 seconds' (default: sized to the capture)")
    if report:
        p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report with plots")
        p.add_argument("--json", metavar="FILE", help="write every table as one JSON object {table: [rows]}")
    p.add_argument("--out", metavar="DIR", help="write every table under DIR, one file per table")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="format for --out")
    p.add_argument("--limit", type=int, default=10, metavar="N", help="rows printed per table (default 10)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting, e.g. spark.sql.shuffle.partitions=16; repeatable")
    p.add_argument("--set", action="append", default=[], metavar="RULE.THRESHOLD=VALUE",
                   help="a findings threshold, e.g. producer.tiny_batches.min_requests_per_s=50, or "
                        "RULE.enabled=false; repeatable (README: the rules table)")
    p.add_argument("--rules", metavar="FILE.toml", help="findings thresholds from a TOML file, one table per rule")
    p.add_argument("--profile", action="store_true",
                   help="print on stderr where the time went (Spark start, reading, each table) and the Spark jobs run")


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """``--engine``, ``--master`` and ``--remote``: where the analysis runs (:func:`analysis.session.engine_for`)."""
    p.add_argument("--engine", choices=("sail", "spark"), default=None,
                   help="sail: the embedded engine, no JVM, answers in about a second (the default, or "
                        "$KDISSECT_ENGINE); spark: JVM Spark local[*] (Java 17), the engine for clusters")
    p.add_argument("--master", help="JVM Spark's master, e.g. local[2] or spark://host:7077 (implies --engine spark; "
                                    "default: local[*], or spark-submit's)")
    p.add_argument("--remote", metavar="sc://HOST:PORT",
                   help="run on a Spark Connect server that is already up, Sail's or Spark's (kdissect "
                        "spark-server start) (default: $KDISSECT_SPARK_REMOTE)")


def spark_conf(pairs: Sequence[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def findings_config(rules: str | None = None, settings: Sequence[str] = ()) -> Any:
    """The findings rules' thresholds from a ``--rules`` file and ``--set`` pairs; UsageError when one is wrong."""
    from analysis.findings import RULES, FindingsConfigError, load
    try:
        return load(RULES, rules, list(settings))
    except FindingsConfigError as exc:
        raise UsageError(str(exc)) from None


def job_tables(name: str) -> Tables:
    import importlib
    return importlib.import_module(f"analysis.{name}").tables


# Spark interval units a window may be given in (months and years are not a fixed length).
_UNITS = {"microsecond": 1e-6, "millisecond": 1e-3, "second": 1, "minute": 60, "hour": 3600, "day": 86400,
          "week": 604800}
_INTERVAL = re.compile(r"\s*(?:interval\s+)?((?:[+-]?\d+(?:\.\d+)?\s*[a-z]+\s*)+)", re.IGNORECASE)


def check_window(text: str) -> float:
    """The length in seconds of a ``--window`` interval ('10 seconds', '1 minute 30 seconds'); UsageError
    unless Spark's window() takes it."""
    match = _INTERVAL.fullmatch(text)
    total = 0.0
    for number, unit in re.findall(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)", match.group(1) if match else "", re.I):
        unit = unit.lower().removesuffix("s")
        if unit not in _UNITS:
            match = None
            break
        total += float(number) * _UNITS[unit]
    if match is None:
        raise UsageError(f"--window {text!r}: expected an interval such as '10 seconds', '5 minutes' or "
                            "'1 hour' (units: " + ", ".join(_UNITS) + ")")
    if total <= 0:
        raise UsageError(f"--window {text!r}: the window must be longer than 0")
    return total


@dataclass(frozen=True)
class Request:
    """One analysis as values: the datasets, the time range, the window (None: chosen from the capture's
    span), the rules' thresholds (None: their defaults) and the Spark settings the user gave."""

    datasets: Sequence[str]
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    window: str | None = None
    findings: Any = None
    conf: Mapping[str, str] = field(default_factory=dict)


def check_arguments(args: argparse.Namespace) -> Request:
    """The analysis a command line asks for, once everything in it that can be wrong without Spark is checked,
    before it starts: ``--set`` and ``--rules``, ``--conf``, ``--window``, ``--since``/``--until``, ``--limit``
    and where results go. AnalysisError (one line) for the first problem."""
    cfg = findings_config(getattr(args, "rules", None), getattr(args, "set", None) or [])
    conf = spark_conf(getattr(args, "conf", None) or [])
    if getattr(args, "window", None) is not None:
        check_window(args.window)
    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if since is not None and until is not None and since >= until:
        raise UsageError(f"--since {since.isoformat()} is not before --until {until.isoformat()}: "
                         "no exchanges in the time range given")
    if getattr(args, "limit", 0) < 0:
        raise UsageError(f"--limit {args.limit}: expected 0 or more rows")
    for option in ("report", "json"):
        path = getattr(args, option, None)
        if path:
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise UsageError(f"{path}: directory {parent} does not exist")
            if os.path.isdir(path):
                raise UsageError(f"--{option} {path}: is a directory, expected a file name")
    out = getattr(args, "out", None)
    if out:
        parent = os.path.dirname(os.path.abspath(out))
        if os.path.exists(out) and not os.path.isdir(out):
            raise UsageError(f"--out {out}: is a file, expected a directory")
        if not os.path.isdir(parent):
            raise UsageError(f"--out {out}: directory {parent} does not exist")
    return Request(datasets=list(args.datasets), since=since, until=until, window=getattr(args, "window", None),
                   findings=cfg, conf=conf)


@dataclass(frozen=True)
class Pieces:
    """A table computed as several smaller queries, collected side by side and put together on the driver
    by ``merge`` (the findings: one query per rule, where their union was one very wide plan)."""

    frames: Mapping[str, Any]
    merge: Callable[[list[pa.Table]], pa.Table]


@dataclass(frozen=True)
class Empty:
    """A table known to be empty without asking Spark (:func:`needs`): collected as its schema alone."""

    frame: Any


def needs(opts: Any, df: Any, *any_of: int, all_of: Sequence[int] = (), records: bool = False) -> Any:
    """``df``, or :class:`Empty` when the dataset (``opts.present``) holds none of the api keys ``any_of``,
    lacks one of ``all_of``, or (``records``) has no records table: a table over those exchanges or
    records, which would be empty, costs no query."""
    present = getattr(opts, "present", None)
    if present is None:
        return df
    if (any_of and not present.api_keys & set(any_of)) or not set(all_of) <= present.api_keys \
            or (records and not present.records):
        return Empty(df)
    return df


def empty_table(df: Any) -> pa.Table:
    """The table ``collect(df)`` gives when ``df`` has no rows, from its schema alone."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC").empty_table()


@dataclass
class Stats:
    """Where a run's time went (seconds from its start), and how many Spark jobs it ran."""

    phases: list[tuple[str, float, float]] = field(default_factory=list)   # (what, start, end)
    jobs: int | None = None
    started: float = field(default_factory=time.monotonic)

    def mark(self, what: str, start: float) -> None:
        self.phases.append((what, start - self.started, time.monotonic() - self.started))

    def report(self) -> str:
        lines = [f"{what:34} {a:7.2f} s -> {b:7.2f} s  ({b - a:6.2f} s)" for what, a, b in self.phases]
        if self.jobs is not None:
            lines.append(f"Spark jobs: {self.jobs}")
        return "\n".join(lines)


def workers(spark: Any, embedded: bool = False) -> int:
    """Threads submitting queries at once: enough to keep every core busy while the driver plans the
    next query (planning is single-threaded), few enough not to queue memory-hungry stages. The embedded
    engine plans in microseconds and runs each query on every core: two at a time keep it busy, and more
    only add their working memory together."""
    from analysis import session
    if embedded:
        return 2
    cores = (os.cpu_count() or 2) if session.is_remote(spark) else max(1, spark.sparkContext.defaultParallelism)
    return max(2, min(8, 2 * cores))


def prepare(spark: Any, request: Request, stats: Stats | None = None, checkpoints: bool = False,
            scratch: str | None = None) -> Any:
    """The datasets read and cut to the time range, exchanges parsed into facts and kept, the window chosen:
    ``(dataset, options)``. The facts are kept by one Spark job, and one small query over them gives the
    capture's span and what it holds (:func:`inventory`). ``checkpoints``: what the run keeps may be
    local checkpoints, which Spark frees only when its JVM collects them: a JVM of this command's own, or
    a server that collects its garbage often (:meth:`analysis.dataset.Dataset.keep`); ``scratch``: a directory
    to keep them in as Parquet instead (the embedded engine)."""
    from analysis import dataset, session

    t0 = time.monotonic()
    loaded = dataset.load(spark, request.datasets, request.since, request.until)
    ds = dataset.cached(loaded, session.checkpoint_level(loaded.input_bytes) if checkpoints else None, scratch)
    session.size_shuffle(spark, ds.input_bytes, user_set="spark.sql.shuffle.partitions" in request.conf)
    present, first, last = inventory(ds)
    if stats:
        stats.mark("read + parse + cache exchanges", t0)
    window = request.window
    if window is None:
        if first is None:
            ds.release()
            raise UsageError("no exchanges in the time range given (--since/--until)")
        window = window_for((last - first).total_seconds())
    return ds, Options(window=window, findings=request.findings if request.findings is not None else findings_config(),
                       present=present)


def inventory(ds: Any) -> tuple[Present, Any, Any]:
    """The apis, errors and throttled apis of the kept exchanges and partitions, and the capture's first and
    last exchange time: one small query (on a server, the one that also reads, parses and caches them)."""
    from pyspark.sql import functions as F

    ts = F.coalesce("request_ts", "response_ts")
    ex = (ds.exchanges.groupBy("api_key", "api_name", "error_name")
          .agg(F.min(ts).alias("a"), F.max(ts).alias("b"),
               F.max(F.col("throttle_ms").cast("long")).alias("throttle_ms")))
    parts = ds.partitions.select("api_key", "api_name").distinct().select(
        "api_key", "api_name", F.lit(None).cast("string").alias("error_name"),
        F.lit(None).cast("timestamp").alias("a"), F.lit(None).cast("timestamp").alias("b"),
        F.lit(None).cast("long").alias("throttle_ms"))
    rows = ex.unionByName(parts).collect()
    firsts = [r["a"] for r in rows if r["a"] is not None]
    lasts = [r["b"] for r in rows if r["b"] is not None]
    present = Present(apis=frozenset(r["api_name"] for r in rows if r["api_name"] is not None),
                      api_keys=frozenset(r["api_key"] for r in rows if r["api_key"] is not None),
                      errors=frozenset(r["error_name"] for r in rows if r["error_name"] is not None),
                      throttled=frozenset(r["api_name"] for r in rows
                                          if r["api_name"] is not None and (r["throttle_ms"] or 0) > 0),
                      records="records" not in getattr(ds, "empty", frozenset()))
    return present, (min(firsts) if firsts else None), (max(lasts) if lasts else None)


def analyze(spark: Any, request: Request, jobs: Sequence[str],
            progress: Callable[[int, int, str], None] | None = None, stats: Stats | None = None) -> Results:
    """Every table of ``jobs`` over the datasets of ``request``, collected (small, aggregated tables only).

    The jobs' tables are independent queries over the same kept facts: several threads build and
    collect them at once (each in its own FAIR pool locally). Whatever was kept for the run is released
    at the end, so a long-running Spark Connect server does not keep it.
    """
    try:
        return _analyze(spark, request, jobs, progress, stats)
    finally:
        from analysis.session import is_remote
        if not is_remote(getattr(spark, "session", spark)):
            # py4j's JavaObject and its cached JavaMembers refer to each other, so the run's JVM plans
            # stay pinned (with every broadcast join's hash table, a memory page each) until Python's
            # cycle collector runs, which in a long-lived process can be much later: the next analysis
            # in the same JVM then runs out of heap. Collect them now.
            gc.collect()


def _analyze(spark: Any, request: Request, jobs: Sequence[str],
             progress: Callable[[int, int, str], None] | None, stats: Stats | None) -> Results:
    import threading
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from analysis import session

    running = session.running_on(spark)
    spark = running.session
    stats = stats or Stats()
    group = f"kdissect-{os.getpid()}-{id(stats):x}"
    session.in_thread(spark, "kdissect-main", group)()
    try:
        ds, opts = prepare(spark, request, stats, checkpoints=running.keeps_checkpoints(), scratch=running.scratch)
    except Exception as exc:
        running.check_alive(exc)
        failure = session.query_failure(exc, embedded=running.embedded is not None)
        if failure is not None:
            raise failure from None
        raise
    built: dict[str, dict[str, Any]] = {}
    pieces: dict[tuple[str, str | None], Any] = {}
    local = threading.local()
    count = itertools.count()

    def task(fn: Callable[..., Any], *a: Any) -> Any:
        if not getattr(local, "ready", False):
            session.in_thread(spark, f"kdissect-{next(count)}", group)()
            local.ready = True
        return fn(*a)

    def build(job: str) -> dict[str, Any]:
        t0 = time.monotonic()
        out = job_tables(job)(ds, opts)
        stats.mark(f"plan {job}", t0)
        return out

    def fetch(label: str, df: Any) -> pa.Table:
        t0 = time.monotonic()
        out = collect(df)
        stats.mark(f"  {label}", t0)
        return out

    t0 = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=workers(spark, running.embedded is not None),
                              thread_name_prefix="kdissect-analysis")
    pending: dict[Future, tuple[str, Any]] = {pool.submit(task, build, job): ("build", job) for job in jobs}
    total = done = 0
    lost = failed = False    # lost: the link to Spark broke, nothing left to ask it
    failing: str | None = None   # the job or table whose query failed
    try:
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                kind, key = pending.pop(future)
                try:
                    result = future.result()
                except BaseException:
                    failing = key if kind == "build" else key[0]
                    raise
                if kind == "build":
                    built[key] = result
                    for name, value in result.items():
                        parts = value.frames.items() if isinstance(value, Pieces) else [(None, value)]
                        for part, df in parts:
                            total += 1
                            label = name if part is None else f"{name}: {part}"
                            pending[pool.submit(task, fetch, label, df)] = ("collect", (name, part))
                else:
                    pieces[key] = result
                    done += 1
                    if progress:
                        progress(done, total, key[0])
    except BaseException as exc:
        failed = True
        for future in pending:
            future.cancel()
        lost = session.connection_lost(exc)
        running.check_alive(exc)
        session.cancel(spark, group)
        failure = session.query_failure(exc, failing, embedded=running.embedded is not None)
        if failure is not None:
            raise failure from None
        raise
    finally:
        pool.shutdown(wait=True)
        if not lost and not running.died():
            try:
                stats.jobs = running.jobs(group)
                ds.release()
            except Exception as exc:
                if not failed:      # else the failure on its way out says more than this one
                    running.check_alive(exc)
                    raise
    stats.mark("all tables", t0)
    out: Results = {}
    for job in jobs:
        for name, value in built[job].items():
            if isinstance(value, Pieces):
                out[name] = value.merge([pieces[(name, part)] for part in value.frames])
            else:
                out[name] = pieces[(name, None)]
    if progress:
        progress(len(out), len(out), "")
    return out


def collect(df: Any) -> pa.Table:
    """A small result table to the driver, as Arrow (timestamps stay UTC)."""
    from analysis.session import is_remote
    if isinstance(df, Empty):
        return empty_table(df.frame)
    if is_remote(df.sparkSession):
        return _collect_remote(df)
    return df.toArrow()


def _collect_remote(df: Any) -> pa.Table:
    """``df.toArrow()`` of a Spark Connect frame in one round trip: the results carry their schema, where
    ``toArrow`` first asks the server for it (a second analysis of the query)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    try:
        client = df._session.client
        table, schema, _ = client.to_table(df._plan.to_proto(client), df._plan.observations)
    except AttributeError:  # another pyspark's Connect client: the public way
        return df.toArrow()
    arrow = to_arrow_schema(schema if schema is not None else df.schema,
                            error_on_duplicated_field_names_in_struct=True, timezone="UTC")
    return table.cast(arrow)


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """Plain JSON-ready rows: timestamps as ISO-8601 UTC strings, lists as lists, null as None."""
    return [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]


def as_json(results: Results) -> dict[str, list[dict[str, Any]]]:
    return {name: rows(table) for name, table in results.items()}


def write_json(path: str, results: Results) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(as_json(results), fh, indent=None, separators=(",", ":"))
        fh.write("\n")


def write_out(directory: str, results: Results, fmt: str) -> None:
    """One file per table: ``DIR/<table>.parquet`` or ``DIR/<table>.csv`` (lists joined with ',')."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    for name, table in results.items():
        if fmt == "csv":
            cols = [pa.array([None if v is None else ",".join(map(str, v)) for v in col.to_pylist()], pa.string())
                    if pa.types.is_list(col.type) else col for col in table.columns]
            pacsv.write_csv(pa.table(cols, names=table.column_names), os.path.join(directory, f"{name}.csv"))
        else:
            pq.write_table(table, os.path.join(directory, f"{name}.parquet"))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:
            return "-"
        return f"{value:.2f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value)
    return str(value)


def format_table(table: pa.Table, columns: Sequence[str] | None = None, limit: int = 10,
                 width: int = 48) -> str:
    """The first ``limit`` rows aligned; numbers right-aligned; cells cut at ``width`` characters."""
    import pyarrow as pa
    cols = [c for c in (columns or table.column_names) if c in table.column_names]
    data = table.select(cols).slice(0, limit).to_pylist()
    cells = [[_cell(r[c]) for c in cols] for r in data]
    cells = [[v if len(v) <= width else v[:width - 1] + "…" for v in row] for row in cells]
    numeric = [pa.types.is_integer(table.schema.field(c).type) or pa.types.is_floating(table.schema.field(c).type)
               for c in cols]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells]
    if table.num_rows > limit:
        out.append(f"... {table.num_rows - limit} more rows")
    if table.num_rows == 0:
        out.append("(no rows)")
    return "\n".join(out)


def print_tables(results: Results, views: Sequence[tuple[str, str, Sequence[str] | None]], limit: int,
                 out: TextIO) -> None:
    for name, title, columns in views:
        if name in results:
            print(f"\n== {title}", file=out)
            print(format_table(results[name], columns, limit), file=out)


class Progress:
    """A one-line progress indicator on stderr, only when it is a terminal."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream, self.label = stream, label
        self.enabled = stream.isatty()

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.enabled:
            return
        text = f"{self.label}: {done}/{total} tables" + (f" ({name})" if name else "")
        self.stream.write("\r" + text.ljust(72)[:79])
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()


def run_job(job: str, tables: Tables, argv: Sequence[str] | None = None, out: TextIO | None = None,
            spark: Any = None) -> int:
    """``python -m analysis JOB`` / spark-submit of a job module: compute, print every table, write ``--out``.

    A ``spark`` passed in is used and left running (tests share one session).
    """
    p = argparse.ArgumentParser(prog=f"python -m analysis {job}", description=f"kdissect dataset analysis: {job}")
    add_arguments(p, report=False)
    args = p.parse_args(argv)
    out = out or sys.stdout
    from analysis.dataset import check_paths
    from analysis.session import remote_url, running_on, start

    try:
        request = check_arguments(args)
        size = check_paths(args.datasets)
        stats = Stats()
        t0 = time.monotonic()
        running = running_on(spark) if spark is not None else start(f"kdissect-{job}", args.master, request.conf,
                                                                remote_url(args.remote), size, engine=args.engine)
        stats.mark("Spark session", t0)
        try:
            progress = Progress(sys.stderr, f"analysis {job}")
            try:
                results = analyze(running, request, [job], progress, stats)
            finally:
                progress.clear()
            if args.profile:
                print(stats.report(), file=sys.stderr)
            print_tables(results, [(name, f"{job}: {name}", None) for name in results], args.limit, out)
            if args.out:
                write_out(args.out, results, args.format)
                print(f"\nwrote {len(results)} tables ({args.format}) under {args.out}", file=out)
        finally:
            if spark is None:
                running.stop()
    except AnalysisError as exc:
        print(f"analysis {job}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
