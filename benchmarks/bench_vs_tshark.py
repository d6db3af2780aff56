#!/usr/bin/env python3
"""``kdissect decode`` end to end against ``tshark -T fields`` on the same captures.

    sudo python benchmarks/bench_vs_tshark.py [--repeat 3] [--tshark PATH] [--jobs N] [--data DIR]
                                              [--no-pure] [--busiest] [--tree CHECKOUT] [CAPTURE ...]

Without CAPTURE arguments it uses the four captures of ``benchmarks/make_capture.py``
that issue 46 sets its targets on, in ``--data`` (default benchmarks/data): one-record
Produce exchanges on one producer connection (20,000 and 200,000 of them), and large
lz4 batches produced and fetched back (54 MB and 537 MB), writing any that are missing
with real clients against tansu (that needs root).

Each capture is decoded ``--repeat`` times by tshark, ``kdissect --jobs 1``,
``kdissect --jobs N`` (default: the number of cores) and the same code pure
(``--no-pure`` leaves that out), taking turns so that load from other processes
falls on all of them alike. Per tool it prints the
median wall time, the median CPU time (user + system, of the process and its
workers), the peak RSS of the largest single process (``wait4``), exchanges per
second, and the ratio tshark / kdissect. The load average is printed before and
after: on a shared machine, CPU time is the steadier figure.

``--tree`` runs the ``kdissect`` of another checkout (built in place), e.g. a branch beside
this one; the first line printed names the build.

``--busiest`` adds each run's CPU seconds of the command's own process plus those of
its busiest descendant (read from ``/proc`` every 5 ms while it runs): the parent
starts the workers and merges after them, so with a core for each process this is
about the wall time. On a machine whose other work takes a core, ``--jobs N`` cannot
show in the wall time what splitting the work between processes gains; this still does.

tshark: ``--tshark PATH`` or ``$TSHARK``, else Wireshark 4.4 from
``../shared/tools/tshark44``'s Debian 13 root when present (``$TSHARK44_ROOT``,
default /opt/trixie; the capture is copied into the root once, outside the
timing), else ``tshark`` on the PATH. It gets the Kafka ports kdissect found
(``-d tcp.port==P,kafka``) and prints nine fields per Kafka message.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
CAPTURES = ("one-conn-small-20k", "one-conn-small-200k", "large-batches-54mb", "large-batches-537mb")
TSHARK44 = ROOT.parent / "shared" / "tools" / "tshark44"

TSHARK_FIELDS = ("frame.time_epoch", "tcp.stream", "kafka.request_key", "kafka.request.version",
                 "kafka.correlation_id", "kafka.client_id", "kafka.error", "kafka.topic_name",
                 "kafka.partition_id")


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)     # seconds
    cpu: list[float] = field(default_factory=list)      # user + system seconds, children included
    rss_mb: float = 0.0                                 # peak resident set of the largest process, MiB
    busiest: list[float] = field(default_factory=list)  # CPU s of the process + its busiest descendant (--busiest)

    def add(self, wall: float, cpu: float, rss_mb: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.rss_mb = max(self.rss_mb, rss_mb)


class Busiest(threading.Thread):
    """Polls a process tree's CPU seconds per process from /proc until stopped."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.seen, self.done = pid, {}, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.done.wait(0.005):
            todo = [self.pid]
            while todo:
                p = todo.pop()
                try:
                    stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                    self.seen[p] = (int(stat[11]) + int(stat[12])) / self.TICK    # utime + stime
                    for task in os.listdir(f"/proc/{p}/task"):
                        todo += map(int, Path(f"/proc/{p}/task/{task}/children").read_text().split())
                except (OSError, IndexError, ValueError):
                    continue            # gone between two reads

    def result(self) -> float:
        self.done.set()
        self.join()
        root = self.seen.pop(self.pid, 0.0)
        return root + max(self.seen.values(), default=0.0)


