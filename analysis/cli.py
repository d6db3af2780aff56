"""``kdissect analyze``: every job over one or more datasets, the key tables printed, results written.

::

    kdissect analyze out/ [--master local[2]] [--since T] [--until T]
                          [--report report.html] [--json results.json] [--out DIR [--format parquet|csv]]

The same tables come from ``python -m analysis JOB DATASET`` one job at a
time, or ``spark-submit analysis/jobs/<job>.py DATASET`` on a cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from analysis import arguments, output, schedule
from analysis.exceptions import AnalysisError, UsageError
from analysis.jobs import JOBS

HELP = """\
Runs every analysis job (latency, errors, throughput, consumer groups, lag,
share groups, producers, inventory, findings) over one or more datasets written by 'kdissect
decode', prints the key tables worst first, and writes what is asked: an HTML
report with plots, all tables as one JSON object, or one Parquet/CSV file per
table. It runs on the embedded engine (Sail, in this process: no Java) unless
--engine spark, a --master or --remote says otherwise; JVM Spark needs Java 17.

examples:
  kdissect analyze out/ --report report.html
  kdissect analyze day1/ day2/ --since 2024-05-01T12:00:00 --json results.json
  kdissect analyze out/ --master local[2] --out results/ --format csv
  kdissect analyze hdfs:///kafka/out --master spark://host:7077 --json results.json
