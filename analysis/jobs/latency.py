"""Latency: percentiles by api and version, client, broker, topic, time window and Produce size; spikes.

Latency is the dataset's ``latency_ms`` (response first byte minus request
last byte), so only exchanges that saw both sides count. Two kinds of exchange
are not slowness and are left out of every percentile:

* **idle Fetch long-polls**: a Fetch whose response carries no records and
  that waited at least ``idle_fraction`` (0.9) of the request's ``max_wait_ms``
  is the broker holding the request open as asked. They are counted apart in
  ``idle_fetches``.
* **Produce with acks=0** has no response, hence no latency (status
  ``no_response_expected``).

Tables: ``latency_by_api``, ``latency_by_client``, ``latency_by_broker``,
``latency_by_topic``, ``latency_over_time``, ``latency_histogram``,
``latency_spikes``, ``latency_by_size``, ``idle_fetches``.

Usage::

    python -m analysis latency DATASET... [--master local[*]] [--window '1 second'] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/latency.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import derived, facts, frames, runner
from analysis.dataset import Dataset
from analysis.jobs import needs
from analysis.frames import ordered
from analysis.options import Options

QUANTILES = (0.5, 0.9, 0.99, 0.999)
# Histogram buckets: four per decade, from 1 µs up.
BUCKETS_PER_DECADE = 4
FLOOR_MS = 0.001
# Produce request size buckets (bytes, label): frame sizes including the length prefix.
SIZE_BUCKETS = ((0, "< 1 KiB"), (1 << 10, "1-16 KiB"), (16 << 10, "16-256 KiB"), (256 << 10, "256 KiB-1 MiB"),
                (1 << 20, ">= 1 MiB"))


# What the latency tables read of an exchange (the body fields aside): kept narrow, it is cached.
LATENCY_COLUMNS = ["capture", "connection", "correlation_id", "client_id", "broker_ip", "broker_port", "api_key",
                   "api_name", "api_version", "request_ts", "latency_ms", "request_bytes"]


def fetched_records(partitions: DataFrame) -> DataFrame:
    """(keys, records): records carried by each Fetch response."""
    return (partitions.where(derived.api(frames.FETCH) & (F.col("direction") == "response"))
            .groupBy(*frames.KEYS).agg(F.sum(F.coalesce("record_count", F.lit(0))).alias("records")))


def classified(exchanges: DataFrame, partitions: DataFrame, idle_fraction: float = 0.9) -> DataFrame:
    """Exchanges with a latency, plus ``idle`` (a Fetch long-poll that returned nothing) and ``max_wait_ms``."""
    fetch = derived.api(frames.FETCH)
    max_wait = F.when(fetch, F.col("req_max_wait_ms").cast("double"))
    answered = (facts.typed(exchanges)
                .where(F.col("latency_ms").isNotNull() & (F.col("status") != "no_response_expected"))
                .select(*LATENCY_COLUMNS, max_wait.alias("max_wait_ms")))
    with_records = answered.join(fetched_records(partitions), frames.KEYS, "left")
    idle = (fetch & (F.coalesce(F.col("records"), F.lit(0)) == 0) & (F.col("max_wait_ms") > 0)
            & (F.col("latency_ms") >= F.col("max_wait_ms") * idle_fraction))
    # A request without max_wait_ms (0.7's Fetch) makes the rule null: no wait asked for, so no idle poll.
    return with_records.withColumn("idle", F.coalesce(idle, F.lit(False))).drop("records")


def timed(classified_exchanges: DataFrame) -> DataFrame:
    """The exchanges whose latency measures the broker's work: idle long-polls removed."""
    return classified_exchanges.where(~F.col("idle"))


def mean(value: str) -> Column:
    """The mean of a latency column, the same whatever order Spark adds the rows in: a double sum depends on
    it (the same table from another plan, partitioning or server differed in its last digits), a decimal
    sum does not. Sixteen decimals keep every digit a double latency has (and a mean to twenty), so the
    result is the double sum's up to its rounding; the fourteen integer digits hold millennia of ms."""
    return F.avg(F.col(value).cast("decimal(30,16)")).cast("double")


def stats(value: str = "latency_ms") -> list[Column]:
    values = frames.sorted_values(value)      # one sort per group for the four percentiles
    p50, p90, p99, p999 = (frames.nearest_rank(values, p) for p in QUANTILES)
    return [F.count(F.lit(1)).alias("count"), mean(value).alias("mean_ms"),
            p50.alias("p50_ms"), p90.alias("p90_ms"), p99.alias("p99_ms"), p999.alias("p999_ms"),
            F.max(value).alias("max_ms")]


STATS = ["count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"]


def percentiles(rows: DataFrame, *keys: str) -> DataFrame:
    return rows.groupBy(*keys).agg(*stats())


def by_api(rows: DataFrame) -> DataFrame:
    return percentiles(rows, "api_name", "api_version")


def by_client(rows: DataFrame) -> DataFrame:
    return percentiles(rows, "client_id")


