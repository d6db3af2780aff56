"""Throughput over time windows: requests/s and bytes/s per api; records/s and bytes/s per
topic-partition for Produce (records sent) and Fetch (records returned).

Usage::

    python -m analysis throughput DATASET [--master local[*]] [--window '1 second'] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/throughput.py DATASET [--window '1 second']
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import dataset, report

PRODUCE, FETCH = 0, 1


def _seconds() -> Column:
    # Window length from the bucket itself, so any interval string works.
    return F.col("w.end").cast("long") - F.col("w.start").cast("long")


def requests_over_time(exchanges: DataFrame, window: str = "1 minute") -> DataFrame:
    """Per window and api: requests, bytes each way, and their per-second rates.

    An exchange counts in the window of its request (of its response when the
    request was not captured).
    """
    ts = F.coalesce("request_ts", "response_ts")
    return (exchanges
            .groupBy(F.window(ts, window).alias("w"), "api_name")
            .agg(F.count(F.lit(1)).alias("requests"),
                 F.coalesce(F.sum("request_bytes"), F.lit(0)).alias("request_bytes"),
                 F.coalesce(F.sum("response_bytes"), F.lit(0)).alias("response_bytes"))
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "api_name",
                    "requests", "request_bytes", "response_bytes",
                    (F.col("requests") / _seconds()).alias("requests_per_s"),
                    (F.col("request_bytes") / _seconds()).alias("request_bytes_per_s"),
                    (F.col("response_bytes") / _seconds()).alias("response_bytes_per_s")))


def data_partitions(partitions: DataFrame) -> DataFrame:
    """Partition rows that carry records: Produce requests and Fetch responses."""
    return partitions.where(
        ((F.col("api_key") == PRODUCE) & (F.col("direction") == "request"))
        | ((F.col("api_key") == FETCH) & (F.col("direction") == "response")))


def topic_over_time(partitions: DataFrame, window: str = "1 minute") -> DataFrame:
    """Per window, api (Produce/Fetch), topic and partition: records, batches, bytes, and rates."""
    return (data_partitions(partitions)
            .withColumn("topic", F.coalesce("topic", "topic_id"))
            .groupBy(F.window("ts", window).alias("w"), "api_name", "topic", "partition")
            .agg(F.coalesce(F.sum("record_count"), F.lit(0)).alias("records"),
                 F.coalesce(F.sum("batch_count"), F.lit(0)).alias("batches"),
                 F.coalesce(F.sum("bytes"), F.lit(0)).alias("bytes"))
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    "api_name", "topic", "partition", "records", "batches", "bytes",
                    (F.col("records") / _seconds()).alias("records_per_s"),
                    (F.col("bytes") / _seconds()).alias("bytes_per_s")))


def topic_totals(windows: DataFrame) -> DataFrame:
    """Per api, topic and partition over the capture: totals, active windows and the peak window's rates."""
    return (windows.groupBy("api_name", "topic", "partition")
            .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"),
                 F.count(F.lit(1)).alias("active_windows"),
                 F.max("records_per_s").alias("peak_records_per_s"),
                 F.max("bytes_per_s").alias("peak_bytes_per_s")))


def results(spark: SparkSession, path: str, args: argparse.Namespace) -> report.Results:
    ex = dataset.read_exchanges(spark, path)
    parts = dataset.read_partitions(spark, path)
    windows = topic_over_time(parts, args.window).cache()
    return {
        "requests_over_time": requests_over_time(ex, args.window).orderBy("window_start", "api_name"),
        "topic_over_time": windows.orderBy("window_start", "api_name", "topic", "partition"),
        "topic_totals": topic_totals(windows).orderBy(F.col("records").desc()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return report.run("throughput", results, argv)


if __name__ == "__main__":
    sys.exit(main())
