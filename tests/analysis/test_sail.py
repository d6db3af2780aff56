"""The embedded engine (``analysis/sail.py``) as a command uses it: started in this process, what it keeps
written once as Parquet in its scratch directory and gone with it, and its failures one line each: a query it
cannot run (naming the table, and JVM Spark as the way around), and the engine going away mid-analysis."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from analysis import dataset, jobs, schedule, session
from analysis.exceptions import SparkFailed, SparkUnavailable

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "mixed.pcap"


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> Path:
    import kdissect
    out = tmp_path_factory.mktemp("sail") / "mixed"
    kdissect.write_dataset([str(SAMPLE)], out)
    return out


@pytest.fixture
def embedded():
    running = session.start_embedded("kdissect-sail-test")
    yield running
    running.stop()
    os.environ.pop(session.CONNECT_MODE_ENV, None)     # the other tests' classic session needs no mark


def test_it_serves_on_a_loopback_port_and_stops_with_its_scratch_directory(embedded):
    assert embedded.embedded.url.startswith("sc://127.0.0.1:") and embedded.embedded.running
    assert embedded.session.range(3).count() == 3
    scratch = Path(embedded.scratch)
    assert scratch.is_dir()
    embedded.stop()
    assert not scratch.exists() and not embedded.embedded.running


def test_kept_frames_are_written_once_and_removed_on_release(embedded, decoded):
    ds = dataset.cached(dataset.load(embedded.session, [str(decoded)]), scratch=embedded.scratch)
    (_, where, _), = ds.kept
    assert Path(where).is_dir() and any(Path(where).glob("*.parquet"))
    assert ds.exchanges.count() == dataset.load(embedded.session, [str(decoded)]).exchanges.count() > 0
    empty = ds.keep(ds.exchanges.where(F.lit(False)))       # no rows, no file: its schema still reads
    assert empty.count() == 0 and empty.columns == ds.exchanges.columns
    ds.release()
    assert ds.kept == [] and not Path(where).exists()


def test_a_query_it_cannot_run_names_the_table_and_jvm_spark(embedded, decoded, monkeypatch):
    def tables(ds, opts):
        # try_divide of doubles: a function Sail 0.7 does not implement.
        return {"ratios": ds.exchanges.select(F.try_divide(F.col("latency_ms"), F.col("latency_ms")).alias("r"))}
    monkeypatch.setattr(schedule, "tables_of", lambda name: tables)
    with pytest.raises(SparkFailed, match=r"^the embedded engine failed during the analysis \(table ratios\): .+"
                                          r"\(run it on JVM Spark with --engine spark\)$"):
        schedule.analyze(embedded, schedule.Request([str(decoded)]), ["latency"])


def test_the_engine_going_away_mid_analysis_is_one_line(embedded, decoded):
    stopped = threading.Event()

    def progress(done: int, total: int, name: str) -> None:
        if not stopped.is_set():
            stopped.set()
            embedded.embedded.stop()
    with pytest.raises(SparkUnavailable, match="the embedded engine stopped answering during the analysis"):
        schedule.analyze(embedded, schedule.Request([str(decoded)]), jobs.JOBS, progress)
