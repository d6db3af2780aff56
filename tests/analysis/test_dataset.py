from __future__ import annotations

import datetime as dt
import io
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import dataset, errors, report
from tests.analysis.conftest import at

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
US = 1_000_000


def _us(seconds: float) -> int:
    return int(at(seconds).timestamp() * US)


def write_dataset(root: Path) -> Path:
    """A two-exchange dataset as a writer might lay it out: narrow ints, UTC µs timestamps."""
    (root / "exchanges").mkdir(parents=True)
    (root / "partitions").mkdir()
    pq.write_table(pa.table({
        "capture": ["a.pcap", "a.pcap"], "connection": ["1", "1"],
        "api_key": pa.array([0, 18], pa.int16()), "api_name": ["Produce", "ApiVersions"],
        "api_version": pa.array([9, 3], pa.int16()), "correlation_id": pa.array([5, 1], pa.int32()),
        "client_id": ["app", "app"], "client_ip": ["10.0.0.1", "10.0.0.1"],
        "broker_ip": ["10.0.0.9", "10.0.0.9"], "broker_port": pa.array([9092, 9092], pa.uint16()),
        "request_ts": pa.array([_us(1), _us(0)], pa.timestamp("us", tz="UTC")),
        "response_ts": pa.array([_us(1.004), _us(0.001)], pa.timestamp("us", tz="UTC")),
        "latency_ms": [4.0, 1.0], "request_bytes": pa.array([120, 30], pa.int32()),
        "error_code": pa.array([6, 0], pa.int16()), "error_name": ["NOT_LEADER_OR_FOLLOWER", "NONE"],
        "status": ["ok", "ok"], "inferred": [False, False],
    }), root / "exchanges" / "part-0.parquet")
    pq.write_table(pa.table({
        "capture": ["a.pcap"], "connection": ["1"], "correlation_id": pa.array([5], pa.int32()),
        "api_key": pa.array([0], pa.int16()), "api_name": ["Produce"], "direction": ["request"],
        "ts": pa.array([_us(1)], pa.timestamp("us", tz="UTC")), "topic": ["orders"],
        "partition": pa.array([0], pa.int32()), "record_count": pa.array([3], pa.int32()),
    }), root / "partitions" / "part-0.parquet")
    return root


def test_read_widens_narrow_columns_and_fills_missing_ones(spark, tmp_path):
    root = write_dataset(tmp_path / "ds")
    ex = dataset.read_exchanges(spark, str(root))
    assert ex.schema == dataset.EXCHANGES
    assertDataFrameEqual(
        ex.select("api_key", "api_version", "broker_port", "request_ts", "request_bytes", "throttle_ms"),
        spark.createDataFrame([(0, 9, 9092, at(1), 120, None), (18, 3, 9092, at(0), 30, None)],
                              "api_key int, api_version int, broker_port int, request_ts timestamp, "
                              "request_bytes long, throttle_ms int"))
    # records/ and anomalies/ were not written: empty, with their schema
    records = dataset.read_records(spark, str(root))
    assert records.schema == dataset.RECORDS and records.count() == 0
    # a required table missing is an error, not an empty result that looks like a quiet capture
    with pytest.raises(FileNotFoundError, match="anomalies: no such directory"):
        dataset.read_anomalies(spark, str(root))


def test_format_table_aligns_and_marks_nulls(spark):
    df = spark.createDataFrame([("Produce", 2, 3.14159, dt.datetime(2024, 5, 1, 12, 0, 0, 500000)),
                                ("Fetch", 10, None, None)],
                               "api_name string, count long, p99_ms double, ts timestamp")
    assert report.format_table(df, limit=1).splitlines() == [
        "api_name  count  p99_ms  ts",
        "--------  -----  ------  ---------------------",
        "Produce       2    3.14  2024-05-01 12:00:00.5",
        "... (first 1 rows)",
    ]


def test_job_main_prints_tables_and_writes_csv(spark, tmp_path):
    root = write_dataset(tmp_path / "ds")
    out, printed = tmp_path / "out", io.StringIO()
    # The shared session stands in for the one main() would build (and stop).
    assert report.run("errors", errors.results, [str(root), "--out", str(out), "--format", "csv"],
                      printed, spark) == 0
    lines = printed.getvalue().splitlines()
    at_api = lines.index("== errors: by_api")
    assert lines[at_api + 1].split() == ["api_name", "error_code", "error_name", "count"]
    assert lines[at_api + 3].split() == ["Produce", "6", "NOT_LEADER_OR_FOLLOWER", "1"]
    csv = next((out / "error_rate_by_api").glob("part-*.csv")).read_text().splitlines()
    assert csv[0] == "api_name,responses,errors,error_rate"
    assert sorted(csv[1:]) == ["ApiVersions,1,0,0.0", "Produce,1,1,1.0"]


def test_module_entry_rejects_an_unknown_job_without_starting_spark():
    proc = subprocess.run([sys.executable, "-m", "analysis", "nosuchjob", "ds"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "usage: python -m analysis {latency,errors,throughput,versions}" in proc.stderr


def test_job_on_a_missing_dataset_is_one_line_and_exit_1(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "analysis", "latency", str(tmp_path / "nope")], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == f"analysis latency: {tmp_path / 'nope'}: no such directory (expected kdissect decode's output)\n"
