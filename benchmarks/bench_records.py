#!/usr/bin/env python3
"""Instructions per record of ``decode_records`` (``kdissect decode --records``), counted by valgrind.

    python benchmarks/bench_records.py [--records 500] [--against CHECKOUT]

``bench_instructions.py`` measures whole decodes of a capture; its capture of many small produce
requests has one record per batch, where a batch of many records is what ``--records`` spends its
time on. This decodes one records field of batches of ``--records`` records each (uncompressed and
lz4, keys, values and headers of the sizes real producers send), built with kafka-python, under
``valgrind --tool=callgrind``: once a few times and once many times more, so that the difference per
extra decode is the decode's cost with start-up and imports cancelled out.

``--against`` measures another checkout side by side, as in ``bench_instructions.py`` (built in
place with ``python setup.py build_ext --inplace``; each runs its own code, first on ``PYTHONPATH``).
Needs valgrind and kafka-python.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_RUNS = (2, 12)

_DECODE = """
import sys
from dissector.records import decode_records
data = open(sys.argv[1], "rb").read()
for _ in range(int(sys.argv[2])):
    rs = decode_records(data)
assert not rs.error and sum(len(b.records) for b in rs.batches) > 0
"""


def records_field(per_batch: int) -> tuple[bytes, int]:
    """Two batches (uncompressed and lz4) of ``per_batch`` records each, and their record count."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    rng = random.Random(44)
    out = b""
    for codec in (0, 3):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 26)
        for i in range(per_batch):
            key = f"key-{rng.randrange(10_000)}".encode()
            # Lengths past 63 bytes take two-byte varints, as most real values do.
            value = bytes(rng.randrange(32, 127) for _ in range(rng.choice((20, 200, 400))))
            headers = [("trace", b"%016x" % rng.getrandbits(64))] if i % 2 else []
            b.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
        out += bytes(b.build())
    return out, 2 * per_batch


def instructions(checkout: Path, field: Path, runs: int, work: Path) -> int:
    profile = work / f"callgrind-{checkout.name}-{runs}"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run([shutil.which("valgrind") or sys.exit("valgrind not found: apt-get install valgrind"),
                    "--tool=callgrind", f"--callgrind-out-file={profile}", sys.executable, "-c", _DECODE,
                    str(field), str(runs)], cwd=checkout, env=env, check=True, capture_output=True)
    totals = subprocess.run(["callgrind_annotate", str(profile)], capture_output=True, text=True,
                            check=True).stdout
    line = next(ln for ln in totals.splitlines() if "PROGRAM TOTALS" in ln)
    return int(line.split()[0].replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500, help="records per batch (default 500)")
    ap.add_argument("--against", type=Path, help="another checkout, built in place, to measure beside this one")
    args = ap.parse_args(argv)
    checkouts = [ROOT] + ([args.against.resolve()] if args.against else [])
    data, count = records_field(args.records)
    with tempfile.TemporaryDirectory(prefix="kd-records-") as tmp:
        work = Path(tmp)
        field = work / "records.bin"
        field.write_bytes(data)
        costs = []
        for c in checkouts:
            few, many = (instructions(c, field, runs, work) for runs in _RUNS)
            costs.append((many - few) / (_RUNS[1] - _RUNS[0]))
    names = [c.name if c != ROOT else "this checkout" for c in checkouts]
    print(f"decode_records of {len(data):,} bytes: two batches (none, lz4) of {args.records} records")
    print(f"{'':32s}" + "".join(f"{n[:14]:>16s}" for n in names))
    print(f"{'instructions per decode':32s}" + "".join(f"{c:16,.0f}" for c in costs))
    print(f"{'instructions per record':32s}" + "".join(f"{c / count:16,.0f}" for c in costs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
