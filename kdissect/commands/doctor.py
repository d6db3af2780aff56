"""``kdissect doctor``: decode, analyze and judge captures in one command.

Decodes the inputs (into ``--dataset DIR`` or a temporary directory), runs the
findings rules with Spark, prints the findings compactly with a ``kdissect
show`` line per finding naming the capture file itself, and writes the results
JSON / HTML report when asked. Exit status: :data:`HELP` says it, as the README's
table of exit codes does.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from kdissect.commands.options import payload_options
from kdissect.errors import EXIT_DAMAGED, DamagedInput, KdissectError, UsageError

HELP = """\
Decodes the captures, runs the analysis and the findings rules over them (on
the embedded engine, no Java; --engine spark for JVM Spark), and prints what
is wrong, worst first: which client, group, topic or broker, the figures
behind it, the Kafka setting to look at, and a 'kdissect show' command line
listing the exchanges behind it.

Exit status: 0 when no finding is critical; 1 when one is (so it can gate a CI
job or a canary); 2 on bad use (an unknown option or a bad value, an input that
does not exist, a bad rules file, no Kafka in the input); 3 when an input is
damaged (not a capture, or cut short: the findings are of what could be read)
and no finding is critical; 4 when doctor itself fails (Spark cannot start, an
unwritable --dataset, ...).

Thresholds: every rule's are listed in the README; override them with
--set RULE.THRESHOLD=VALUE (repeatable) or a TOML file (--rules), and turn a
rule off with --set RULE.enabled=false.

examples:
  kdissect doctor traffic.pcap
  kdissect doctor caps/ --report doctor.html --json doctor.json
  kdissect doctor traffic.pcap --set producer.tiny_batches.min_requests_per_s=50
  kdissect doctor traffic.pcap --dataset out/ --engine spark