def measure(cmd: list[str], runs: Runs, env: dict[str, str] | None = None, stdout=subprocess.DEVNULL,
            busiest: bool = False, cwd: Path | None = None) -> None:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=cwd)
    poll = Busiest(proc.pid) if busiest else None
    # wait4: this child's own rusage, with its waited-for workers folded in (maxrss: the largest one).
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if poll is not None:
        runs.busiest.append(poll.result())
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(cmd)}\n{err[-2000:]}")
    runs.add(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


class Tshark:
    def __init__(self, path: str | None) -> None:
        self.root: Path | None = None
        path = path or os.environ.get("TSHARK")
        if path is None:
            root = Path(os.environ.get("TSHARK44_ROOT", "/opt/trixie"))
            if TSHARK44.exists() or (root / "usr" / "bin" / "tshark").exists():
                if not (root / "usr" / "bin" / "tshark").exists():
                    subprocess.run([str(TSHARK44), "--version"], check=True, stdout=subprocess.DEVNULL)
                self.root = root
            else:
                path = shutil.which("tshark")
                if path is None:
                    sys.exit("tshark not found: apt-get install tshark, or pass --tshark PATH")
        self.path = path

    def command(self, capture: Path) -> tuple[list[str], Path]:
        """The command line, and the capture path it reads (inside the root for tshark44)."""
        if self.root is None:
            return [self.path or "tshark"], capture
        # Named by the whole path: captures of two sizes share a file name (small/x.pcap, full/x.pcap).
        tag = zlib.crc32(str(capture.resolve()).encode())
        inside = Path("/tmp") / f"kd-bench-{os.getpid()}-{tag:08x}-{capture.name}"
        if not (self.root / inside.relative_to("/")).exists():
            shutil.copyfile(capture, self.root / inside.relative_to("/"))
        return ["chroot", str(self.root), "tshark"], inside

    def cleanup(self) -> None:
        if self.root is not None:
            for f in (self.root / "tmp").glob(f"kd-bench-{os.getpid()}-*"):
                f.unlink()

    def version(self) -> str:
        cmd, _ = self.command(Path(__file__))
        out = subprocess.run(cmd + ["--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0] if out else "?"


def make_captures(data: Path) -> list[Path]:
    missing = [c for c in CAPTURES if not (data / f"{c}.pcap").exists()]
    if missing:
        if os.geteuid() != 0:
            sys.exit(f"{data}: captures missing ({', '.join(missing)}); writing them needs root")
        print(f"writing {', '.join(missing)} into {data} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_capture.py"), "--out", str(data),
                        "--only", ",".join(missing)], check=True)
    return [data / f"{c}.pcap" for c in CAPTURES]


def dataset_facts(outdir: Path) -> tuple[int, list[int]]:
    """Exchanges written, and the broker ports they used."""
    import pyarrow.dataset as ds
    table = ds.dataset(outdir / "exchanges", format="parquet").to_table(columns=["broker_port"])
    return table.num_rows, sorted({p for p in table.column("broker_port").to_pylist() if p is not None})


def bench(capture: Path, work: Path, repeat: int, jobs: int, tshark: Tshark, pure: bool = True,
          busiest: bool = False, tree: Path = ROOT) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)        # as installed: bytecode cached, not compiled per run
    out = work / f"{capture.stem}-{zlib.crc32(str(capture.resolve()).encode()):08x}-dataset"
    kd = [sys.executable, "-m", "kdissect", "decode", str(capture.resolve()), "-o", str(out), "-q"]
    # From the tree: python -m puts the working directory first on sys.path, before PYTHONPATH.
    subprocess.run(kd + ["--jobs", "1"], env=env, check=True, cwd=tree)    # warm-up: bytecode, page cache, ports
    exchanges, ports = dataset_facts(out)
    cmd, inside = tshark.command(capture)
    cmd = cmd + ["-n", "-r", str(inside)]
    for p in ports or [9092]:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    cmd += ["-Y", "kafka", "-T", "fields"] + [a for f in TSHARK_FIELDS for a in ("-e", f)]
    results = {"tshark": Runs(), "kdissect -j1": Runs(), f"kdissect -j{jobs}": Runs()}
    if pure:
        results["pure -j1"] = Runs()
    for _ in range(repeat):
        with (work / "tshark.tsv").open("wb") as tsv:      # written out, as kdissect writes Parquet
            measure(cmd, results["tshark"], stdout=tsv, busiest=busiest)
        measure(kd + ["--jobs", "1"], results["kdissect -j1"], env, busiest=busiest, cwd=tree)
        if jobs != 1:
            measure(kd + ["--jobs", str(jobs)], results[f"kdissect -j{jobs}"], env, busiest=busiest, cwd=tree)
        if pure:   # the same code without its compiled modules (setup.py): what the compiled build buys
            measure(kd + ["--jobs", "1"], results["pure -j1"], {**env, "KDISSECT_PURE": "1"}, busiest=busiest,
                    cwd=tree)
    return {"exchanges": exchanges, "runs": results}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and capture (default 3)")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="kdissect workers (default: cores)")
    ap.add_argument("--tshark", help="tshark binary (default: Wireshark 4.4 via shared/tools/tshark44, else PATH)")
    ap.add_argument("--data", type=Path, default=DATA, help="where the default captures are (default benchmarks/data)")
    ap.add_argument("--no-pure", action="store_true", help="leave out the pure-Python run")
    ap.add_argument("--busiest", action="store_true",
                    help="also the CPU seconds of each run's process plus its busiest worker (polls /proc)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose kdissect runs (default: this one)")
    args = ap.parse_args(argv)

    captures = args.captures or make_captures(args.data)
    tshark = Tshark(args.tshark)
    tree = args.tree.resolve()
    build = subprocess.run([sys.executable, "-m", "kdissect", "--version"], capture_output=True, text=True, cwd=tree,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(
                               filter(None, [str(tree), os.environ.get("PYTHONPATH")]))})
    print(f"{build.stdout.strip()}; {tshark.version()}; {os.cpu_count()} CPUs; median of {args.repeat} alternating runs; "
          "RSS: the largest single process", flush=True)
    print(f"{'capture':<34} {'MB':>6} {'exchanges':>9}  {'tool':<12} {'wall s':>7} {'cpu s':>7} {'RSS MB':>7} "
          f"{'exch/s':>8} {'exch/cpu-s':>10} {'tshark/this':>11}  load"
          + ("  path s, tshark/this by it" if args.busiest else ""), flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="kd-bench-") as tmp:
            for cap in captures:
                load = os.getloadavg()[0]
                report(cap, bench(cap, Path(tmp), args.repeat, args.jobs, tshark, not args.no_pure, args.busiest,
                                  tree), load)
    finally:
        tshark.cleanup()
    return 0


