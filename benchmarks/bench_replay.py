#!/usr/bin/env python3
"""``kdissect live`` against a recorded capture replayed at full speed through a veth pair.

    sudo python benchmarks/bench_replay.py [--data benchmarks/data] [--repeat 1] [--pps N | --mbps M]
                                           [--tree CHECKOUT] [CAPTURE ...]

Without CAPTURE arguments it replays the two shapes of issue 46 that ``make_capture.py`` writes
into ``--data``: ``one-conn-small-200k.pcap`` (small Produce exchanges on one connection; the target
is every exchange at 170,000 packets/s) and ``large-batches-537mb.pcap`` (lz4 batches produced and
fetched back; the target is every exchange at 1.7 Gbit/s).

Per capture: ``kdissect decode`` of the file gives the reference (its exchanges, keyed by client
port, broker port, api key and correlation id). Then, in a private network namespace, ``kdissect
live -i kdb0`` captures one end of a veth pair while ``tcpreplay --topspeed`` (or ``--pps N``) sends
the capture into the other end, kdb1 (``--pps`` and ``--mbps`` set tcpreplay's rate instead); SIGINT once tcpreplay has finished. A run keeps *every
exchange* when the live dataset holds the reference's exchanges, key for key, and nothing was
dropped: not by the veth (its rx/tx drop counters), not by the kernel's packet socket and not by
a full spool (``kdissect live``'s own summary).

The frames are sent as recorded: the capture's loopback frames carry all-zero MAC addresses and
127/8 addresses, so the veth hands each one to the packet socket (as a frame for another host) and
the namespace's IP stack drops it; nothing answers, and the capture sees exactly the recorded frames.
No tcprewrite is needed.

``--tree`` runs the ``kdissect`` of another checkout (built in place), e.g. the main branch
beside a change; the first line printed names the build.

Printed per run: the rate tcpreplay achieved (packets/s, Gbit/s of frame bytes), packets sent and
captured, drops, exchanges against the reference, and how long ``live`` took to decode its spool
after the replay stopped; the load average before and after, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_live import wait_packet_socket  # noqa: E402  (this directory: the script's own)
from tests.brokers import in_netns  # noqa: E402

DEFAULTS = (("one-conn-small-200k.pcap", "170,000 packets/s"), ("large-batches-537mb.pcap", "1.7 Gbit/s"))
KEY = ["client_port", "broker_port", "api_key", "correlation_id"]


def exchange_keys(out: Path) -> Counter:
    """The dataset's exchanges as a multiset of (client port, broker port, api key, correlation id)."""
    import pyarrow.dataset as ds
    t = ds.dataset(out / "exchanges", format="parquet").to_table(columns=KEY)
    return Counter(zip(*(t.column(c).to_pylist() for c in KEY)))


def reference(tree: Path, pcap: Path, work: Path) -> Counter:
    out = work / f"ref-{pcap.stem}"
    subprocess.run([sys.executable, "-m", "kdissect", "decode", str(pcap), "-o", str(out), "-q"],
                   check=True, cwd=tree, env=_env(tree))
    keys = exchange_keys(out)
    shutil.rmtree(out, ignore_errors=True)
    return keys


def _env(tree: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)     # as installed: bytecode and decoder cache kept
    return env


def _count(pattern: str, text: str) -> int:
    return sum(int(m.replace(",", "")) for m in re.findall(pattern, text))


def _tcpreplay_figures(text: str) -> dict:
    """What tcpreplay reports: packets and bytes sent, seconds, failures."""
    actual = re.search(r"Actual: (\d+) packets \((\d+) bytes\) sent in ([\d.]+) seconds", text)
    failed = re.search(r"Failed packets:\s+(\d+)", text)
    if not actual:
        raise RuntimeError(f"tcpreplay did not report what it sent:\n{text[-2000:]}")
    packets, nbytes, secs = int(actual.group(1)), int(actual.group(2)), float(actual.group(3))
    return {"sent": packets, "bytes": nbytes, "seconds": secs, "pps": packets / secs,
            "gbit_s": nbytes * 8 / secs / 1e9, "failed": int(failed.group(1)) if failed else 0}


