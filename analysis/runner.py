"""What ``kdissect analyze``, ``python -m analysis JOB`` and spark-submit share.

Reading the datasets, choosing the time window, computing a job's tables,
collecting them (each is small and aggregated: nothing else reaches the
driver), printing them aligned and writing them out as JSON, Parquet or CSV.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from analysis.exceptions import AnalysisError, UsageError
from analysis.options import Options, window_for

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
    p.add_argument("--master", help="Spark master, e.g. local[2] or spark://host:7077 (default: local[*], "
                                    "or spark-submit's)")
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


def spark_conf(pairs: Sequence[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value.strip()
    return conf


def findings_config(args: argparse.Namespace) -> Any:
    """The findings rules' thresholds from ``--rules`` and ``--set``; AnalysisError when one is wrong."""
    from analysis.findings import RULES, FindingsConfigError, load
    try:
        return load(RULES, getattr(args, "rules", None), getattr(args, "set", None) or [])
    except FindingsConfigError as exc:
        raise UsageError(str(exc)) from None


def job_tables(name: str) -> Tables:
    import importlib
    return importlib.import_module(f"analysis.{name}").tables


def compute(spark: Any, args: argparse.Namespace, jobs: Sequence[str]) -> dict[str, Any]:
    """Every table of ``jobs`` as lazy DataFrames over the datasets named in ``args``."""
    from pyspark.sql import functions as F

    from analysis import dataset, session

    ds = dataset.cached(dataset.load(spark, args.datasets, args.since, args.until))
    session.size_shuffle(spark, ds.input_bytes, user_set="spark.sql.shuffle.partitions" in spark_conf(args.conf))
    window = args.window
    if window is None:
        span = ds.exchanges.agg(F.min(F.coalesce("request_ts", "response_ts")).alias("a"),
                                F.max(F.coalesce("request_ts", "response_ts")).alias("b")).first()
        if span is None or span["a"] is None:
            raise UsageError("no exchanges in the time range given (--since/--until)")
        window = window_for((span["b"] - span["a"]).total_seconds())
    opts = Options(window=window, findings=findings_config(args))
    tables: dict[str, Any] = {}
    for job in jobs:
        tables.update(job_tables(job)(ds, opts))
    return tables


def collect(df: Any) -> pa.Table:
    """A small result table to the driver, as Arrow (timestamps stay UTC)."""
    return df.toArrow()


def collect_all(tables: Mapping[str, Any], progress: Callable[[int, int, str], None] | None = None) -> Results:
    out: Results = {}
    for i, (name, df) in enumerate(tables.items()):
        if progress:
            progress(i, len(tables), name)
        out[name] = collect(df)
    if progress:
        progress(len(tables), len(tables), "")
    return out


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
    from analysis.session import build_session

    try:
        check_paths(args.datasets)
        session = spark or build_session(f"kdissect-{job}", args.master, spark_conf(args.conf))
        try:
            progress = Progress(sys.stderr, f"analysis {job}")
            try:
                results = collect_all(compute(session, args, [job]), progress)
            finally:
                progress.clear()
            print_tables(results, [(name, f"{job}: {name}", None) for name in results], args.limit, out)
            if args.out:
                write_out(args.out, results, args.format)
                print(f"\nwrote {len(results)} tables ({args.format}) under {args.out}", file=out)
        finally:
            if spark is None:
                session.stop()
    except AnalysisError as exc:
        print(f"analysis {job}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