"""

EXIT_OK, EXIT_CRITICAL = 0, 1
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="pcap/pcapng files (gzip ok) or directories of them")
    p.add_argument("--dataset", metavar="DIR",
                   help="decode into DIR and keep it (default: a temporary directory, removed at the end)")
    from analysis.arguments import add_engine_arguments   # light: the analysis' Spark loads when it runs
    add_engine_arguments(p)
    p.add_argument("--report", metavar="FILE.html", help="write the HTML report, opening with the findings")
    p.add_argument("--json", metavar="FILE", help="write the results as one JSON object {table: [rows]}")
    p.add_argument("--set", action="append", default=[], metavar="RULE.THRESHOLD=VALUE",
                   help="override a rule threshold, e.g. client.metadata_storm.max_requests_per_s=5; repeatable")
    p.add_argument("--rules", metavar="FILE.toml", help="thresholds from a TOML file (one table per rule id)")
    p.add_argument("--ports", metavar="LIST",
                   help="Kafka ports, e.g. 9092,9093 or 9092-9094 (default: detect Kafka on any port)")
    p.add_argument("--tls-keylog", action="append", default=[], metavar="FILE",
                   help="decrypt TLS with the session keys in this NSS key log file; repeatable")
    p.add_argument("--all", action="store_true", help="print info findings too (default: critical and warning, "
                                                      "info ones are counted)")
    p.add_argument("--records", action="store_true",
                   help="also decode every record (the schemas_by_topic table and the topic.* payload findings)")
    payload_options(p)


def with_paths(rows: Sequence[Mapping[str, Any]], paths: Mapping[str, Path]) -> list[dict[str, Any]]:
    """The show lines name the capture file as given on the command line, so they run as printed."""
    out = []
    for r in rows:
        r = dict(r)
        show, capture = r.get("show"), r.get("capture")
        if show and capture in paths:
            argv = shlex.split(show)
            if argv[:3] == ["kdissect", "show", capture]:
                argv[2] = str(paths[capture])
                r["show"] = shlex.join(argv)
        out.append(r)
    return out


def evidence_text(raw: object, limit: int = 400) -> str:
    """``key=value, ...`` from the evidence JSON, cut at ``limit`` characters (the JSON output has it all)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = raw
    if isinstance(value, Mapping):
        text = ", ".join(f"{k}={json.dumps(v)}" for k, v in value.items())
    else:
        text = str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def print_findings(rows: Sequence[Mapping[str, Any]], out: TextIO, *, show_info: bool, captures: int,
                   exchanges: int | None = None) -> None:
    """The findings worst first, after one line of how many, in how many captures (and exchanges) read."""
    from analysis.report_findings import subject_text   # a blank client id reads "(empty client id)"

    counts = {s: sum(1 for r in rows if r.get("severity") == s) for s in SEVERITY_ORDER}
    total = f"{len(rows)} finding{'s' if len(rows) != 1 else ''}"
    read = f" ({exchanges:,} exchange{'s' if exchanges != 1 else ''})" if exchanges is not None else ""
    print(f"{total} in {captures} capture{'s' if captures != 1 else ''}{read}: "
          + ", ".join(f"{n} {s}" for s, n in counts.items()), file=out)
    shown = [r for r in rows if show_info or r.get("severity") != "info"]
    wrap = textwrap.TextWrapper(width=110, initial_indent="    ", subsequent_indent="      ",
                                break_long_words=False, break_on_hyphens=False)
    for r in sorted(shown, key=lambda r: (SEVERITY_ORDER.get(r.get("severity"), 3), str(r.get("first_ts")))):
        print(file=out)
        print(f"{str(r.get('severity')).upper():8}  {r.get('finding')}  {r.get('subject_kind')} "
              f"{subject_text(r)}  [{r.get('capture')}]", file=out)
        print(wrap.fill(str(r.get("explanation") or "")), file=out)
        print(wrap.fill(f"look at: {r.get('advice') or ''}"), file=out)
        print(wrap.fill(f"evidence: {evidence_text(r.get('evidence'))}"), file=out)
        print(f"    show: {r.get('show')}", file=out)
    hidden = len(rows) - len(shown)
    if hidden:
        print(f"\n({hidden} info finding{'s' if hidden != 1 else ''} not shown: --all, or --json/--report)",
              file=out)


def _check_outputs(args: argparse.Namespace) -> None:
    for path in filter(None, [args.report, args.json]):
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise UsageError(f"{path}: directory {parent} does not exist")


def run(args: argparse.Namespace, out: TextIO | None = None, spark: Any = None) -> int:
    """Decode, analyze, print; the exit status (0; 1 for a critical finding; 3 for a damaged input).
    UsageError for bad use, KdissectError when it cannot do its work."""
    out = out or sys.stdout
    from analysis.exceptions import UsageError as AnalysisUsageError
    from analysis.arguments import findings_config
    from kdissect.run.decode import decode_files
    from kdissect.run.inputs import capture_files
    from kdissect.run.progress import ProgressLine
    from kdissect.run.source import DecodeOptions
    from kdissect.run.summary import damage_lines

    try:
        findings = findings_config(args.rules, args.set)  # checked before anything is decoded
    except AnalysisUsageError as exc:
        raise UsageError(str(exc)) from None
    _check_outputs(args)
    files = capture_files(args.inputs)
    try:
        options = DecodeOptions.from_args(args)
    except KdissectError as exc:
        raise UsageError(str(exc)) from None
    paths: dict[str, Path] = {}
    for f in files:
        paths.setdefault(f.name, f)  # the dataset names a capture by its file name

    # The engine starts while the captures decode (a JVM's start is most of a small capture's wait).
    starting = _SparkStart(args, sum(_size(f) for f in files) // CAPTURE_PER_PARQUET_BYTE, spark)
    try:
        with tempfile.TemporaryDirectory(prefix="kdissect-doctor-") as tmp:
            dataset_dir = args.dataset or os.path.join(tmp, "dataset")
            bar = ProgressLine(sys.stderr)
            try:
                decoded = decode_files(args.inputs, dataset_dir, options, bar)
            finally:
                bar.clear()
            damage = damage_lines(decoded.files, decoded.counts.anomalies)
            if not decoded.counts.exchanges and damage:
                raise DamagedInput(f"{'; '.join(damage)}: no Kafka exchange could be read, nothing to judge")
            if not decoded.counts.exchanges:
                raise UsageError(f"no Kafka exchanges in the input: {_why_no_exchanges(decoded.counts)}")
            results = _analyze(dataset_dir, findings, starting.wait())
    finally:
        starting.stop()
    results["findings"] = with_paths(results.get("findings", []), paths)
    rows = results["findings"]
    print_findings(rows, out, show_info=args.all, captures=decoded.counts.captures, exchanges=decoded.counts.exchanges)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, separators=(",", ":"))
            fh.write("\n")
        print(f"\nwrote {args.json}", file=out)
    if args.report:
        from analysis import html_report
        html_report.write(args.report, results, title="kdissect doctor")
        print(f"report: {os.path.abspath(args.report)}", file=out)
    if args.dataset:
        print(f"dataset: {os.path.abspath(args.dataset)}", file=out)
    for line in damage:
        sys.stderr.write(f"kdissect doctor: damaged input: {line}; the findings are of what could be read\n")
    if any(r.get("severity") == "critical" for r in rows):
        return EXIT_CRITICAL
    return EXIT_DAMAGED if damage else EXIT_OK


