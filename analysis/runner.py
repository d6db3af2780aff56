"""One job from the command line: ``python -m analysis JOB`` and spark-submit of a job module.

Each job's ``main()`` is ``run_job(name, tables, argv)``: the arguments checked, Spark started (or the one
handed in used), the job's tables computed (:func:`analysis.schedule.analyze`), printed and written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from analysis.arguments import add_arguments, check_arguments
from analysis.exceptions import AnalysisError
from analysis.jobs import Tables
from analysis.output import Progress, print_tables, write_out
from analysis.preflight import remote_url
from analysis.schedule import Stats, analyze
from analysis.session import running_on, start


def run_job(job: str, tables: Tables, argv: Sequence[str] | None = None, out: TextIO | None = None,
            spark: Any = None) -> int:
    """``python -m analysis JOB`` / spark-submit of a job module: compute, print every table, write ``--out``.

    A ``spark`` passed in is used and left running (tests share one session).
    """
    p = argparse.ArgumentParser(prog=f"python -m analysis {job}", description=f"kdissect dataset analysis: {job}")
    add_arguments(p, report=False)
    args = p.parse_args(argv)
    out = out or sys.stdout
    from analysis.dataset import check_paths   # late: pyarrow and pyspark

    try:
        request = check_arguments(args)
        size = check_paths(args.datasets)
        stats = Stats()
        t0 = time.monotonic()
        running = running_on(spark) if spark is not None else start(f"kdissect-{job}", args.master, request.conf,
                                                                remote_url(args.remote), size, engine=args.engine)
        stats.mark("Spark session", t0)
        try:
            progress = Progress(sys.stderr, f"analysis {job}")
            try:
                results = analyze(running, request, [job], progress, stats)
            finally:
                progress.clear()
            if args.profile:
                print(stats.report(), file=sys.stderr)
            print_tables(results, [(name, f"{job}: {name}", None) for name in results], args.limit, out)
            if args.out:
                write_out(args.out, results, args.format)
                print(f"\nwrote {len(results)} tables ({args.format}) under {args.out}", file=out)
        finally:
            if spark is None:
                running.stop()
    except AnalysisError as exc:
        print(f"analysis {job}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
