#!/usr/bin/env python3
"""Instructions per exchange of ``kdissect decode --jobs 1``, by part, counted by valgrind.

    python benchmarks/bench_instructions.py CAPTURE [--packets 10000,40000] [--against CHECKOUT] [--records]

Wall-clock time on a shared or virtual machine drifts by tens of percent from one
minute to the next, enough to hide or invent a 10 % change. Instruction counts
do not drift. The capture's first N and M packets are cut out with ``editcap``
and each slice is decoded under ``valgrind --tool=callgrind``. The difference
between the two runs, divided by the extra exchanges, is the cost of one
exchange with start-up and imports cancelled out. It is printed for the whole
decode and for its main parts (inclusive).

``--against`` measures another checkout the same way, side by side: a git
worktree of an older commit, built in place with
``python setup.py build_ext --inplace``. Each checkout runs its own code, found
first on ``PYTHONPATH``. Bytecode is compiled beforehand, so neither pays for
compiling ``.py`` files.

``--records`` decodes with ``kdissect decode --records``: every record batch is then decoded
(``decode_records``) and written to the records table, where without it only the batch headers
are read (``summarize``).

Slow: about 50 times the decode's own time per slice.
Needs valgrind and editcap: ``apt-get install valgrind tshark``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (label, pattern of the function's line in callgrind_annotate's inclusive listing)
def _method(module: str, cls: str, name: str) -> str:
    """A compiled method's function in the listing: its C function when a .pxd makes it cpdef
    (``__pyx_f_...``, every call), else its Python wrapper (``__pyx_pw_...``)."""
    prefix = "_".join(f"{len(p)}{p}" for p in (*module.split("."), cls))
    return rf"__pyx_(?:f_{prefix}_|pw_{prefix}_\d+){name}(?:\s|$)"


PARTS = [
    ("whole decode", r"PROGRAM TOTALS"),
    ("pipeline (reader, TCP, dissector)", r"__pyx_gb_7capture_8pipeline_8Pipeline_\d+generator "),
    # The per-segment fast path: capture.fastpath.established, before issue #44 capture.pipeline._established.
    ("  TCP fast path (established)", r"__pyx_f_7capture_(?:8fastpath_established|8pipeline__established)(?:\s|$)"),
    ("  dissector (Connection.feed)", _method("dissector.connection", "Connection", "feed")),
    ("    generated body decoders", _method("dissector.decoders", "Decoders", "decode")),
    # summarize's Python wrapper until the body decoders called summarize_field in C: either, across the change
    ("    record batch summary",
     r"__pyx_(?:pw_9dissector_7records_\d+summarize|f_9dissector_7records_summarize_field) "),
    ("rows and writer (CaptureWriter.event)", _method("kdissect.dataset.writer", "CaptureWriter", "event")),
    ("  RowBuilder.exchange", _method("kdissect.dataset.rows", "RowBuilder", "exchange")),
    # body_bytes whole: orjson's dumps until the C writer (hotpath.speedups.plain_json) wrote most bodies
    ("    JSON bodies (body_bytes)", r"__pyx_f_8kdissect_7dataset_6bodies_body_bytes(?:\s|$)"),
    ("    RowBuilder._partitions", _method("kdissect.dataset.rows", "RowBuilder", "_partitions")),
    # dissector.records until the full decode had its own module: either, to measure across the move
    ("      decode_records (--records)", r"__pyx_pw_9dissector_(?:7records|9recordset)_\d+decode_records "),
    # kdissect.columns until the dataset's modules moved to kdissect.dataset: either, to measure across the move
    ("  Arrow conversion", r"__pyx_pw_8kdissect_(?:7dataset_)?7columns_\d+to_arrow "),
    ("  Parquet write_table", r"ParquetWriter_\d+write_table"),
]


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        sys.exit(f"{tool} not found: apt-get install {package}")
    return path


def cut(capture: Path, packets: int, work: Path) -> Path:
    """The first ``packets`` packets, in the capture's own format (pcapng costs more to read than pcap)."""
    with open(capture, "rb") as f:
        pcapng = f.read(4) == b"\x0a\x0d\x0d\x0a"
    out = work / f"first{packets}.{'pcapng' if pcapng else 'pcap'}"
    subprocess.run([need("editcap", "tshark"), "-F", "pcapng" if pcapng else "pcap", "-r", str(capture), str(out),
                    f"1-{packets}"], check=True, capture_output=True)
    return out