def replay_once(tree: Path, pcap: Path, ref: Counter, work: Path, rate: list[str]) -> dict:
    ns = f"kd-replay-{os.getpid()}"
    out = work / f"live-{pcap.stem}"
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "kdb0", "type", "veth", "peer", "kdb1"], check=True)
        for dev in ("kdb0", "kdb1"):
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        live = subprocess.Popen(in_netns(ns, [sys.executable, "-m", "kdissect", "live", "-i", "kdb0",
                                              "-o", str(out)]),
                                cwd=tree, env=_env(tree), stderr=subprocess.PIPE, text=True)
        wait_packet_socket(live.pid)
        rep = subprocess.run(in_netns(ns, ["tcpreplay", "-i", "kdb1", *rate, str(pcap)]),
                             capture_output=True, text=True)
        stopped = time.monotonic()
        sent = _tcpreplay_figures(rep.stdout + rep.stderr)
        link = subprocess.run(in_netns(ns, ["cat", "/sys/class/net/kdb0/statistics/rx_dropped",
                                            "/sys/class/net/kdb1/statistics/tx_dropped"]),
                              capture_output=True, text=True, check=True).stdout.split()
        time.sleep(0.5)      # the last frames into the spool before the stop
        live.send_signal(signal.SIGINT)
        _, err = live.communicate(timeout=1800)
        decoded_after = time.monotonic() - stopped
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    if live.returncode != 0:
        raise RuntimeError(f"kdissect live failed ({live.returncode}):\n{err[-2000:]}")
    got = exchange_keys(out)
    shutil.rmtree(out, ignore_errors=True)
    captured = re.search(r"^live \S+: ([\d,]+) packets", err, re.M)
    missing, extra = ref - got, got - ref
    drops = {"veth": sum(int(x) for x in link), "tcpreplay": sent["failed"],
             "kernel": _count(r"([\d,]+) packets dropped by the kernel", err),
             "spool": _count(r"([\d,]+) dropped with the spool full", err)}
    return {**sent, "captured": int(captured.group(1).replace(",", "")) if captured else -1,
            "drops": drops, "exchanges": sum(got.values()), "expected": sum(ref.values()),
            "missing": sum(missing.values()), "extra": sum(extra.values()),
            "every_exchange": not missing and not extra and not any(drops.values()),
            "decoded_after_s": decoded_after}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--data", type=Path, default=ROOT / "benchmarks" / "data",
                    help="where make_capture.py wrote the default captures (default benchmarks/data)")
    ap.add_argument("--repeat", type=int, default=1, help="replays per capture (default 1)")
    pace = ap.add_mutually_exclusive_group()
    pace.add_argument("--pps", type=int, help="replay at this many packets/s instead of --topspeed")
    pace.add_argument("--mbps", type=float, help="replay at this many Mbit/s instead of --topspeed")
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose kdissect runs (default: this one)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench_replay: network namespaces and live capture need root")
    if shutil.which("tcpreplay") is None:
        sys.exit("bench_replay: tcpreplay not found (apt-get install tcpreplay)")
    targets = [(c, "") for c in args.captures] or [(args.data / n, t) for n, t in DEFAULTS]
    missing = [str(c) for c, _ in targets if not c.exists()]
    if missing:
        sys.exit(f"bench_replay: missing {', '.join(missing)}; write them with "
                 "sudo python benchmarks/make_capture.py --only one-conn-small-200k,large-batches-537mb")
    tree = args.tree.resolve()
    build = subprocess.run([sys.executable, "-m", "kdissect", "--version"], capture_output=True, text=True,
                           cwd=tree, env=_env(tree)).stdout.strip()
    rate = [f"--pps={args.pps}"] if args.pps else [f"--mbps={args.mbps}"] if args.mbps else ["--topspeed"]
    print(f"{build}; {os.cpu_count()} CPUs; tcpreplay {rate[0]} "
          "into a veth pair, kdissect live on the other end", flush=True)
    work = Path(tempfile.mkdtemp(prefix="kd-bench-replay-"))
    try:
        for pcap, target in targets:
            ref = reference(tree, pcap, work)
            for i in range(args.repeat):
                load = os.getloadavg()[0]
                r = replay_once(tree, pcap.resolve(), ref, work, rate)
                verdict = "every exchange" if r["every_exchange"] else "LOST"
                print(f"{pcap.name}: {r['pps']:,.0f} packets/s, {r['gbit_s']:.2f} Gbit/s "
                      f"({r['sent']:,} packets, {r['bytes'] / 1e6:,.0f} MB in {r['seconds']:.2f} s)"
                      f"{'; target ' + target if target else ''}", flush=True)
                print(f"  {verdict}: {r['exchanges']:,} of {r['expected']:,} exchanges "
                      f"(missing {r['missing']:,}, extra {r['extra']:,}); captured {r['captured']:,} packets; "
                      f"drops veth {r['drops']['veth']:,}, tcpreplay {r['drops']['tcpreplay']:,}, "
                      f"kernel {r['drops']['kernel']:,}, spool {r['drops']['spool']:,}; decoded "
                      f"{r['decoded_after_s']:.1f} s after the replay; load {load:.1f}-{os.getloadavg()[0]:.1f}",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
