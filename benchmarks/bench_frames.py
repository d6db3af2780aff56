#!/usr/bin/env python3
"""Peak RSS of ``kdissect decode`` on one large frame whose body is the densest array its message allows.

    python benchmarks/bench_frames.py                     # the 6 densest messages + Metadata v9's empty topics
    python benchmarks/bench_frames.py --top 20 --mb 16
    python benchmarks/bench_frames.py --only 3:request:9
    python benchmarks/bench_frames.py --against ../older-checkout   # and decoded by another checkout, alternating

A message's decoded form can cost many times its wire size: two wire bytes of an empty Metadata v9
topic entry become a dict of ~200 bytes. For each message (every api key's newest version, request
and response) the top-level array whose elements cost most decoded per wire byte
(dissector.budget's estimate) is filled with default elements up to MB megabytes, framed, put in
a capture (handshake, the frame, the other side's reply or request, an ApiVersions exchange after it)
and decoded by ``kdissect decode --jobs 1`` in a process of its own, whose peak RSS is printed
with the frame's size. The densest messages (each api key's densest array over its versions) are
the worst case of any api; ``--top`` chooses how many are measured. ``--against`` decodes each
capture with another checkout too (its own ``.venv``, built in place), one after the other.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dissector import budget, schema  # noqa: E402
from dissector.encoder import EncodeError, encode_body, request_frame, response_frame, uvarint  # noqa: E402
from tests.capture import pcaptools as pt  # noqa: E402

_DEFAULT = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0, "float64": 0.0, "bool": False,
            "string": "", "bytes": b"", "uuid": bytes(16)}

_DECODE = """
import resource, sys
from kdissect.commands.cli import main
import hotpath as compiled
status = main(['decode', '-q', '--jobs', '1', '-o', sys.argv[2], sys.argv[1]])
import capture.pipeline
print("compiled" if compiled.is_compiled(capture.pipeline) else "pure", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(status)
"""


def densest_arrays() -> list[tuple[float, int, str, int, str, object]]:
    """(decoded bytes per wire byte, api key, kind, version, field name, element) of each api key's densest
    top-level array, over its versions, densest first."""
    out = []
    for key in schema.api_keys():
        lo, hi = schema.version_range(key)
        best = None
        for v, kind in ((v, kind) for v in range(lo, hi + 1) for kind in ("request", "response")):
            msg = schema.message(key, kind, v)
            if msg is None:
                continue
            for f in msg.fields:
                if not f.type.startswith("[]") or f.tag is not None:
                    continue
                item = {} if f.type[2:] == "struct" else _DEFAULT.get(f.type[2:])
                if item is None:
                    continue
                d = budget.element_cost(f) / max(1, budget.element_min_size(f))
                if best is None or d > best[0]:
                    best = (d, key, kind, v, f.name, item)
        if best is not None:
            out.append(best)
    return sorted(out, key=lambda t: -t[0])


def frame_of(key: int, kind: str, v: int, name: str, item: object, size: int, corr: int) -> bytes:
    one = encode_body(key, kind, v, {name: [item]})
    two = encode_body(key, kind, v, {name: [item, item]})
    n = max(1, size // max(1, len(two) - len(one)))
    body = encode_body(key, kind, v, {name: [item] * n})
    return request_frame(key, v, corr, "bench", body) if kind == "request" else response_frame(key, v, corr, body)


def metadata_v9(topics: int, corr: int) -> bytes:
    """The issue's frame: a Metadata v9 request of empty topic entries, two wire bytes each."""
    return request_frame(3, 9, corr, "c", uvarint(topics + 1) + b"\x01\x00" * topics + b"\x01\x00\x00\x00")


def capture(kind: str, key: int, v: int, big: bytes, path: Path) -> None:
    c = pt.Conversation(mss=60000).handshake()
    if kind == "request":
        c.send(True, big)
    else:
        try:
            c.send(True, request_frame(key, v, 2, "bench", {}))
        except EncodeError:
            c.send(True, pt.api_versions_request(2))
        c.send(False, big)
    c.send(True, pt.api_versions_request(3)).send(False, pt.api_versions_response(3)).close()
    path.write_bytes(pt.pcap_bytes(c.records))


def measure(repo: Path, path: Path, out: Path) -> tuple[float, float, int, str]:
    venv = repo / ".venv" / "bin" / "python"
    t0 = time.monotonic()
    proc = subprocess.run([str(venv) if venv.exists() else sys.executable, "-c", _DECODE, str(path), str(out)],
                          cwd=repo, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    words = proc.stdout.split()
    peak = int(words[-1]) / 1024 if words else float("nan")
    return peak, time.monotonic() - t0, proc.returncode, words[-2] if len(words) > 1 else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=16, help="frame size in MB (default 16)")
    ap.add_argument("--top", type=int, default=6, help="densest messages to measure (default 6)")
    ap.add_argument("--only", action="append", default=[], metavar="KEY:KIND:VERSION",
                    help="measure this message's densest array (repeatable)")
    ap.add_argument("--against", type=Path, help="another checkout that decodes the same captures")
    args = ap.parse_args()
    size = args.mb << 20
    cases: list[tuple[str, str, int, int, bytes]] = []
    if not args.only:
        cases.append(("Metadata v9 request, empty topics", "request", 3, 9, metadata_v9(size // 2, 2)))
    table = densest_arrays()
    chosen = table[:args.top] if not args.only else [
        t for t in table if f"{t[1]}:{t[2]}:{t[3]}" in args.only]
    for d, key, kind, v, name, item in chosen:
        try:
            big = frame_of(key, kind, v, name, item, size, 2)
        except EncodeError as exc:
            print(f"api {key} {kind} v{v}: cannot encode ({exc})", file=sys.stderr)
            continue
        cases.append((f"api {key} {kind} v{v} [{name}] ~{d:.0f} B/B", kind, key, v, big))
    repos = [ROOT] + ([args.against.resolve()] if args.against else [])
    print(f"# {args.mb} MB frames, kdissect decode --jobs 1; peak RSS in MB, by checkout: "
          + ", ".join(r.name for r in repos))
    with tempfile.TemporaryDirectory(prefix="kd-frames-") as tmp:
        for i, (label, kind, key, v, big) in enumerate(cases):
            path = Path(tmp) / f"f{i}.pcap"
            capture(kind, key, v, big, path)
            cells = []
            for j, repo in enumerate(repos):
                peak, secs, rc, build = measure(repo, path, Path(tmp) / f"out{i}-{j}")
                cells.append(f"{peak:6.0f} MB {secs:5.1f} s {build}{'' if rc == 0 else f' exit {rc}'}")
            print(f"{label:48} {len(big) / 2**20:5.1f} MB  " + "  |  ".join(cells), flush=True)
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