def prepare(checkout: Path) -> None:
    """Bytecode for every package of ``checkout``, so that no run compiles sources."""
    packages = [str(checkout / p) for p in ("capture", "dissector", "kdissect", "payloads", "hotpath")
                if (checkout / p).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True, capture_output=True)


def count(checkout: Path, index: int, capture: Path, work: Path, records: bool) -> tuple[dict[str, int], int]:
    """Inclusive instructions per part of one decode, and the exchanges it wrote."""
    tag = f"{index}-{capture.stem}"
    out, profile = work / f"out-{tag}", work / f"callgrind-{tag}"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([need("valgrind", "valgrind"), "--tool=callgrind", f"--callgrind-out-file={profile}",
                           sys.executable, "-m", "kdissect", "decode", "-q", "--jobs", "1", "-o", str(out),
                           *(["--records"] if records else []), str(capture)],
                          cwd=checkout, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"decode under valgrind failed ({proc.returncode}) in {checkout}:\n{proc.stderr[-2000:]}")
    listing = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(profile)], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    parts = {}
    for label, pattern in PARTS:
        line = next((ln for ln in listing if re.search(pattern, ln)), None)
        parts[label] = int(line.split()[0].replace(",", "")) if line else 0
    import pyarrow.parquet as pq
    exchanges = sum(pq.ParquetFile(f).metadata.num_rows for f in (out / "exchanges").glob("*.parquet"))
    return parts, exchanges


def per_exchange(checkout: Path, index: int, small: Path, large: Path, work: Path,
                 records: bool) -> tuple[dict[str, float], float, int]:
    """(instructions per extra exchange by part, start-up instructions, extra exchanges)."""
    prepare(checkout)
    a, n_a = count(checkout, index, small, work, records)
    b, n_b = count(checkout, index, large, work, records)
    if n_b <= n_a:
        sys.exit(f"the larger slice has no more exchanges than the smaller ({n_b} vs {n_a}): use more packets")
    extra = n_b - n_a
    costs = {label: (b[label] - a[label]) / extra for label, _ in PARTS}
    fixed = a["whole decode"] - n_a * costs["whole decode"]
    return costs, fixed, extra


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", type=Path)
    ap.add_argument("--packets", default="10000,40000", help="packets in the two slices (default 10000,40000)")
    ap.add_argument("--against", type=Path, help="another checkout, built in place, to measure beside this one")
    ap.add_argument("--records", action="store_true", help="decode every record batch (kdissect decode --records)")
    args = ap.parse_args(argv)
    small_n, large_n = (int(x) for x in args.packets.split(","))
    checkouts = [ROOT] + ([args.against.resolve()] if args.against else [])
    with tempfile.TemporaryDirectory(prefix="kd-instr-") as tmp:
        work = Path(tmp)
        small, large = cut(args.capture, small_n, work), cut(args.capture, large_n, work)
        results = [per_exchange(c, i, small, large, work, args.records) for i, c in enumerate(checkouts)]
    names = [c.name if c != ROOT else "this checkout" for c in checkouts]
    print(f"{args.capture.name}{' with --records' if args.records else ''}: packets {small_n} and {large_n}, "
          f"{results[0][2]:,} exchanges apart")
    print(f"{'thousands of instructions per exchange':40s}" + "".join(f"{n[:14]:>16s}" for n in names))
    for label, _ in PARTS:
        row = "".join(f"{r[0][label] / 1e3:16.1f}" for r in results)
        print(f"{label:40s}{row}")
    print(f"{'start-up and fixed costs, millions':40s}" + "".join(f"{r[1] / 1e6:16.0f}" for r in results))
    print("(parts are inclusive; a row group that fills during the decode is converted and written inside "
          "CaptureWriter.event, the rest at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
