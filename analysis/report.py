"""What every job's ``main()`` shares: arguments, session, compact printing, writing results."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from analysis.session import build_session

Results = dict[str, DataFrame]
Compute = Callable[[SparkSession, str, argparse.Namespace], Results]


def parser(job: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m analysis {job}",
                                description=f"kdissect dataset analysis: {job}")
    p.add_argument("dataset", help="directory written by `kdissect decode` (holds exchanges/, partitions/, ...)")
    p.add_argument("--master", help="Spark master, e.g. local[*] or spark://host:7077 (default: local[*], "
                                    "or spark-submit's)")
    p.add_argument("--out", help="also write every result table under this directory")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="format for --out")
    p.add_argument("--window", default="1 minute",
                   help="time bucket for windowed results, a Spark interval such as '1 second' or '5 minutes'")
    p.add_argument("--limit", type=int, default=20, help="rows printed per table")
    return p


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value)
    return str(value)


def format_table(df: DataFrame, limit: int = 20) -> str:
    """The first ``limit`` rows as aligned text; numbers right-aligned."""
    rows = df.limit(limit + 1).collect()
    cols = df.columns
    cells = [[_cell(r[c]) for c in cols] for r in rows[:limit]]
    numeric = [any(r[c] is not None for r in rows)
               and all(isinstance(r[c], (int, float)) or r[c] is None for r in rows) for c in cols]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    if len(rows) > limit:
        out.append(f"... (first {limit} rows)")
    if not rows:
        out.append("(no rows)")
    return "\n".join(out)


def write_results(results: Results, out: str, fmt: str) -> None:
    for name, df in results.items():
        if fmt == "csv":
            # CSV has no nested types: arrays become "a,b" strings.
            df = df.select([F.concat_ws(",", F.col(f.name)).alias(f.name) if isinstance(f.dataType, ArrayType)
                            else F.col(f.name) for f in df.schema.fields])
            df.coalesce(1).write.mode("overwrite").option("header", True).csv(f"{out}/{name}")
        else:
            df.coalesce(1).write.mode("overwrite").parquet(f"{out}/{name}")


def run(job: str, compute: Compute, argv: Sequence[str] | None = None, out: TextIO | None = None,
        spark: SparkSession | None = None) -> int:
    """Parse ``argv``, compute, print, write. A ``spark`` passed in is used and left running."""
    args = parser(job).parse_args(argv)
    out = out or sys.stdout
    if "://" not in args.dataset and not os.path.isdir(args.dataset):
        print(f"analysis {job}: {args.dataset}: no such directory (expected kdissect decode's output)",
              file=sys.stderr)
        return 1
    session = spark or build_session(f"kdissect-{job}", args.master)
    try:
        try:
            results = compute(session, args.dataset, args)
        except FileNotFoundError as exc:
            print(f"analysis {job}: {exc}", file=sys.stderr)
            return 1
        for name, df in results.items():
            print(f"\n== {job}: {name}", file=out)
            print(format_table(df, args.limit), file=out)
        if args.out:
            write_results(results, args.out, args.format)
            print(f"\nwrote {len(results)} tables ({args.format}) under {args.out}", file=out)
    finally:
        if spark is None:
            session.stop()
    return 0
