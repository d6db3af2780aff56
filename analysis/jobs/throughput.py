"""Throughput: records and bytes produced and fetched per topic-partition, over time, and top clients.

``produced_records``/``produced_bytes`` count the record data of Produce
requests whose partition the broker accepted (error NONE in its response), plus
acks=0 requests, which get no response and which the producer counts as sent
(``acks0_records`` says how many of them). A partition the broker rejected, or
whose response was not captured, is not counted. ``fetched_records``/
``fetched_bytes`` count the record data carried by Fetch responses (a consumer
re-reading data counts again). ``requests_per_s`` is a topic-partition's requests over its own active
span, from its first Produce or Fetch entry to its last (a dataset of captures days apart is not spread
over the days between); null when that span is zero (one exchange): no rate to give.

Tables: ``throughput_by_topic``, ``throughput_over_time``, ``top_clients``.

Usage::

    python -m analysis throughput DATASET... [--master local[*]] [--window '1 second'] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/throughput.py DATASET [--window '1 second']
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import derived, frames, runner
from analysis.dataset import Dataset
from analysis.options import Options

PARTITION = ["capture", "connection", "correlation_id", "topic", "partition"]
FLOWS = ["topic", "partition", "ts", "client_id", "produced_records", "produced_bytes", "acks0_records",
         "fetched_records", "fetched_bytes", *frames.KEYS]


def produced(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Produce request partition entries the broker accepted (or acks=0), with records, bytes and client id."""
    req = (partitions.where(derived.api(frames.PRODUCE) & (F.col("direction") == "request"))
           .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "ts", "record_count", "bytes",
                   "client_id"))
    resp = (partitions.where(derived.api(frames.PRODUCE) & (F.col("direction") == "response"))
            .select(*frames.KEYS, frames.topic().alias("topic"), "partition", F.col("error_code").alias("answer")))
    # The responses on the join's build side (DataFusion builds on the left one): a Produce response entry
    # holds the keys and its error code, a request entry its records, bytes, time and client id too.
    joined = resp.join(req, PARTITION, "right")
    # One join for both kinds of entry: those accepted (error NONE) and those without an answer, which count
    # only if their exchange expected none (acks=0). Its keys are looked up among the acks=0 exchanges, kept
    # on the build side (few), for the entries without an answer only.
    acks0 = (exchanges.where(F.col("status") == "no_response_expected").select(*frames.KEYS).distinct()
             .withColumn("_acks0", F.lit(True)))
    wanted = joined.where(F.col("answer").isNull() | (F.col("answer") == 0))
    return (acks0.join(wanted, frames.KEYS, "right")
            .where((F.col("answer") == 0) | F.col("_acks0"))
            .withColumn("acks0", F.col("answer").isNull()).drop("_acks0"))