def by_broker(rows: DataFrame) -> DataFrame:
    return percentiles(rows.withColumn("broker", derived.broker()), "broker")


def exchange_topics(partitions: DataFrame) -> DataFrame:
    """(keys, topic): each topic an exchange touched, once (either direction counts)."""
    return (partitions.select(*frames.KEYS, frames.topic().alias("topic"))
            .where(F.col("topic").isNotNull()).distinct())


def by_topic(rows: DataFrame, partitions: DataFrame) -> DataFrame:
    """Per api and topic: a request naming three topics counts once for each."""
    return percentiles(rows.join(exchange_topics(partitions), frames.KEYS), "api_name", "topic")


def over_time(rows: DataFrame, window: str = "1 minute") -> DataFrame:
    """Per window of request time and api."""
    return (percentiles(rows.withColumn("w", F.window("request_ts", window)), "w", "api_name")
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    "api_name", *STATS))


def histogram(rows: DataFrame) -> DataFrame:
    """Per api, counts in log-spaced buckets (four per decade): the distribution chart's data."""
    index = F.floor(F.log10(F.greatest(F.col("latency_ms"), F.lit(FLOOR_MS))) * BUCKETS_PER_DECADE)
    return (rows.groupBy("api_name", index.alias("i")).agg(F.count(F.lit(1)).alias("count"))
            .select("api_name",
                    F.round(F.pow(F.lit(10.0), F.col("i") / BUCKETS_PER_DECADE), 6).alias("bucket_low_ms"),
                    F.round(F.pow(F.lit(10.0), (F.col("i") + 1) / BUCKETS_PER_DECADE), 6).alias("bucket_high_ms"),
                    "count"))


def spikes(windows: DataFrame, factor: float = 3.0, min_count: int = 5) -> DataFrame:
    """Windows of :func:`over_time` whose p99 is at least ``factor`` times the api's median window p99.

    ``min_count`` keeps a window holding one slow request from counting as a spike.
    """
    baseline = windows.groupBy("api_name").agg(frames.percentile("p99_ms", 0.5).alias("baseline_p99_ms"))
    return (windows.join(baseline, "api_name")
            .withColumn("ratio", F.col("p99_ms") / F.col("baseline_p99_ms"))
            .where((F.col("count") >= min_count) & (F.col("p99_ms") >= F.col("baseline_p99_ms") * factor))
            .select("window_start", "window_end", "api_name", "count", "p99_ms", "baseline_p99_ms", "ratio"))


def size_bucket() -> tuple[Column, Column]:
    """(label, lower bound in bytes) of a Produce request's size bucket."""
    label: Column = F.lit(SIZE_BUCKETS[0][1])
    low: Column = F.lit(0)
    for bound, name in SIZE_BUCKETS[1:]:
        label = F.when(F.col("request_bytes") >= bound, F.lit(name)).otherwise(label)
        low = F.when(F.col("request_bytes") >= bound, F.lit(bound)).otherwise(low)
    return label, low


def by_size(rows: DataFrame) -> DataFrame:
    """Produce latency per request size bucket: do big batches wait longer?"""
    label, low = size_bucket()
    return percentiles(rows.where(derived.api(frames.PRODUCE))
                       .select("latency_ms", label.alias("size_bucket"), low.cast("long").alias("size_low_bytes")),
                       "size_bucket", "size_low_bytes")


def idle_fetches(classified_exchanges: DataFrame) -> DataFrame:
    """Per consumer and broker: Fetch long-polls that returned nothing, and how long they waited."""
    return (classified_exchanges.where(F.col("idle"))
            .groupBy("client_id", derived.broker().alias("broker"))
            .agg(F.count(F.lit(1)).alias("count"), mean("latency_ms").alias("mean_ms"),
                 F.max("max_wait_ms").alias("max_wait_ms")))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    rows = ds.keep(classified(ds.exchanges, ds.partitions, opts.idle_fraction))
    busy = timed(rows)
    windows = ds.keep(over_time(busy, opts.window))
    worst = F.col("p99_ms").desc_nulls_last()
    return {
        "latency_by_api": ordered(by_api(busy), worst, "api_name", "api_version"),
        "latency_by_client": ordered(by_client(busy), worst, "client_id"),
        "latency_by_broker": ordered(by_broker(busy), worst, "broker"),
        "latency_by_topic": ordered(by_topic(busy, ds.partitions), worst, "api_name", "topic"),
        "latency_over_time": ordered(windows, "window_start", "api_name"),
        "latency_histogram": ordered(histogram(busy), "api_name", "bucket_low_ms"),
        "latency_spikes": ordered(spikes(windows, opts.spike_factor, opts.spike_min_count), F.col("ratio").desc(),
                                  "window_start", "api_name"),
        "latency_by_size": ordered(by_size(busy), "size_low_bytes"),
        "idle_fetches": needs(opts, ordered(idle_fetches(rows), F.col("count").desc(), "client_id",
                                                   "broker"), frames.FETCH),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("latency", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
