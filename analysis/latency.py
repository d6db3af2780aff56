"""Request latency percentiles by api, client, broker, topic and time window; p99 spikes.

Latency is the dataset's ``latency_ms``: response first byte minus request
last byte, so only exchanges that saw both sides count.

Usage::

    python -m analysis latency DATASET [--master local[*]] [--window '1 second'] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/latency.py DATASET [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import dataset, report

QUANTILES = (0.5, 0.95, 0.99)
# percentile_approx's default accuracy: exact on small groups, bounded memory on large ones.
ACCURACY = 10_000


def answered(exchanges: DataFrame) -> DataFrame:
    """Exchanges with a measured latency (both request and response seen)."""
    return exchanges.where(F.col("latency_ms").isNotNull())


def with_broker(exchanges: DataFrame) -> DataFrame:
    """Adds ``broker`` as ``ip:port``."""
    return exchanges.withColumn("broker", F.concat_ws(":", "broker_ip", F.col("broker_port").cast("string")))


def _stats(value: str = "latency_ms") -> list[Column]:
    q = F.percentile_approx(value, list(QUANTILES), ACCURACY)
    return [F.count(F.lit(1)).alias("count"),
            q[0].alias("p50_ms"), q[1].alias("p95_ms"), q[2].alias("p99_ms"),
            F.max(value).alias("max_ms")]


def percentiles(exchanges: DataFrame, *keys: str) -> DataFrame:
    """count, p50/p95/p99 (observed values: percentile_approx) and max latency per group of ``keys``."""
    return answered(exchanges).groupBy(*keys).agg(*_stats())


def by_api(exchanges: DataFrame) -> DataFrame:
    return percentiles(exchanges, "api_name")


def by_client(exchanges: DataFrame) -> DataFrame:
    return percentiles(exchanges, "client_id")


def by_broker(exchanges: DataFrame) -> DataFrame:
    return percentiles(with_broker(exchanges), "broker")


def exchange_topics(partitions: DataFrame) -> DataFrame:
    """(capture, connection, correlation_id, topic): each topic an exchange touched, once.

    Both directions count, so an exchange whose request was not captured still
    gets the response's topics; topics known only by id (Fetch v13+ without a
    Metadata response in the capture) show as their id.
    """
    return (partitions
            .select("capture", "connection", "correlation_id",
                    F.coalesce("topic", "topic_id").alias("topic"))
            .where(F.col("topic").isNotNull())
            .distinct())


def with_topics(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per exchange and topic it touched (exchanges without topics drop out)."""
    return answered(exchanges).join(exchange_topics(partitions),
                                    ["capture", "connection", "correlation_id"])


def by_topic(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Latency per api and topic: a request naming three topics counts once for each."""
    return percentiles(with_topics(exchanges, partitions), "api_name", "topic")


def over_time(exchanges: DataFrame, window: str = "1 minute", *keys: str) -> DataFrame:
    """Latency percentiles per ``window`` bucket of request time (and per ``keys``)."""
    return (answered(exchanges)
            .groupBy(F.window("request_ts", window).alias("w"), *keys)
            .agg(*_stats())
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    *keys, "count", "p50_ms", "p95_ms", "p99_ms", "max_ms"))


def p99_spikes(windows: DataFrame, factor: float = 3.0, min_count: int = 1, *keys: str) -> DataFrame:
    """Windows of :func:`over_time` whose p99 is at least ``factor`` times the median window p99.

    The baseline is the median over all windows (per ``keys``), so one bad
    minute stands out against a capture's ordinary ones; ``min_count`` keeps a
    window holding a single slow request from counting as a spike.
    """
    baseline = windows.groupBy(*keys).agg(
        F.percentile_approx("p99_ms", 0.5, ACCURACY).alias("baseline_p99_ms"))
    joined = windows.join(baseline, list(keys)) if keys else windows.crossJoin(baseline)
    return (joined
            .withColumn("ratio", F.col("p99_ms") / F.col("baseline_p99_ms"))
            .where((F.col("count") >= min_count) & (F.col("p99_ms") >= F.col("baseline_p99_ms") * factor)))


def results(spark: SparkSession, path: str, args: argparse.Namespace) -> report.Results:
    ex = answered(dataset.read_exchanges(spark, path)).cache()
    parts = dataset.read_partitions(spark, path)
    windows = over_time(ex, args.window).cache()
    worst = F.col("p99_ms").desc()
    return {
        "by_api": by_api(ex).orderBy(worst),
        "by_client": by_client(ex).orderBy(worst),
        "by_broker": by_broker(ex).orderBy(worst),
        "by_topic": by_topic(ex, parts).orderBy(worst),
        "over_time": windows.orderBy("window_start"),
        "p99_spikes": p99_spikes(windows, 3.0, 5).orderBy(F.col("ratio").desc()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return report.run("latency", results, argv)


if __name__ == "__main__":
    sys.exit(main())
