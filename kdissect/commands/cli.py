"""The ``kdissect`` command: argument parsing, and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import NoReturn
from collections.abc import Callable, Sequence

from kdissect.errors import (
    EXIT_DAMAGED,
    EXIT_DOCTOR_FAILED,
    EXIT_FAILED,
    EXIT_USAGE,
    DamagedInput,
    KdissectError,
    UsageError,
)

EXIT_INTERRUPTED = 130   # the others: kdissect.errors (the README's exit codes)
COMPACT_WIDTH_TEXT = "120"   # kdissect.commands.show.COMPACT_WIDTH, without importing show for --help

MAIN_HELP = """\
Decode Apache Kafka traffic from packet captures into a Parquet dataset that
Spark, pandas and DuckDB read as it is.

Start here:
  kdissect doctor traffic.pcap                # what is wrong, worst first (decode + analyze)
  kdissect decode traffic.pcap -o out/        # capture file(s) -> Parquet dataset
  kdissect spark-decode caps/ -o out/         # the same, as Spark tasks (local or a cluster)
  kdissect show traffic.pcap --api Produce    # one line per Kafka message, like tshark
  kdissect live -i eth0 -o out/ --rotate 60   # sniff an interface into the dataset
  kdissect analyze out/ --report report.html  # analysis of the dataset, with a report (no Java)
  kdissect spark-server start                 # keep an engine running for --remote
  kdissect protocol                           # which api keys and versions are decoded

Run 'kdissect COMMAND --help' for each command's options and examples.
"""

DECODE_HELP = """\
Writes OUTDIR/exchanges/, OUTDIR/partitions/, OUTDIR/anomalies/ (and with
--records OUTDIR/records/): one Parquet file per table per capture, named from
the capture's file name and a hash of its path. Decoding the same capture again
replaces its files; other captures' files are left alone.

Rotated captures (tcpdump -C/-G, dumpcap ring buffers, editcap -c, kdissect
live --keep-pcap) are decoded as one capture, so exchanges cut by a rotation
still pair: files of one directory whose names differ only in their numbers,
with one link type, each starting within 10 s after the previous one ends. The
set is named after its first file. --separate-files decodes every file alone.

examples:
  kdissect decode traffic.pcapng -o out/
  kdissect decode caps/ -o out/ --ports 9092,9093 --records
  python -c "import pyarrow.dataset as ds; print(ds.dataset('out/exchanges').to_table().num_rows)"
"""

SHOW_HELP = """\
Each line: the frame number (Wireshark's: the packet that completed the
message), time, client -> broker (request) or client <- broker (response), api
and version, correlation id, client id or error name, latency of responses, and
the topic[partitions] the message touches; topic ids are shown by name once the
capture names them. A line starting with ! is an anomaly, or a request that was
never answered. Filters combine with AND; --errors and --slower-than select
responses; --topic finds Fetch v13+ messages, which name topics by id, by the
names the capture's Metadata responses give them. --slower-than leaves out
idle Fetch long-polls (no records back after waiting max_wait_ms), as analyze
does; --include-idle keeps them.

examples:
  kdissect show traffic.pcap
  kdissect show traffic.pcap --api Produce,Fetch --topic orders
  kdissect show traffic.pcap --errors
  kdissect show traffic.pcap --unanswered
  kdissect show traffic.pcap --slower-than 50 -V
  kdissect show traffic.pcap --since 2.5 --until 3 --compact
  kdissect show traffic.pcap --frames 100-200
  kdissect show rotated/ --errors          # tcpdump -C/-G files of one capture, read as one
  tcpdump -i lo -w - port 9092 | kdissect show -
"""

SPARK_DECODE_HELP = """\
As 'decode', with Spark tasks: one or more per capture file, each a share of
its TCP connections (--shards). Runs JVM Spark (Java 17): --master, or
spark-submit's, or local[*]. OUTDIR and the inputs must be at the same path on
every executor. A pattern is expanded here when the shell left it quoted.

examples:
  kdissect spark-decode caps/ -o out/
  kdissect spark-decode 'caps/*.pcap' -o out/ --records --master local[2]
  kdissect spark-decode /shared/caps/ -o /shared/out/ --master spark://host:7077