def flows(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per produced or fetched partition entry, in the shape the aggregates share."""
    zero = F.lit(0).cast("long")
    prod = produced(exchanges, partitions).select(
        "topic", "partition", "ts", "client_id",
        F.coalesce("record_count", zero).alias("produced_records"), F.coalesce("bytes", zero).alias("produced_bytes"),
        F.when(F.col("acks0"), F.coalesce("record_count", zero)).otherwise(zero).alias("acks0_records"),
        zero.alias("fetched_records"), zero.alias("fetched_bytes"), *frames.KEYS)
    fetch = (partitions.where(derived.api(frames.FETCH) & (F.col("direction") == "response"))
             .select(frames.topic().alias("topic"), "partition", "ts", "client_id",
                     zero.alias("produced_records"), zero.alias("produced_bytes"), zero.alias("acks0_records"),
                     F.coalesce("record_count", zero).alias("fetched_records"),
                     F.coalesce("bytes", zero).alias("fetched_bytes"), *frames.KEYS))
    return prod.select(*FLOWS).unionByName(fetch.select(*FLOWS))


def _flows(exchanges: DataFrame, partitions: DataFrame, fl: DataFrame | None) -> DataFrame:
    return flows(exchanges, partitions) if fl is None else fl


SUMMED = ("produced_records", "produced_bytes", "acks0_records", "fetched_records", "fetched_bytes")


def _totals(fl: DataFrame, *keys: str) -> DataFrame:
    """Per ``keys``: the flows' sums, ``requests`` (the distinct exchanges among them) and the first and last
    entry's time (``first_ts``, ``last_ts``). Counted in two steps, per exchange and then per key (the
    exchange's key columns are never null): a distinct count over the three key columns at once took the
    embedded engine 24 s on 2,000,000 exchanges, the two steps a tenth of a second."""
    per_exchange = fl.groupBy(*keys, *frames.KEYS).agg(*[F.sum(c).alias(c) for c in SUMMED],
                                                       F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
    return per_exchange.groupBy(*keys).agg(*[F.sum(c).alias(c) for c in SUMMED],
                                           F.count(F.lit(1)).alias("requests"),
                                           F.min("first_ts").alias("first_ts"), F.max("last_ts").alias("last_ts"))


def _rate(count: str, first: str, last: str) -> Column:
    """``count`` per second from ``first`` to ``last``; null when they are the same instant, where a rate
    would be a division by zero (or by a floor made up for it)."""
    span = frames.seconds_between(first, last)
    return F.when(span > 0, F.col(count) / span)


def by_topic(exchanges: DataFrame, partitions: DataFrame, fl: DataFrame | None = None) -> DataFrame:
    """Per topic-partition over the whole capture; ``requests_per_s`` over the partition's own active span
    (:func:`_rate`). ``fl``: the :func:`flows` when the caller has them already."""
    return (_totals(_flows(exchanges, partitions, fl), "topic", "partition")
            .withColumn("requests_per_s", _rate("requests", "first_ts", "last_ts")).drop("first_ts", "last_ts"))


def over_time(exchanges: DataFrame, partitions: DataFrame, window: str = "1 minute",
              fl: DataFrame | None = None) -> DataFrame:
    return (_totals(_flows(exchanges, partitions, fl).withColumn("w", F.window("ts", window)), "w", "topic")
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "topic",
                    "produced_records", "produced_bytes", "fetched_records", "fetched_bytes", "requests"))


def top_clients(exchanges: DataFrame, partitions: DataFrame, fl: DataFrame | None = None) -> DataFrame:
    """Per client id: bytes and records produced and fetched, and all its requests."""
    data = (_flows(exchanges, partitions, fl).groupBy("client_id")
            .agg(F.sum("produced_records").alias("produced_records"), F.sum("produced_bytes").alias("produced_bytes"),
                 F.sum("fetched_records").alias("fetched_records"), F.sum("fetched_bytes").alias("fetched_bytes")))
    requests = exchanges.where(F.col("request_ts").isNotNull()).groupBy("client_id").agg(
        F.count(F.lit(1)).alias("requests"))
    zero = F.lit(0).cast("long")
    return (requests.join(data, "client_id", "full")
            .select("client_id", *[F.coalesce(c, zero).alias(c) for c in
                                   ("produced_bytes", "fetched_bytes", "produced_records", "fetched_records",
                                    "requests")]))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    ex = ds.exchanges
    # The three tables aggregate the same flows, whose two joins are most of their cost on a big capture.
    fl = ds.keep(flows(ex, ds.partitions))
    most = (F.col("produced_bytes") + F.col("fetched_bytes")).desc()
    return {
        "throughput_by_topic": frames.ordered(by_topic(ex, ds.partitions, fl), most, "topic", "partition"),
        "throughput_over_time": frames.ordered(over_time(ex, ds.partitions, opts.window, fl), "window_start",
                                               "topic"),
        "top_clients": frames.ordered(top_clients(ex, ds.partitions, fl), most, F.col("requests").desc(),
                                      "client_id"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("throughput", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
