"""The ``kdissect`` command: each command run from its parsed arguments, and the one place errors become
exit codes."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from kdissect.commands.parser import build_parser
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
    from kdissect.spark.driver import run
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
    with _field_spec_once():
        code = main(own_process=True)
    gc.freeze()
    return code


@contextmanager
def _field_spec_once() -> Iterator[None]:
    """While the command runs, ``inspect.getfullargspec(dataclasses.field)`` is worked out once. Cython's
    dataclasses (the compiled modules' events, headers, rows) ask it once per field as their modules load,
    370 times: 69M instructions, an eighth of an empty capture's ``kdissect decode``. Other callables
    are asked as ever; the function is put back afterwards."""
    import dataclasses
    import inspect

    real, field = inspect.getfullargspec, dataclasses.field
    spec = real(field)
    inspect.getfullargspec = lambda func: spec if func is field else real(func)
    try:
        yield
    finally:
        inspect.getfullargspec = real