"""

# (table, heading, columns printed): the tables an operator reads first, worst rows first.
VIEWS: list[tuple[str, str, list[str] | None]] = [
    ("findings", "findings: what looks wrong, worst first (kdissect doctor prints them in full)",
     ["severity", "finding", "subject_kind", "subject", "explanation"]),
    ("latency_by_api", "latency by api (ms; idle Fetch long-polls and acks=0 left out), worst p99 first",
     ["api_name", "api_version", "count", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"]),
    ("idle_fetches", "idle Fetch long-polls (empty responses that waited max_wait_ms)",
     ["client_id", "broker", "count", "mean_ms", "max_wait_ms"]),
    ("latency_spikes", "latency spikes (windows whose p99 jumped)",
     ["window_start", "api_name", "count", "p99_ms", "baseline_p99_ms", "ratio"]),
    ("errors", "errors, most frequent first",
     ["api_name", "error_name", "client_id", "topic", "partition", "count", "share", "retriable"]),
    ("throughput_by_topic", "throughput by topic-partition, busiest first",
     ["topic", "partition", "produced_records", "produced_bytes", "fetched_records", "fetched_bytes",
      "requests_per_s"]),
    ("top_clients", "top clients by bytes",
     ["client_id", "produced_bytes", "fetched_bytes", "requests"]),
    ("rebalances", "rebalance timeline per group",
     ["group_id", "generation_id", "protocol", "members", "start_ts", "duration_ms", "reason", "errors"]),
    ("consumer_lag", "consumer lag as seen on the wire, largest first",
     ["group_id", "client_id", "topic", "partition", "committed_offset", "fetch_position", "high_watermark",
      "lag"]),
    ("share_groups", "share group members (KIP-932)",
     ["group_id", "client_id", "joined_ts", "left_ts", "member_epoch", "assigned_partitions", "heartbeat_errors"]),
    ("share_deliveries", "share group deliveries (records)",
     ["group_id", "topic", "partition", "client_id", "acquired", "accepted", "released", "rejected", "redelivered",
      "max_delivery_count"]),
    ("share_in_flight", "share group records acquired and never acknowledged",
     ["group_id", "topic", "partition", "first_offset", "last_offset", "client_id", "state", "next_client_id"]),
    ("share_session_errors", "share session errors",
     ["group_id", "client_id", "broker", "api_name", "error", "count", "session_epochs"]),
    ("produce_to_fetch", "produce to first fetch (ms), slowest first",
     ["topic", "partition", "client_id", "count", "p50_ms", "max_ms"]),
    ("producers", "producers",
     ["client_id", "producer_id", "transactional_id", "transactions_committed", "transactions_aborted",
      "records_per_batch", "batches_per_request"]),
    ("clients", "clients",
     ["client_id", "client_software_name", "client_software_version", "connections", "paired", "unpaired",
      "orphans"]),
    ("outdated_api_versions", "api versions older than the broker offered",
     ["client_id", "api_name", "api_version", "broker_max_version", "count"]),
    ("anomalies_by_kind", "anomalies", ["kind", "count", "first_ts", "last_ts"]),
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    arguments.add_arguments(p, report=True)


def _summary_line(results: schedule.Results, datasets: Sequence[str] = ()) -> str:
    """What was read, first: a dataset holding more captures than the user thinks says so at once."""
    table = results.get("summary")
    if table is None or table.num_rows == 0:
        return ""
    s = table.to_pylist()[0]
    where = f" from {', '.join(datasets)}" if datasets else ""

    def n(col: str, word: str) -> str:
        count = s[col] or 0
        return f"{count:,} {word}{'s' * (count != 1)}"
    return (f"read {n('captures', 'capture')} and {n('exchanges', 'exchange')}{where}{_without_exchanges(s)}: "
            f"{n('connections', 'connection')}, {n('clients', 'client')}, {n('brokers', 'broker')}, "
            f"{n('errors', 'error')}, {n('anomalies', 'anomaly').replace('anomalys', 'anomalies')}; "
            f"{output.cell(s['first_ts'])} UTC to {output.cell(s['last_ts'])} UTC ({_span(s['duration_s'] or 0.0)})")


def _without_exchanges(s: dict) -> str:
    """`` (8 captures without exchanges: 7 with anomalies only (tls), 1 with no Kafka found)``: why the dataset
    holds more captures than the exchanges show (a TLS capture without its keys, a capture of other traffic)."""
    total = s.get("captures_without_exchanges") or 0
    if not total:
        return ""
    rowless = s.get("captures_without_rows") or 0
    why = []
    if total > rowless:
        why.append(f"{total - rowless:,} with anomalies only ({', '.join(s.get('anomalies_without_exchanges') or [])})")
    if rowless:
        why.append(f"{rowless:,} with no Kafka found")
    return f" ({total:,} capture{'s' * (total != 1)} without exchanges: {', '.join(why)})"


def _span(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.1f} s"


def _printed(results: schedule.Results) -> schedule.Results:
    """The tables as printed: outdated api versions picked out of api_versions."""
    shown = dict(results)
    versions = results.get("api_versions")
    if versions is not None:
        import pyarrow.compute as pc
        shown["outdated_api_versions"] = versions.filter(pc.fill_null(versions["outdated"], False))
    return shown


def run(args: argparse.Namespace, out: TextIO | None = None, spark=None) -> int:
    """Compute every table and write what ``args`` asks; raises AnalysisError for the caller to print."""
    out = out or sys.stdout
    from analysis.dataset import check_paths
    from analysis.preflight import check_start, engine_for, remote_url
    from analysis.session import running_on, start

    # Everything that can be wrong without Spark answers at once, before a JVM starts.
    request = arguments.check_arguments(args)
    size = check_paths(args.datasets)
    remote = remote_url(getattr(args, "remote", None))
    engine = getattr(args, "engine", None)
    if spark is None:
        check_start(args.master, remote, engine)
    stats = schedule.Stats()
    started = stats.started
    progress = output.Progress(sys.stderr, "analyze")
    if progress.enabled:
        kind = engine_for(engine, args.master, remote)
        progress.stream.write(f"analyze: connecting to {remote} ..." if remote else
                              f"analyze: starting {'the embedded engine' if kind == 'sail' else 'Spark'} ...")
        progress.stream.flush()
    running = running_on(spark) if spark is not None else start("kdissect-analyze", args.master, request.conf, remote,
                                                            size, checked=True, engine=engine)
    stats.mark(f"Spark Connect session at {remote}" if remote else "engine start", started)
    try:
        try:
            results = schedule.analyze(running, request, JOBS, progress, stats)
        finally:
            progress.clear()
    finally:
        if spark is None:
            running.stop()
    if getattr(args, "profile", False):
        print(stats.report(), file=sys.stderr)
    print(_summary_line(results, args.datasets), file=out)
    output.print_tables(_printed(results), VIEWS, args.limit, out)
    print(file=out)
    if args.json:
        output.write_json(args.json, results)
        print(f"wrote {args.json} ({len(results)} tables as JSON)", file=out)
    if args.out:
        output.write_out(args.out, results, args.format)
        print(f"wrote {len(results)} tables ({args.format}) under {args.out}", file=out)
    if args.report:
        try:
            from analysis import html_report
        except ModuleNotFoundError as exc:
            if exc.name != "analysis.html_report":
                raise
            raise AnalysisError("--report: the HTML report renderer is not part of this installation") from None
        html_report.write(args.report, output.as_json(results))
        print(f"report: {os.path.abspath(args.report)}", file=out)
    print(f"analyzed in {time.monotonic() - started:.1f} s", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (``python -m analysis.cli``); ``kdissect analyze`` calls :func:`run` the same way."""
    p = argparse.ArgumentParser(prog="kdissect analyze", description=HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except AnalysisError as exc:
        print(f"kdissect analyze: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kdissect analyze: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
