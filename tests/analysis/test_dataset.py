"""Reading datasets, and the command line's answers to bad input (no Spark needed for those)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import dataset, output, preflight, runner
from analysis.exceptions import DatasetError
from tests.analysis.conftest import at

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "tansu-admin-errors.pcap"


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> Path:
    import kdissect
    out = tmp_path_factory.mktemp("ds") / "admin"
    kdissect.write_dataset([str(SAMPLE)], out)
    return out


def analyze(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kdissect", "analyze", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)


def one_line_failure(proc: subprocess.CompletedProcess, text: str, status: int = 3) -> None:
    """One line and ``status``: 3 for an input that is not a usable dataset, 2 for a path that does not exist."""
    assert proc.returncode == status and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert text in proc.stderr, proc.stderr


def test_not_a_directory_not_a_dataset_and_empty_are_one_line(tmp_path):
    one_line_failure(analyze(str(tmp_path / "nope")), "nope: no such directory", status=2)
    (tmp_path / "random").mkdir()
    one_line_failure(analyze(str(tmp_path / "random")), "not a kdissect dataset (no exchanges/, partitions/, "
                                                        "anomalies/)")
    import kdissect
    empty = tmp_path / "empty"
    for table in ("exchanges", "partitions", "anomalies"):
        (empty / table).mkdir(parents=True)
        pq.write_table(kdissect.SCHEMAS[table].empty_table(), empty / table / "x.parquet")
    one_line_failure(analyze(str(empty)), "empty dataset (no exchanges)")


def rewritten(decoded: Path, out: Path, name: str, change) -> Path:
    """A copy of the dataset with ``change`` applied to table ``name``'s files (as another writer wrote them)."""
    for table in ("exchanges", "partitions", "anomalies"):
        (out / table).mkdir(parents=True)
        for f in (decoded / table).glob("*.parquet"):
            t = pq.read_table(f)
            pq.write_table(change(t) if table == name else t, out / table / f.name)
    return out


def test_a_dataset_from_an_older_kdissect_missing_a_column_is_one_line(decoded, tmp_path):
    old = rewritten(decoded, tmp_path / "old", "partitions", lambda t: t.drop_columns(["offset"]))
    one_line_failure(analyze(str(old)), "no column offset: written by an older kdissect")


def test_a_dataset_whose_column_is_stored_as_another_type_is_one_line(decoded, tmp_path):
    # An int16 column written as int32 (as an older writer did): the engines read columns as stored.
    other = rewritten(decoded, tmp_path / "other", "exchanges",
                      lambda t: t.set_column(t.schema.get_field_index("api_key"), "api_key",
                                             t["api_key"].cast(pa.int32())))
    one_line_failure(analyze(str(other)), "column api_key is int32, expected int16: written by another kdissect")


def test_a_file_that_is_not_parquet_is_one_line(decoded, tmp_path):
    with pytest.raises(DatasetError, match="not a readable Parquet file"):
        bad = tmp_path / "bad"
        for table in ("exchanges", "partitions", "anomalies"):
            (bad / table).mkdir(parents=True)
        (bad / "exchanges" / "x.parquet").write_bytes(b"not parquet at all")
        dataset.check_paths([str(bad)])


def test_java_missing_or_too_old_is_one_line(tmp_path, monkeypatch):
    assert preflight.java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert preflight.java_major('java version "1.8.0_392"') == 8
    old = tmp_path / "jdk8" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    (old / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk8"))
    with pytest.raises(Exception, match="Spark needs Java 17 or newer, found Java 8"):
        preflight.check_java()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Exception, match="none was found: install a Java runtime"):
        preflight.check_java()


def test_module_entry_rejects_an_unknown_job_without_starting_spark():
    proc = subprocess.run([sys.executable, "-m", "analysis", "nosuchjob", "ds"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: python -m analysis {inventory,latency,")


def test_format_table_aligns_cuts_and_marks_nulls():
    table = pa.table({"api_name": ["Produce", "Fetch"], "count": [2, 10], "p99_ms": [3.14159, None],
                      "ts": pa.array([at(0.5), None], pa.timestamp("us", tz="UTC"))})
    assert output.format_table(table, limit=1).splitlines() == [
        "api_name  count  p99_ms  ts",
        "--------  -----  ------  -----------------------",
        "Produce       2    3.14  2024-05-01 12:00:00.500",
        "... 1 more rows",
    ]


def test_json_rows_are_plain_values_with_iso_utc_times():
    table = pa.table({"ts": pa.array([at(1.25)], pa.timestamp("us", tz="UTC")), "xs": [["a", "b"]],
                      "v": [float("nan")]})
    assert output.rows(table) == [{"ts": "2024-05-01T12:00:01.250000Z", "xs": ["a", "b"], "v": None}]


@pytest.mark.slow
def test_load_reads_several_datasets_cut_to_a_time_range(spark, decoded, tmp_path):
    import pyarrow.compute as pc
    ex = pq.read_table(decoded / "exchanges")
    times = sorted(pc.coalesce(ex["request_ts"], ex["response_ts"]).to_pylist())
    mid = times[len(times) // 2]
    ds = dataset.load(spark, [str(decoded), str(decoded)])
    assert ds.exchanges.count() == 2 * len(times)
    assert ds.records.count() == 0          # --records not asked: an empty table, not an error
    cut = dataset.load(spark, [str(decoded)], since=mid, until=times[-1])
    assert cut.exchanges.count() == sum(mid <= t < times[-1] for t in times) > 0


@pytest.mark.parametrize("checkpoint", [None, "MEMORY_AND_DISK_DESER", "DISK_ONLY"])
def test_kept_facts_are_checkpoints_for_a_spark_of_its_own_else_persisted_until_released(spark, decoded,
                                                                                          checkpoint):
    from analysis.facts import exchange_facts
    loaded = dataset.load(spark, [str(decoded)])
    ds = dataset.cached(loaded, checkpoint)
    (_, view, persisted), = ds.kept
    assert persisted is (checkpoint is None)
    assert spark.catalog.isCached(view) is (checkpoint is None)      # a checkpoint is not Spark's cache
    assert sorted(map(tuple, ds.exchanges.collect())) == sorted(map(tuple, exchange_facts(loaded.exchanges).collect()))
    assert ds.partitions is loaded.partitions                        # read from Parquet by each query
    ds.release()
    assert ds.kept == [] and view not in {t.name for t in spark.catalog.listTables()}


@pytest.mark.slow
def test_a_spark_query_failing_is_one_line_not_a_traceback(decoded):
    # A real failure Spark reports for a query (every table's result is bigger than the limit set).
    proc = analyze(str(decoded), "--engine", "spark", "--conf", "spark.driver.maxResultSize=1k")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("kdissect: Spark failed during the analysis: ") and "spark.driver.maxResultSize" in last, \
        proc.stderr[-3000:]


@pytest.mark.slow
def test_python_m_analysis_job_prints_and_writes_csv(spark, decoded, tmp_path):
    from analysis.jobs import errors
    printed = io.StringIO()
    assert runner.run_job("errors", errors.tables, [str(decoded), "--out", str(tmp_path / "o"), "--format", "csv"],
                          printed, spark) == 0
    assert "== errors: errors" in printed.getvalue() and "TOPIC_ALREADY_EXISTS" in printed.getvalue()
    csv = (tmp_path / "o" / "errors.csv").read_text().splitlines()
    assert csv[0].startswith('"api_name","error_name"') and any("TOPIC_ALREADY_EXISTS" in line for line in csv)
