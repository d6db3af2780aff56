"""The analysis' command-line arguments, and everything in them checked before Spark starts.

``kdissect analyze``, ``kdissect doctor``, ``python -m analysis JOB`` and spark-submit of a job module take
the same arguments (:func:`add_arguments`); :func:`check_arguments` turns them into the
:class:`~analysis.schedule.Request` the scheduler runs, or one :class:`~analysis.exceptions.UsageError`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
from collections.abc import Sequence
from typing import Any

from analysis.exceptions import UsageError
from analysis.schedule import Request


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
    """``--engine``, ``--master`` and ``--remote``: where the analysis runs (:func:`analysis.preflight.engine_for`)."""
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
    from analysis.findings import RULES, FindingsConfigError, load   # late: pyspark loads with the rules
    try:
        return load(RULES, rules, list(settings))
    except FindingsConfigError as exc:
        raise UsageError(str(exc)) from None


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