def _why_no_exchanges(counts: Any) -> str:
    """TLS without its keys, said as decode's summary says it; else the ports may be wrong."""
    from kdissect.run.summary import tls_advice
    return tls_advice(counts) or "nothing to judge (are --ports right?)"


# Capture bytes per byte of the dataset they decode to (~20 for small Produce requests), to size Spark
# before the dataset exists; a low guess only keeps the tuning for small inputs a little longer.
CAPTURE_PER_PARQUET_BYTE = 16


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _SparkStart:
    """Spark starting in a thread of its own while the captures decode; what it was checked and started with
    comes from the command line (``--master``, ``--remote`` or KDISSECT_SPARK_REMOTE). A Spark that cannot
    start is found before decoding (one line, exit 2)."""

    def __init__(self, args: argparse.Namespace, input_bytes: int, spark: Any = None) -> None:
        import threading

        from analysis.exceptions import AnalysisError
        from analysis.preflight import check_start, remote_url
        from analysis.session import running_on, start

        self.running: Any = running_on(spark) if spark is not None else None
        self.own = spark is None
        self.error: BaseException | None = None
        self.thread = None
        if spark is not None:
            return
        remote = remote_url(getattr(args, "remote", None))
        try:
            check_start(args.master, remote, getattr(args, "engine", None))
        except AnalysisError as exc:
            raise KdissectError(str(exc)) from None

        def run() -> None:
            try:
                self.running = start("kdissect-doctor", args.master, None, remote, input_bytes, checked=True,
                                     engine=getattr(args, "engine", None))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread by wait()
                self.error = exc
        self.thread = threading.Thread(target=run, name="kdissect-spark-start", daemon=True)
        self.thread.start()

    def wait(self) -> Any:
        from analysis.exceptions import AnalysisError
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            if isinstance(self.error, AnalysisError):
                raise KdissectError(str(self.error)) from None
            raise self.error
        return self.running

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.own and self.running is not None:
            self.running.stop()
            self.running = None


def _analyze(dataset_dir: str, findings: Any, spark: Any) -> dict[str, list[dict]]:
    """Every analysis table of the dataset, findings included, as the JSON-ready results object."""
    from analysis import output, schedule
    from analysis.exceptions import AnalysisError
    from analysis.jobs import JOBS

    try:
        return output.as_json(schedule.analyze(spark, schedule.Request([dataset_dir], findings=findings), JOBS))
    except AnalysisError as exc:
        raise KdissectError(str(exc)) from None
