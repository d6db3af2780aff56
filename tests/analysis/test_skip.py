"""Tables and rules over apis a dataset does not hold are known empty without a Spark query; the results
are the same, schema and rows, as when every query runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import frames, jobs, schedule
from analysis.options import Options, Present

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "findings" / "findings-tiny-batches.pcap"  # Produce only


def test_needs_any_of_and_all_of_the_apis() -> None:
    produce_only = Options(present=Present(apis=frozenset({"Produce"}), api_keys=frozenset({frames.PRODUCE})))
    df = object()
    assert jobs.needs(produce_only, df, frames.PRODUCE, frames.FETCH) is df
    assert isinstance(jobs.needs(produce_only, df, frames.FETCH), jobs.Empty)
    assert isinstance(jobs.needs(produce_only, df, all_of=(frames.PRODUCE, frames.FETCH)), jobs.Empty)
    assert jobs.needs(Options(), df, frames.FETCH) is df          # nothing known: every query runs
    assert isinstance(jobs.needs(Options(present=Present(records=False)), df, records=True), jobs.Empty)
    assert jobs.needs(produce_only, df, records=True) is df       # records may be there


@pytest.mark.slow
def test_a_producer_captures_analysis_is_the_same_with_the_empty_tables_skipped(spark, tmp_path, monkeypatch):
    import kdissect
    kdissect.write_dataset([str(SAMPLE)], tmp_path / "ds")
    request = schedule.Request([str(tmp_path / "ds")])
    skipped, every = schedule.Stats(), schedule.Stats()
    fast = schedule.analyze(spark, request, jobs.JOBS, stats=skipped)
    known = schedule.inventory
    monkeypatch.setattr(schedule, "inventory", lambda ds: (None, *known(ds)[1:]))
    slow = schedule.analyze(spark, request, jobs.JOBS, stats=every)
    assert fast.keys() == slow.keys()
    assert [name for name in slow if not fast[name].equals(slow[name])] == []
    assert fast["throughput_by_topic"].num_rows > 0 and fast["rebalances"].num_rows == 0
    assert any(f["finding"] == "producer.tiny_batches" for f in fast["findings"].to_pylist())
    # Group, consumer and lag tables and rules were not queried.
    assert skipped.jobs is not None and every.jobs is not None and skipped.jobs + 10 <= every.jobs
