"""Wireshark 4.4 against kdissect on every TLS sample, with the same keys: agreement per message.

    sudo python benchmarks/compare_tls_tshark44.py [--samples samples/tls] [--tshark ../shared/tools/tshark44]
                                                   [--only NAME[,NAME]] [-v]

For each ``samples/tls/X.pcap`` (key log ``X.keys``) and ``X.pcapng`` (keys in
its Decryption Secrets Blocks, no option), runs ``kdissect compare``'s engine
(:func:`kdissect.commands.compare.run_compare`) with the given tshark, and the same on
the plaintext hop ``X.plain.pcap`` as the reference: the TLS hop should agree
with Wireshark exactly where the plaintext hop does. ``-v`` prints every
message that differs.

``tshark44`` runs chrooted in its own Debian 13 root (``TSHARK44_ROOT``,
default /opt/trixie) and copies only the ``-r`` capture in, so the key log is
copied to the same path under ``/tmp`` on this machine and inside that root;
both copies are removed afterwards. Needs root (the chroot).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kdissect.commands.compare import run_compare  # noqa: E402

_DIFFER = re.compile(r"^differ  frame \d+ \S+ (.*)$")      # the message without frame and connection
_SUMMARY = re.compile(r"^(messages compared|agreeing|disagreeing|only kdissect|only wireshark)\s+(\d+)(.*)$")


def compare(path: Path, tshark: str, keylog: str | None) -> tuple[dict[str, int], str, list[str]]:
    """(summary counts, what the disagreements were about, the per-message lines) of one capture."""
    out = io.StringIO()
    run_compare(str(path), None, out, tshark=tshark, tls_keylog=(keylog,) if keylog else ())
    counts: dict[str, int] = {}
    kinds, lines = "", []
    for line in out.getvalue().splitlines():
        m = _SUMMARY.match(line)
        if m:
            counts[m[1]] = int(m[2])
            if m[1] == "disagreeing":
                kinds = m[3].strip()
        elif line.startswith(("differ", "only")):
            lines.append(line)
    return counts, kinds, lines


class SharedKeyLog:
    """The key log at one path valid both here and inside tshark44's chroot."""

    def __init__(self, keys: Path, chroot: Path) -> None:
        self.path = f"/tmp/kd-tshark44-{os.getpid()}-{keys.name}"
        self._copies = [Path(self.path), chroot / self.path.lstrip("/")]
        for copy in self._copies:
            shutil.copyfile(keys, copy)
            copy.chmod(0o600)

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, *exc: object) -> None:
        for copy in self._copies:
            copy.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", default=str(ROOT / "samples" / "tls"))
    ap.add_argument("--tshark", default=str(ROOT.parent / "shared" / "tools" / "tshark44"))
    ap.add_argument("--only", help="comma-separated sample names")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every message that differs")
    args = ap.parse_args()
    chroot = Path(os.environ.get("TSHARK44_ROOT", "/opt/trixie"))
    if not Path(args.tshark).exists():
        sys.exit(f"{args.tshark} not found: Wireshark 4.4's tshark wrapper (../shared/tools/tshark44)")
    if not (chroot / "tmp").is_dir():
        sys.exit(f"{chroot}/tmp missing: run {args.tshark} --version once (as root) to build its root")
    samples = Path(args.samples)
    names = sorted(p.stem for p in samples.glob("*.keys"))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    header = f"{'sample':<26} {'hop':<16} {'compared':>8} {'agree':>6} {'differ':>6} {'only kd':>7} {'only ws':>7}  differ on"
    print(header)
    totals = {"tls": [0, 0], "plain": [0, 0]}       # compared, agreeing
    same = True
    for name in names:
        runs: list[tuple[str, Path, Path | None]] = [("TLS, key log", samples / f"{name}.pcap", samples / f"{name}.keys")]
        if (samples / f"{name}.pcapng").exists():
            runs.append(("TLS, pcapng DSB", samples / f"{name}.pcapng", None))
        runs.append(("plaintext hop", samples / f"{name}.plain.pcap", None))
        seen: dict[str, Counter[str]] = {}
        for hop, path, keys in runs:
            if keys is not None:
                with SharedKeyLog(keys, chroot) as keylog:
                    counts, kinds, lines = compare(path, args.tshark, keylog)
            else:
                counts, kinds, lines = compare(path, args.tshark, None)
            n, ok = counts.get("messages compared", 0), counts.get("agreeing", 0)
            t = totals["plain" if hop.startswith("plain") else "tls"]
            t[0], t[1] = t[0] + n, t[1] + ok
            print(f"{name:<26} {hop:<16} {n:>8} {ok:>6} {counts.get('disagreeing', 0):>6} "
                  f"{counts.get('only kdissect', 0):>7} {counts.get('only wireshark', 0):>7}  {kinds}")
            if args.verbose:
                for line in lines:
                    print(f"    {line}")
            seen[hop] = Counter(m[1] if (m := _DIFFER.match(line)) else line for line in lines)
        reference = seen.pop("plaintext hop")
        for hop, found in seen.items():
            if found != reference:
                same = False
                print(f"{name:<26} {hop:<16} disagrees with Wireshark where the plaintext hop does not: "
                      f"{sorted((found - reference) + (reference - found))}")
    for hop, (n, ok) in totals.items():
        print(f"total {hop:<6} messages compared {n}, agreeing {ok}, disagreeing {n - ok}")
    print("every TLS run disagrees with Wireshark on exactly the messages (and fields) its plaintext hop does: "
          f"{'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
