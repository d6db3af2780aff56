"""A regression guard on how many Spark jobs a sample's analysis runs (a count, not a timing).

Every job is a scheduling round trip and, on a small capture, most of a table's cost: the analysis
once ran ~25 tables and 24 rules each as its own jobs, re-reading and re-parsing the dataset each time.
Now one job reads, parses and keeps the exchanges, and each table or rule is one query over them.
A change that sends a table back to re-reading (an uncached frame, a sort that samples its input
with a job of its own, a ``count()`` to decide something) shows up here before it shows up as seconds.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from analysis import findings, jobs, schedule

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "mixed.pcap"   # the bundled sample of ./run-sample.sh


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    import kdissect
    out = tmp_path_factory.mktemp("jobs") / "mixed"
    kdissect.write_dataset([str(SAMPLE)], out)
    return out


def bound(queries: int) -> int:
    """One job to read, parse and keep the exchanges, a few to keep derived frames, then one per query
    (no broadcast joins for a small input, so no join's small side runs as a job of its own), and some to
    spare. The bundled sample's analysis ran 261 jobs before the facts frame, 106 with it (48 queries),
    55 since the joins of small inputs stopped broadcasting (53 queries)."""
    return queries + 10


def test_a_samples_analysis_stays_under_its_job_bound(spark, dataset):
    stats = schedule.Stats()
    results = schedule.analyze(spark, schedule.Request([str(dataset)]), jobs.JOBS, stats=stats)
    assert results["summary"].num_rows == 1 and results["latency_by_api"].num_rows > 0
    # Every table is a query, except the findings: one query per rule.
    queries = len(results) - 1 + len(findings.RULES)
    assert queries >= 45
    assert stats.jobs is not None and 0 < stats.jobs <= bound(queries), \
        f"{stats.jobs} Spark jobs for {queries} result queries (bound {bound(queries)})"


def test_an_analysis_leaves_no_jvm_object_to_the_cycle_collector(spark, dataset):
    """py4j objects sit in reference cycles. Left to Python's collector, a run's JVM plans stayed pinned,
    with each broadcast join's hash table (a whole memory page each, 64 MB in this session), and the
    next analyses in the same JVM ran out of heap."""
    from py4j.java_gateway import JavaObject
    schedule.analyze(spark, schedule.Request([str(dataset)]), jobs.JOBS)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        pinned = sum(isinstance(o, JavaObject) for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert pinned == 0