"""

COMPARE_HELP = """\
Decodes a capture with kdissect and with Wireshark's tshark, pairs the
messages by connection, direction and correlation id, and prints where api,
version, client id, error codes or topics differ, then a summary. A message
tshark could not decode (a version or api its Wireshark predates, a response
whose request it did not decode) is counted apart with the reason, not as a
disagreement. Needs tshark (Debian/Ubuntu: apt-get install tshark); --tshark
runs another, e.g. a newer Wireshark's.

examples:
  kdissect compare traffic.pcap
  kdissect compare traffic.pcap --ports 9092,9093
  kdissect compare traffic.pcap --tls-keylog keys.log
"""

PROTOCOL_HELP = """\
The api keys the dissector decodes (Kafka 0.8 to 4.x): key, name, the versions
decoded, the first flexible version, and the Kafka releases whose message specs
define them; then how many keys and versions in all.

examples:
  kdissect protocol
  kdissect protocol | grep -i fetch
"""

LIVE_HELP = """\
Captures Kafka traffic from a network interface into the same dataset as
'decode'. A capture process spools packets to OUTDIR/.spool/ (pcapng) and the
decoder follows it, so slow decoding costs delay, not packets. Every --rotate
seconds the current files are closed and become visible
(OUTDIR/<table>/live-<iface>-<start>-<run id>-<n>.parquet), so Spark can read
the dataset while the capture runs; an interval without traffic writes no file.
Stops after --duration seconds, --count packets, Ctrl-C or SIGTERM: what is
queued is read and decoded and the last files are written (exit 0). Interface
gone: the same, then exit 1. A second Ctrl-C stops decoding at once. Needs
root or CAP_NET_RAW.

examples:
  sudo kdissect live -i eth0 -o out/ --rotate 60
  sudo kdissect live -i lo --ports 9092 -o out/ --duration 300 --keep-pcap
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


