"""``python -m analysis JOB DATASET... [--master M] [--out DIR] ...``: run one job, print its tables."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from analysis.jobs import JOBS, module_of


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in JOBS:
        print(f"usage: python -m analysis {{{','.join(JOBS)}}} DATASET... [--engine spark | --master M] [--since T] "
              "[--until T] [--window INTERVAL] [--out DIR [--format parquet|csv]] [--limit N]\n"
              "       (every job at once, with a report: kdissect analyze DATASET... --report FILE.html)",
              file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    # Imported late so `--help` and typos answer without starting Java.
    return module_of(argv[0]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
