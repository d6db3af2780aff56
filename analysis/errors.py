"""Kafka error codes: counts by api, client and topic; error rates; exchange statuses.

Exchange-level counts use ``exchanges.error_code``; per-topic counts use the
per-partition error codes of responses in ``partitions`` (Produce, Fetch and
friends report errors per partition, not per request).

Usage::

    python -m analysis errors DATASET [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/errors.py DATASET [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import dataset, report


def failed(exchanges: DataFrame) -> DataFrame:
    """Exchanges whose response carried a non-zero error code."""
    return exchanges.where(F.col("error_code").isNotNull() & (F.col("error_code") != 0))


def error_counts(exchanges: DataFrame, *keys: str) -> DataFrame:
    """Failed exchanges per ``keys`` and error (code and name: unknown codes have no name)."""
    return failed(exchanges).groupBy(*keys, "error_code", "error_name").agg(F.count(F.lit(1)).alias("count"))


def by_api(exchanges: DataFrame) -> DataFrame:
    return error_counts(exchanges, "api_name")


def by_client(exchanges: DataFrame) -> DataFrame:
    return error_counts(exchanges, "client_id", "api_name")


def error_rate_by_api(exchanges: DataFrame) -> DataFrame:
    """Per api: responses seen, how many carried an error, and the fraction."""
    responded = exchanges.where(F.col("response_ts").isNotNull())
    is_error = (F.coalesce(F.col("error_code"), F.lit(0)) != 0).cast("long")
    return (responded.groupBy("api_name")
            .agg(F.count(F.lit(1)).alias("responses"), F.sum(is_error).alias("errors"))
            .withColumn("error_rate", F.col("errors") / F.col("responses")))


def by_topic(partitions: DataFrame) -> DataFrame:
    """Per api, topic and error: partition responses with that error, and how many partitions."""
    return (partitions
            .where((F.col("direction") == "response") & F.col("error_code").isNotNull()
                   & (F.col("error_code") != 0))
            .withColumn("topic", F.coalesce("topic", "topic_id"))
            .groupBy("api_name", "topic", "error_code", "error_name")
            .agg(F.count(F.lit(1)).alias("count"), F.countDistinct("partition").alias("partitions")))


def status_counts(exchanges: DataFrame) -> DataFrame:
    """Exchanges per api and status: unanswered, orphan and malformed ones show here, not as error codes."""
    return exchanges.groupBy("api_name", "status").agg(F.count(F.lit(1)).alias("count"))


def results(spark: SparkSession, path: str, args: argparse.Namespace) -> report.Results:
    ex = dataset.read_exchanges(spark, path).cache()
    parts = dataset.read_partitions(spark, path)
    most = F.col("count").desc()
    return {
        "by_api": by_api(ex).orderBy(most),
        "by_client": by_client(ex).orderBy(most),
        "by_topic": by_topic(parts).orderBy(most),
        "error_rate_by_api": error_rate_by_api(ex).orderBy(F.col("error_rate").desc()),
        "status_by_api": status_counts(ex).orderBy(F.col("status") == "ok", most),  # trouble first
    }


def main(argv: Sequence[str] | None = None) -> int:
    return report.run("errors", results, argv)


if __name__ == "__main__":
    sys.exit(main())