def _number(kind: type, text: str) -> float:
    """``text`` as a whole number (``kind`` int) or a finite number (float)."""
    what = "a whole number" if kind is int else "a number"
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _positive(kind: type) -> object:
    """A count (int: at least 1) or an amount (float: greater than 0)."""
    if kind is int:
        return _at_least(int, 1)

    def parse(text: str) -> object:
        value = _number(kind, text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be a finite number greater than 0, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _at_least(kind: type, minimum: float) -> object:
    def parse(text: str) -> object:
        value = _number(kind, text)
        if value < minimum:
            whole = "a whole number, " if kind is int else ""
            raise argparse.ArgumentTypeError(f"must be {whole}at least {minimum:g}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _common(p: argparse.ArgumentParser, records: bool) -> None:
    p.add_argument("--ports", metavar="LIST",
                   help="Kafka ports, e.g. 9092,9093 or 9092-9094 (default: detect Kafka on any port)")
    p.add_argument("--protocol", action="append", metavar="PROTO[=PORTS]",
                   help="decode as Kafka 0.7 or 0.8+ instead of detecting it per connection, for every "
                        "connection or only those to PORTS (like Wireshark's Decode As), e.g. 0.7 or "
                        "0.7=9092,9093; repeatable")
    p.add_argument("--keep-secrets", action="store_true",
                   help="keep SASL tokens and credentials in the output (redacted by default)")
    _tls_keylog(p)
    if records:
        p.add_argument("--records", action="store_true",
                       help="also write OUTDIR/records/: one row per Kafka record")
        p.add_argument("--record-bytes", action="store_true",
                       help="put record key and value bytes in the records table (implies --records)")
        p.add_argument("--max-decompressed", type=int, default=64, metavar="MIB",
                       help="stop decompressing a records field past this many MiB, reported as an anomaly "
                            "(a guard against decompression bombs; default 64)")
    _payload_options(p, records)


def _payload_options(p: argparse.ArgumentParser, records: bool = True) -> None:
    """``records``: a command writing the dataset (its records table); else show, whose -V decodes them."""
    implies = " (implies --records)" if records else ""
    shown = "" if records else "with -V, "
    p.add_argument("--schemas", metavar="DIR",
                   help=f"{shown}decode record keys and values with the schemas in DIR: the registry's JSON saved "
                        "as {id}.json (curl REGISTRY/schemas/ids/{id}), or {id}.avsc, {id}.proto, "
                        f"{{id}}.schema.json{implies}")
    p.add_argument("--schema-registry", metavar="URL",
                   help=f"{shown}fetch the schemas of the ids seen from this Schema Registry"
                        + (f", cached in OUTDIR/schemas/{implies}" if records else " (kept in memory only)"))
    p.add_argument("--validate-json", action="store_true",
                   help=f"{shown}check JSON Schema values against their schema (needs jsonschema){implies}")


def _separate_files(p: argparse.ArgumentParser) -> None:
    p.add_argument("--separate-files", action="store_true",
                   help="decode every file as its own capture, even files that continue one another "
                        "(rotated captures are joined by default)")


def _max_series(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-max-series", type=_positive(int), default=1000, metavar="N",
                   help="at most N series per metric; later label combinations are added to one series "
                        "labelled 'other' (default 1000)")


def _tls_keylog(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-keylog", action="append", default=[], metavar="FILE",
                   help="decrypt TLS with the session keys in this NSS key log file (SSLKEYLOGFILE format); "
                        "repeatable; keys embedded in a pcapng file are used without it")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line. ``command``: the one about to run, whose options alone are needed; the
    others' are left out when they cost imports (doctor's and analyze's: ~7 ms of a decode's start)."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="kdissect", description=MAIN_HELP, formatter_class=fmt)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("decode", help="decode capture files into the Parquet dataset",
                       description=DECODE_HELP, formatter_class=fmt)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="pcap/pcapng files (gzip ok) or directories of them")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="dataset directory (created if missing)")
    _common(p, records=True)
    _separate_files(p)
    p.add_argument("-j", "--jobs", type=_positive(int), default=_cores(), metavar="N",
                   help="worker processes, each decoding a share of a capture's connections "
                        f"(default: the number of cores, {_cores()}; 1: one process)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    p.add_argument("--metrics-out", metavar="FILE.prom",
                   help="also write the metrics 'live --metrics' serves, for these captures, to FILE.prom "
                        "(Prometheus text format; needs the metrics extra)")
    _max_series(p)

    p = sub.add_parser("spark-decode", help="decode capture files into the Parquet dataset with Spark",
                       description=SPARK_DECODE_HELP, formatter_class=fmt)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="pcap/pcapng files (gzip ok), directories, globs")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="dataset directory (created if missing)")
    _common(p, records=True)
    _separate_files(p)
    p.add_argument("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--shards", type=_positive(int), metavar="N",
                   help="tasks per capture, each a share of its TCP connections (default: by size)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")

    p = sub.add_parser("show", help="print Kafka messages one per line (-V: every field)",
                       description=SHOW_HELP, formatter_class=fmt)
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="a pcap/pcapng file, or the files (or directory) of one rotated capture; - reads standard "
                        "input")
    p.add_argument("--api", action="append", default=[], metavar="NAME",
                   help="only these apis: names or keys, comma-separated or repeated (Produce,Fetch,3)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                   help="only messages about this topic, named by name or topic id; repeatable")
    p.add_argument("--client-id", action="append", default=[], metavar="ID",
                   help="only this client's requests and their responses; repeatable")
    p.add_argument("--errors", action="store_true", help="only responses carrying an error code, or malformed")
    p.add_argument("--unanswered", action="store_true",
                   help="only requests that never got a response (acks=0 Produce expects none), listed when the "
                        "capture shows they got none")
    p.add_argument("--slower-than", type=_positive(float), metavar="MS",
                   help="only responses that took at least MS milliseconds (idle Fetch long-polls left out)")
    p.add_argument("--include-idle", action="store_true",
                   help="--slower-than keeps idle Fetch long-polls")
    p.add_argument("--since", metavar="T",
                   help="only messages at or after T: seconds since the first message (the time column, e.g. "
                        "2.5) or a UTC time (2024-05-01T12:00:00)")
    p.add_argument("--until", metavar="T", help="only messages before T (as --since)")
    p.add_argument("--frames", metavar="N-M",
                   help="only messages completed in these frames (Wireshark's numbers): N, N-M, N- or -M")
    p.add_argument("-V", "--verbose", action="store_true", help="print each message's decoded fields as a tree")
    p.add_argument("-c", "--count", type=_positive(int), metavar="N", help="stop after N lines")
    p.add_argument("-t", "--absolute-time", action="store_true",
                   help="UTC date and time instead of seconds since the first message")
    p.add_argument("--compact", action="store_true",
                   help="shorter lines: ports instead of addresses, fewer words, each line cut at the "
                        f"terminal's width ({COMPACT_WIDTH_TEXT} when not a terminal)")
    _common(p, records=False)

    p = sub.add_parser("live", help="capture from a network interface into the dataset",
                       description=LIVE_HELP, formatter_class=fmt)
    p.add_argument("-i", "--interface", required=True, metavar="IFACE", help="network interface, e.g. eth0 or lo")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="dataset directory (created if missing)")
    p.add_argument("--rotate", type=_at_least(float, 1.0), default=60.0, metavar="SECONDS",
                   help="start new Parquet files every SECONDS of capture time (default 60, at least 1)")
    p.add_argument("--duration", type=_positive(float), metavar="SECONDS", help="stop after SECONDS")
    p.add_argument("--count", type=_positive(int), metavar="N", help="stop after N packets (like tcpdump -c)")
    p.add_argument("--keep-pcap", action="store_true",
                   help="keep the captured packets as pcapng files in OUTDIR/pcap/ (deleted once decoded otherwise)")
    p.add_argument("--spool-max", type=_at_least(int, 16), default=1024, metavar="MIB",
                   help="captured packets waiting to be decoded may take this much disk under OUTDIR/.spool/; "
                        "past it packets are dropped and reported (default 1024, at least 16)")
    p.add_argument("--metrics", metavar="[HOST:]PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics, updated as exchanges are decoded "
                        "(no HOST: every interface; needs the metrics extra)")
    p.add_argument("--otlp", metavar="URL",
                   help="export the same metrics over OTLP/HTTP to URL, e.g. http://collector:4318 "
                        "(/v1/metrics is added to a URL without a path; needs the metrics extra)")
    p.add_argument("--otlp-interval", type=_positive(float), default=10.0, metavar="SECONDS",
                   help="seconds between OTLP exports (default 10)")
    _max_series(p)
    _common(p, records=True)

    doctor_help = "decode + analyze + findings: what is wrong, worst first (exit 1: critical)"
    if command in (None, "doctor"):
        from kdissect.commands import doctor  # argument definitions only: Spark loads when the command runs
        doctor.add_arguments(sub.add_parser("doctor", help=doctor_help, description=doctor.HELP, formatter_class=fmt))
    else:
        sub.add_parser("doctor", help=doctor_help)

    p = sub.add_parser("compare", help="compare kdissect's decoding of a capture with Wireshark's",
                       description=COMPARE_HELP, formatter_class=fmt)
    p.add_argument("input", metavar="INPUT", help="a pcap/pcapng file")
    p.add_argument("--ports", metavar="LIST", help="Kafka ports (default: detect)")
    p.add_argument("--tshark", default="tshark", metavar="PATH",
                   help="the tshark to run (default: tshark on PATH); a newer Wireshark decodes more versions")
    _tls_keylog(p)

    analyze_help = "run the analysis over datasets: tables, JSON, HTML report (embedded engine, or --engine spark)"
    if command in (None, "analyze"):
        from analysis import cli as analysis_cli  # argument definitions only: Spark loads when the command runs
        analysis_cli.add_arguments(sub.add_parser("analyze", help=analyze_help, description=analysis_cli.HELP,
                                                  formatter_class=fmt))
    else:
        sub.add_parser("analyze", help=analyze_help)

    p = sub.add_parser("spark-server", help="start/stop a Spark Connect server that keeps Spark warm for --remote",
                       description=SPARK_SERVER_HELP, formatter_class=fmt)
    p.add_argument("action", choices=("start", "stop", "status", "url"))
    p.add_argument("--engine", choices=("sail", "spark"), default="sail",
                   help="what 'start' runs: sail (default: no Java needed, no token) or spark (a JVM, with a "
                        "token); stop, status and url act on whichever server runs")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=_positive(int), default=15002, help="port (default 15002, Spark Connect's)")
    p.add_argument("--memory", metavar="SIZE", help="--engine spark: the server JVM's heap, e.g. 4g (default: a "
                                                     "quarter of the machine's memory, 1g to 8g)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="--engine spark: a Spark setting; repeatable")

    sub.add_parser("protocol", help="list the api keys and versions the dissector decodes",
                   description=PROTOCOL_HELP, formatter_class=fmt)
    return parser


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _VersionAction(argparse.Action):
    """``--version``, worked out only when asked: the package metadata and the build's
    files take ~30 ms to read, which every command paid when argparse's own action was
    given the text up front."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the version and which build runs (compiled or pure Python), and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        sys.stdout.write(f"{parser.prog} {_version()}\n")
        parser.exit()


def _version() -> str:
    from hotpath import describe

    try:
        from importlib.metadata import version
        number = version("kafka-dissect")
    except Exception:  # noqa: BLE001 - not installed (running from a checkout)
        number = "dev"
    return f"{number} ({describe()})"


def _decode(args: argparse.Namespace) -> int:
    from kdissect.run.decode import decode_files
    from kdissect.run.progress import ProgressLine
    from kdissect.run.source import DecodeOptions
    from kdissect.run.summary import damage_lines, format_summary

    options = DecodeOptions.from_args(args)
    if args.metrics_out is not None:     # before decoding: a missing library or folder is one line now
        from kdissect.metrics.prometheus import require
        require("--metrics-out")
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.metrics_out))):
            raise UsageError(f"--metrics-out {args.metrics_out}: no such directory")
    if args.own_process:
        from kdissect.dataset.arrow import claim_process
        claim_process()
    bar = ProgressLine(sys.stderr)
    bar.enabled = bar.enabled and not args.quiet
    try:
        result = decode_files(args.inputs, args.output, options, bar, jobs=args.jobs)
    finally:
        bar.clear()
    if not args.quiet:
        tables = ["exchanges", "partitions", "anomalies"] + (["records"] if options.records else [])
        print(format_summary(result.counts, packets=result.packets, bytes_read=result.bytes_read,
                             elapsed=result.elapsed, outdir=str(result.outdir), tables=tables,
                             rotated=[(c[0].name, len(c)) for c in result.rotated]))
    if args.metrics_out is not None:
        from kdissect.metrics.fold import Health
        from kdissect.metrics.parquet import ParquetFold, fold_files
        from kdissect.metrics.prometheus import write_text
        fold = ParquetFold(args.metrics_max_series)
        fold.health = lambda: Health(packets=result.packets)
        fold_files(result.files, fold)
        write_text(fold, args.metrics_out)
    return _damaged(damage_lines(result.files, result.counts.anomalies), "what could be read is in the dataset")


def _damaged(lines: list[str], then: str) -> int:
    """One line per damaged capture on stderr, and exit 3; 0 when there is none."""
    for line in lines:
        sys.stderr.write(f"kdissect: damaged input: {line}; {then}\n")
    return EXIT_DAMAGED if lines else 0


def _show(args: argparse.Namespace) -> int:
    from kdissect.commands.filters import MessageFilter, parse_apis, parse_frames, parse_time
    from kdissect.run.inputs import captures, describe
    from kdissect.commands.show import COMPACT_WIDTH, ShowOptions, show
    from kdissect.run.source import DecodeOptions

    filt = MessageFilter(
        apis=parse_apis(args.api),
        topics=frozenset(args.topic) or None,
        client_ids=frozenset(args.client_id) or None,
        errors_only=args.errors,
        slower_than_ms=args.slower_than,
        include_idle=args.include_idle,
        unanswered=args.unanswered,
        since=parse_time(args.since, "--since") if args.since is not None else None,
        until=parse_time(args.until, "--until") if args.until is not None else None,
        frames=parse_frames(args.frames) if args.frames is not None else None,
    )
    if args.inputs == ["-"]:
        target: object = "/dev/stdin"
    elif "-" in args.inputs:
        raise UsageError("- (standard input) is read alone: show takes one capture")
    else:
        sets = captures(args.inputs)
        if len(sets) != 1:
            raise UsageError(f"{len(sets)} captures given ({', '.join(describe(c) for c in sets[:3])}"
                             f"{', ...' if len(sets) > 3 else ''}): show takes one capture, a file or the files "
                             "of one rotated capture")
        target = sets[0]
    width = None
    if args.compact:
        width = os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else COMPACT_WIDTH
    damage: list[str] = []
    notes: list[str] = []
    show(target, sys.stdout, ShowOptions(filt, args.verbose, args.absolute_time, args.count, width),  # type: ignore[arg-type]
         DecodeOptions.from_args(args), damage=damage, notes=notes)
    sys.stdout.flush()
    for note in notes:
        sys.stderr.write(f"kdissect: note: {note}\n")
    return _damaged(damage, "what could be read is shown")


def _live(args: argparse.Namespace) -> int:
    from kdissect.run.live import LiveOptions, run_live
    from kdissect.run.source import DecodeOptions

    options = DecodeOptions.from_args(args)
    from kdissect.metrics.run import MetricsOptions
    metrics = MetricsOptions(args.metrics, args.otlp, args.otlp_interval, args.metrics_max_series)
    return run_live(LiveOptions(args.interface, args.output, args.rotate, args.duration, args.count,
                                args.keep_pcap, args.spool_max << 20, metrics), options, sys.stderr)


def _compare(args: argparse.Namespace) -> int:
    from kdissect.run.source import ports_option
    try:
        from kdissect.commands.compare import run_compare
    except ModuleNotFoundError as exc:
        if exc.name != "kdissect.commands.compare":
            raise
        raise KdissectError("compare is not available in this installation") from None

    if not os.path.exists(args.input):
        raise UsageError(f"{args.input}: no such file")
    if not os.path.isfile(args.input):   # read twice, by kdissect and by tshark: no directory, no pipe
        raise UsageError(f"{args.input}: not a file: compare takes one pcap/pcapng file")
    damage: list[str] = []
    run_compare(args.input, ports_option(args.ports), sys.stdout, tshark=args.tshark,
                tls_keylog=tuple(args.tls_keylog), damage=damage)
    sys.stdout.flush()
    return _damaged(damage, "what could be read is compared")


def _protocol(args: argparse.Namespace) -> int:
    from dissector.schema import format_coverage
    print(format_coverage())
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from analysis.cli import run
    return _on_spark(run, args)


def _on_spark(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """A command that starts Spark the analysis' way: its errors said as kdissect's."""
    from analysis.exceptions import AnalysisError, DatasetError
    from analysis.exceptions import UsageError as AnalysisUsageError
    try:
        return run(args)
    except AnalysisUsageError as exc:
        raise UsageError(str(exc)) from None
    except DatasetError as exc:
        raise DamagedInput(str(exc)) from None
    except AnalysisError as exc:
        raise KdissectError(str(exc)) from None


COMMANDS = {"decode": _decode, "show": _show, "live": _live, "compare": _compare, "analyze": _analyze,
            "protocol": _protocol}


def _spark_decode(args: argparse.Namespace) -> int:
    from kdissect.spark.decode import run
    return _on_spark(run, args)


COMMANDS["spark-decode"] = _spark_decode



def _doctor(args: argparse.Namespace) -> int:
    from kdissect.commands.doctor import run
    try:
        return run(args)
    except capture_error() as exc:
        sys.stderr.write(f"kdissect doctor: {exc}\n")
        return EXIT_DAMAGED
    except KdissectError as exc:   # 1 means "a critical finding": doctor's own failures exit 4
        sys.stderr.write(f"kdissect doctor: {exc}\n")
        return exc.exit_code if exc.exit_code != EXIT_FAILED else EXIT_DOCTOR_FAILED


COMMANDS["doctor"] = _doctor

SPARK_SERVER_HELP = """\
A Spark Connect server left running, so that 'kdissect analyze' and 'doctor'
given its URL skip starting an engine of their own: for repeated analyses,
notebooks, or one server a team shares. It reads the datasets from its own file
system, so the paths given must be visible to it.

--engine sail (the default) runs Sail, the embedded engine, as a process of its
own: no Java needed, and it answers within a second. It has no token: it
listens on 127.0.0.1 by default, where anyone on this machine who can reach the
port can use it (and read what its user can read); with --host, anyone who can
reach the port over the network.

--engine spark runs JVM Spark's own Connect server from the pyspark install,
local[*] in a JVM of its own (Java 17 or newer). Its URL carries the server's
token: only its holders may use the server. --memory and --conf set this JVM;
Sail takes neither.

'start' prints the URL to give --remote or KDISSECT_SPARK_REMOTE; 'url' prints
it again; 'status' says whether a server runs, and which engine; 'stop' stops
it. Logs and state live in ~/.cache/kdissect/spark-server/.

examples:
  kdissect spark-server start
  export KDISSECT_SPARK_REMOTE=$(kdissect spark-server url)
  kdissect analyze out/ --report report.html
  kdissect spark-server stop
  kdissect spark-server start --engine spark --memory 4g
"""


def _spark_server(args: argparse.Namespace) -> int:
    from analysis import connect_server
    from analysis.exceptions import AnalysisError
    sail = args.engine == "sail"
    if args.action == "start" and sail and (args.memory is not None or args.conf):
        raise UsageError("--memory and --conf set JVM Spark's server: give them with --engine spark")
    try:
        if args.action == "start":
            conf = {}
            for pair in args.conf:
                key, sep, value = pair.partition("=")
                if not sep or not key.strip():
                    raise KdissectError(f"--conf {pair!r}: expected KEY=VALUE")
                conf[key.strip()] = value.strip()
            said = [0]

            def waited(seconds: float) -> None:  # never silent for long while the JVM starts
                if seconds >= said[0] + 10:
                    said[0] = int(seconds)
                    sys.stderr.write(f"  ... {said[0]} s\n")

            def announce() -> None:
                what = "a Sail Spark Connect server" if sail else "a Spark Connect server"
                sys.stderr.write(f"starting {what} on {args.host}:{args.port} ...\n")

            if sail:
                server = connect_server.start_sail(args.host, args.port, announce=announce)
            else:
                server = connect_server.start(args.host, args.port, args.memory, conf, progress=waited,
                                              announce=announce)
            print(f"Spark Connect server running (pid {server.pid}); use it with\n"
                  f"  kdissect analyze DATASET --remote '{server.url}'\n"
                  f"or export KDISSECT_SPARK_REMOTE='{server.url}'\n"
                  f"stop it with: kdissect spark-server stop   (logs: {server.state / 'logs'})")
            return 0
        if args.action == "stop":
            print("stopped" if connect_server.stop() else "no Spark Connect server was running")
            return 0
        server = connect_server.status()
        if args.action == "url":
            if not server.running:
                raise KdissectError("no Spark Connect server is running: kdissect spark-server start")
            print(server.url)
            return 0
        print(f"running (pid {server.pid}, {server.engine}): {server.url}" if server.running else "not running")
        return 0 if server.running else EXIT_FAILED
    except AnalysisError as exc:
        raise KdissectError(str(exc)) from None


COMMANDS["spark-server"] = _spark_server


class _NotRaised(Exception):
    """Stands for capture's error while capture is not imported, when it cannot have been raised."""


def capture_error() -> type[Exception]:
    """capture's error class once a command has imported capture. Importing capture only to name its
    error cost analyze, spark-server and --help 0.13 s of every start."""
    module = sys.modules.get("capture.errors")
    return module.CaptureError if module is not None else _NotRaised


def main(argv: Sequence[str] | None = None, *, own_process: bool = False) -> int:
    """Run a command. ``own_process``: the process is the ``kdissect`` command's and ends with it."""
    # numpy's OpenBLAS starts a busy-waiting thread per core at import, ~1 % of a decode's CPU and
    # more beside --jobs workers; nothing here multiplies matrices. Workers inherit the setting.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    args = parser.parse_args(words)
    args.own_process = own_process
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except KdissectError as exc:
        sys.stderr.write(f"kdissect: {exc}\n")
        return exc.exit_code
    except capture_error() as exc:   # a file that cannot be read as a capture; live: no capture privilege, ...
        sys.stderr.write(f"kdissect: {exc}\n")
        return EXIT_FAILED if args.command == "live" else EXIT_DAMAGED
    except KeyboardInterrupt:
        sys.stderr.write("kdissect: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`kdissect show ... | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def run() -> int:
    """The ``kdissect`` command: :func:`main`, then a quicker exit.

    At exit the interpreter's collector walks every object left (pyarrow's and numpy's
    modules, the schema), ~5 % of a small decode's instructions. Frozen objects are out
    of its walks; everything is still flushed and closed, and atexit handlers run.
    Not in :func:`main`, which tests and notebooks call in a process that goes on.
    """
    code = main(own_process=True)
    gc.freeze()
    return code
