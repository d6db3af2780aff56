"""Running jobs: the datasets read and kept once, every job's tables built and collected side by side.

:func:`analyze` is what ``kdissect analyze``, ``kdissect doctor`` and each job's ``main()`` share: it reads
the datasets of a :class:`Request`, parses the exchanges into facts and keeps them, chooses the time
window, then builds each job's tables (:mod:`analysis.jobs`) and collects them (small, aggregated tables
only reach the driver) from a few threads at once.
"""

from __future__ import annotations

import datetime as dt
import gc
import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from analysis import session
from analysis.exceptions import UsageError
from analysis.jobs import Empty, Pieces, empty_table, tables_of
from analysis.options import Options, Present, window_for

if TYPE_CHECKING:
    import pyarrow as pa
# pyarrow is imported where used: `kdissect --help` builds the arguments, which name a Request.
Results = dict[str, "pa.Table"]


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


def default_rules() -> Any:
    """The findings rules' default thresholds (a Request that gives none)."""
    from analysis.findings import RULES, load   # late: pyspark loads with the rules
    return load(RULES)


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
    from analysis import dataset   # late: pyarrow and pyspark

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
    return ds, Options(window=window, findings=request.findings if request.findings is not None else default_rules(),
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
        if not session.is_remote(getattr(spark, "session", spark)):
            # py4j's JavaObject and its cached JavaMembers refer to each other, so the run's JVM plans
            # stay pinned (with every broadcast join's hash table, a memory page each) until Python's
            # cycle collector runs, which in a long-lived process can be much later: the next analysis
            # in the same JVM then runs out of heap. Collect them now.
            gc.collect()


def _analyze(spark: Any, request: Request, jobs: Sequence[str],
             progress: Callable[[int, int, str], None] | None, stats: Stats | None) -> Results:
    import threading
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

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
        out = tables_of(job)(ds, opts)
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
    if isinstance(df, Empty):
        return empty_table(df.frame)
    if session.is_remote(df.sparkSession):
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
