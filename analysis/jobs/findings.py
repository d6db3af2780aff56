"""Findings: the rules of :mod:`analysis.findings` run over the dataset, as one table worst first.

Each enabled rule that can fire on the dataset is a query of its own; the scheduler collects them side by
side and :func:`analysis.findings.merge` puts them together in the order ``findings()`` sorts them.

Tables: ``findings``.

Usage::

    python -m analysis findings DATASET... [--set RULE.THRESHOLD=VALUE] [--rules FILE.toml] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/findings.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from analysis import runner
from analysis.dataset import Dataset
from analysis.findings import Inputs, merge, prepared, rule_frames
from analysis.jobs import Pieces
from analysis.options import Options


def tables(ds: Dataset, opts: Options) -> dict[str, Pieces]:
    """The ``findings`` table: each rule a query of its own (``opts.findings``: the thresholds, the
    defaults when None; ``opts.present``: what the dataset holds, so rules that cannot fire are left out),
    over the dataset's exchanges, partitions, anomalies and records, with what several rules derive kept."""
    inp = prepared(Inputs(ds.exchanges, ds.partitions, getattr(ds, "anomalies", None),
                          records=getattr(ds, "records", None)), getattr(ds, "keep", None))
    return {"findings": Pieces(rule_frames(inp, opts.findings, opts.present), merge)}


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("findings", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
