"""The ``kdissect`` command line: its commands, their options and help texts (examples included)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from kdissect.commands.options import (at_least, common_options, max_series, positive, separate_files,
                                       tls_keylog_option)
from kdissect.errors import EXIT_USAGE

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


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message} (see '{self.prog} --help')\n")
        raise SystemExit(EXIT_USAGE)


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
    common_options(p, records=True)
    separate_files(p)
    p.add_argument("-j", "--jobs", type=positive(int), default=_cores(), metavar="N",
                   help="worker processes, each decoding a share of a capture's connections "
                        f"(default: the number of cores, {_cores()}; 1: one process)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    p.add_argument("--metrics-out", metavar="FILE.prom",
                   help="also write the metrics 'live --metrics' serves, for these captures, to FILE.prom "
                        "(Prometheus text format; needs the metrics extra)")
    max_series(p)

    p = sub.add_parser("spark-decode", help="decode capture files into the Parquet dataset with Spark",
                       description=SPARK_DECODE_HELP, formatter_class=fmt)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="pcap/pcapng files (gzip ok), directories, globs")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="dataset directory (created if missing)")
    common_options(p, records=True)
    separate_files(p)
    p.add_argument("--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--shards", type=positive(int), metavar="N",
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
    p.add_argument("--slower-than", type=positive(float), metavar="MS",
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
    p.add_argument("-c", "--count", type=positive(int), metavar="N", help="stop after N lines")
    p.add_argument("-t", "--absolute-time", action="store_true",
                   help="UTC date and time instead of seconds since the first message")
    p.add_argument("--compact", action="store_true",
                   help="shorter lines: ports instead of addresses, fewer words, each line cut at the "
                        f"terminal's width ({COMPACT_WIDTH_TEXT} when not a terminal)")
    common_options(p, records=False)

    p = sub.add_parser("live", help="capture from a network interface into the dataset",
                       description=LIVE_HELP, formatter_class=fmt)
    p.add_argument("-i", "--interface", required=True, metavar="IFACE", help="network interface, e.g. eth0 or lo")
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="dataset directory (created if missing)")
    p.add_argument("--rotate", type=at_least(float, 1.0), default=60.0, metavar="SECONDS",
                   help="start new Parquet files every SECONDS of capture time (default 60, at least 1)")
    p.add_argument("--duration", type=positive(float), metavar="SECONDS", help="stop after SECONDS")
    p.add_argument("--count", type=positive(int), metavar="N", help="stop after N packets (like tcpdump -c)")
    p.add_argument("--keep-pcap", action="store_true",
                   help="keep the captured packets as pcapng files in OUTDIR/pcap/ (deleted once decoded otherwise)")
    p.add_argument("--spool-max", type=at_least(int, 16), default=1024, metavar="MIB",
                   help="captured packets waiting to be decoded may take this much disk under OUTDIR/.spool/; "
                        "past it packets are dropped and reported (default 1024, at least 16)")
    p.add_argument("--metrics", metavar="[HOST:]PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics, updated as exchanges are decoded "
                        "(no HOST: every interface; needs the metrics extra)")
    p.add_argument("--otlp", metavar="URL",
                   help="export the same metrics over OTLP/HTTP to URL, e.g. http://collector:4318 "
                        "(/v1/metrics is added to a URL without a path; needs the metrics extra)")
    p.add_argument("--otlp-interval", type=positive(float), default=10.0, metavar="SECONDS",
                   help="seconds between OTLP exports (default 10)")
    max_series(p)
    common_options(p, records=True)

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
    tls_keylog_option(p)

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
    p.add_argument("--port", type=positive(int), default=15002, help="port (default 15002, Spark Connect's)")
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
