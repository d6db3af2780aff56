"""TLS decryption cost: the same traffic decoded from its TLS hop and from its plaintext hop.

    python benchmarks/bench_tls.py [--data benchmarks/data] [--repeat 3] [--decoys 0,100000,1000000] [--keys-only]

Needs ``tls-bench.pcap``, ``tls-bench.plain.pcap`` and ``tls-bench.keys`` from
``sudo python benchmarks/make_tls_capture.py``. Each run is a fresh process
running ``kdissect decode`` (the whole path: capture, TLS, dissector, Parquet);
CPU time (user + sys, getrusage of the child) and peak RSS are reported, the
best of ``--repeat``. Then the TLS capture again with the key log padded with
N decoy lines (other connections' keys, as a long-lived SSLKEYLOGFILE has),
through the capture path alone (no Parquet writer): peak RSS must not grow
with the number of lines (``--keys-only`` runs just this part).
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Many connections' key look-ups (half of them absent from the log, as with one client's log only).
_LOOKUPS = """
import os, sys
from capture.tls.keylog import KeyLog, parse_line
log = KeyLog([sys.argv[1]])
real = [got[1] for got in map(parse_line, open(sys.argv[2], "rb")) if got]
wanted = [real[i % len(real)] if i % 2 else os.urandom(32) for i in range(int(sys.argv[3]))]
found = sum(bool(log.lookup(r)) for r in wanted)
assert found == len(wanted) // 2, found
"""

# The capture path alone (TLS + dissector, no Parquet writer, whose buffers dominate decode's RSS).
_EVENTS_ONLY = """
import sys
from capture import CaptureOptions, read_capture
for _ in read_capture(sys.argv[1], CaptureOptions(tls_keylog=tuple(sys.argv[2:]))):
    pass
"""


def run(args: list[str], events_only: bool = False, script: str | None = None) -> tuple[float, int]:
    """(CPU seconds, peak RSS KiB) of one fresh process (wait4: that child's own rusage)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if events_only:
        script = _EVENTS_ONLY
    cmd = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "kdissect", *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"kdissect {' '.join(args)} failed ({proc.returncode})")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def best(args: list[str], repeat: int) -> tuple[float, int]:
    results = [run(args) for _ in range(repeat)]
    return min(r[0] for r in results), max(r[1] for r in results)


def padded_keylog(real: Path, decoys: int, directory: Path) -> Path:
    path = directory / f"keys-{decoys}.log"
    with open(path, "w") as f:
        f.write("# SSL/TLS secrets log file\n")
        for i in range(decoys):
            f.write(f"CLIENT_RANDOM {secrets.token_hex(32)} {secrets.token_hex(48)}\n")
            if i == decoys // 2:
                f.write(real.read_text())
        if decoys == 0:
            f.write(real.read_text())
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(ROOT / "benchmarks" / "data"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--decoys", default="0,100000,1000000")
    ap.add_argument("--keys-only", action="store_true", help="only the key log size runs")
    ap.add_argument("--lookups", type=int, default=5000, help="connections looked up in each padded key log")
    args = ap.parse_args()
    data = Path(args.data)
    tls, plain, keys = data / "tls-bench.pcap", data / "tls-bench.plain.pcap", data / "tls-bench.keys"
    for p in (tls, plain, keys):
        if not p.exists():
            sys.exit(f"{p} missing: run sudo python benchmarks/make_tls_capture.py first")
    print(f"load {open('/proc/loadavg').read().split()[:3]}")
    with tempfile.TemporaryDirectory(prefix="kd-bench-tls-") as tmp:
        out = Path(tmp) / "out"
        size = tls.stat().st_size / 1e6
        if not args.keys_only:
            decode_speeds(tls, plain, keys, out, size, args.repeat)
        for n in (int(x) for x in args.decoys.split(",")):
            log = padded_keylog(keys, n, Path(tmp))
            cpu, rss = run([str(tls), str(log)], events_only=True)
            print(f"events only, key log with {n:>8,} decoy lines ({log.stat().st_size / 1e6:6.1f} MB): "
                  f"cpu {cpu:.2f} s  peak RSS {rss / 1024:.0f} MiB")
            cpu, rss = run([str(log), str(keys), str(args.lookups)], script=_LOOKUPS)
            print(f"    {args.lookups} connections' key look-ups (half absent), index included: "
                  f"cpu {cpu:.2f} s  peak RSS {rss / 1024:.0f} MiB")
            log.unlink()


def decode_speeds(tls: Path, plain: Path, keys: Path, out: Path, size: float, repeat: int) -> None:
    p_cpu, p_rss = best(["decode", "-q", str(plain), "-o", str(out)], repeat)
    t_cpu, t_rss = best(["decode", "-q", str(tls), "-o", str(out), "--tls-keylog", str(keys)], repeat)
    print(f"plaintext hop  {plain.stat().st_size / 1e6:.1f} MB  cpu {p_cpu:.2f} s  "
          f"({plain.stat().st_size / 1e6 / p_cpu:.1f} MB/s)  peak RSS {p_rss / 1024:.0f} MiB")
    print(f"TLS hop        {size:.1f} MB  cpu {t_cpu:.2f} s  ({size / t_cpu:.1f} MB/s)  "
          f"peak RSS {t_rss / 1024:.0f} MiB")
    print(f"TLS speed / plaintext speed: {p_cpu / t_cpu:.2f}x (same exchanges; TLS adds record framing, "
          "AEAD and the handshake)")
    cpu, rss = run([str(plain)], events_only=True)
    print(f"events only, plaintext hop: cpu {cpu:.2f} s  peak RSS {rss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