def report(cap: Path, r: dict, load_before: float) -> None:
    """One capture's lines, printed as soon as it is done (a long run on a busy machine shows its progress)."""
    load = f"{load_before:.1f}-{os.getloadavg()[0]:.1f}"
    mb = cap.stat().st_size / 1e6
    n = r["exchanges"]
    tw = statistics.median(r["runs"]["tshark"].wall)
    tb = statistics.median(r["runs"]["tshark"].busiest or [0.0])
    for i, (tool, runs) in enumerate(r["runs"].items()):
        wall, cpu = statistics.median(runs.wall), statistics.median(runs.cpu)
        head = f"{cap.parent.name + '/' + cap.name:<34} {mb:>6.0f} {n:>9,}" if i == 0 else " " * 51
        ratio = "" if tool == "tshark" else f"{tw / wall:.2f}x"
        busiest = ""
        if runs.busiest:
            b = statistics.median(runs.busiest)
            busiest = f"{b:>7.2f} {'' if tool == 'tshark' else f'{tb / b:.2f}x' if b else '?':>6}"
        print(f"{head}  {tool:<12} {wall:>7.2f} {cpu:>7.2f} {runs.rss_mb:>7.0f} {n / wall:>8,.0f} "
              f"{n / cpu:>10,.0f} {ratio:>11}  {load if i == 0 else '':<9} {busiest}".rstrip(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
