"""Other readers see the dataset as it is: DuckDB (when installed) and Spark."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_duckdb_reads_the_dataset(public_dataset: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    n, unknown = con.execute(
        f"select count(*), count(*) filter (where error_name = 'UNKNOWN_ERROR_CODE(5120)') "
        f"from read_parquet('{public_dataset}/exchanges/*.parquet')").fetchone()
    assert n >= 30 and unknown == 1


@pytest.mark.slow
def test_spark_reads_the_dataset(public_dataset: Path) -> None:
    pyspark = pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession, functions as F

    spark = (SparkSession.builder.master("local[1]").appName("kdissect-test")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false").getOrCreate())
    try:
        ex = spark.read.parquet(str(public_dataset / "exchanges"))
        types = dict(ex.dtypes)
        assert types["request_ts"] == "timestamp" and types["latency_ms"] == "double"
        assert types["api_key"] == "smallint" and types["correlation_id"] == "int"
        row = ex.filter(F.col("capture") == "deepflowio__deepflow__00-produce-v7-sw8.pcap").first()
        assert row.api_name == "Produce" and row.client_id == "kafka-python-producer-1"
        assert str(row.request_ts).startswith("2023-11-15")
        parts = spark.read.parquet(str(public_dataset / "partitions"))
        assert parts.filter(F.col("topic") == "quickstart-events").count() >= 2
        for table in ("anomalies", "records"):
            assert spark.read.parquet(str(public_dataset / table)).count() >= 1
    finally:
        spark.stop()
    assert pyspark
