"""Errors: which error, on which api, for which client, broker and topic-partition; retriable or not.

An error is counted where the response states it: per partition for the apis
that answer per partition (Produce, Fetch, OffsetCommit, ...), one row per
failing partition entry; else once per exchange (``topic`` and ``partition``
null). ``share`` is that count over all exchanges of the api. ``retriable``
says whether Kafka's Java client retries the error (``analysis/_retriable.py``,
generated from the protocol reference's errors-retriable.tsv); null where the
code is unknown to it.

Tables: ``errors``, ``errors_over_time``.

Usage::

    python -m analysis errors DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/errors.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from itertools import chain

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import derived, frames, runner
from analysis._retriable import RETRIABLE
from analysis.dataset import Dataset
from analysis.options import Options

EVENT = ["api_name", "error_code", "error_name", "client_id", "broker", "topic", "partition", "ts"]


def retriable(code: str = "error_code") -> Column:
    """Whether Kafka's client retries the error code in column ``code``; null if unknown."""
    table = F.create_map(*chain.from_iterable((F.lit(k), F.lit(v)) for k, v in sorted(RETRIABLE.items())))
    return table[F.col(code)]


def events(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per error seen: per failing partition entry, else per failing exchange."""
    per_partition = (partitions.where((F.col("direction") == "response") & frames.failed())
                     .select(*frames.KEYS, "api_name", "error_code", "error_name",
                             frames.topic().alias("topic"), "partition", F.col("ts")))
    per_partition = per_partition.join(derived.parties(exchanges).select(*frames.KEYS, "client_id", "broker"),
                                       frames.KEYS, "left")
    per_exchange = (exchanges.where(frames.failed())
                    .join(per_partition.select(*frames.KEYS).distinct(), frames.KEYS, "left_anti")
                    .select("api_name", "error_code", "error_name", "client_id", derived.broker().alias("broker"),
                            F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition"),
                            F.coalesce("response_ts", "request_ts").alias("ts")))
    return per_partition.select(*EVENT).unionByName(per_exchange.select(*EVENT))


def _events(exchanges: DataFrame, partitions: DataFrame, ev: DataFrame | None) -> DataFrame:
    return events(exchanges, partitions) if ev is None else ev


def errors(exchanges: DataFrame, partitions: DataFrame, ev: DataFrame | None = None) -> DataFrame:
    """Per api, error, client, broker and topic-partition: count, share of the api's exchanges, first/last
    seen. ``ev``: the :func:`events` when the caller has them already."""
    totals = exchanges.groupBy("api_name").agg(F.count(F.lit(1)).alias("api_exchanges"))
    return (_events(exchanges, partitions, ev)
            .groupBy("api_name", "error_name", "error_code", "client_id", "broker", "topic", "partition")
            .agg(F.count(F.lit(1)).alias("count"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
            .join(totals, "api_name", "left")
            .select("api_name", "error_name", "error_code", "client_id", "broker", "topic", "partition", "count",
                    (F.col("count") / F.col("api_exchanges")).alias("share"),
                    retriable().alias("retriable"), "first_ts", "last_ts"))


def over_time(exchanges: DataFrame, partitions: DataFrame, window: str = "1 minute",
              ev: DataFrame | None = None) -> DataFrame:
    return (_events(exchanges, partitions, ev)
            .groupBy(F.window("ts", window).alias("w"), "api_name", "error_name")
            .agg(F.count(F.lit(1)).alias("count"))
            .select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                    "api_name", "error_name", "count"))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    ev = ds.keep(events(ds.exchanges, ds.partitions))     # both tables count the same events
    return {
        "errors": frames.ordered(errors(ds.exchanges, ds.partitions, ev), F.col("count").desc(), "api_name",
                                 "error_name", "error_code", "client_id", "broker", "topic", "partition"),
        "errors_over_time": frames.ordered(over_time(ds.exchanges, ds.partitions, opts.window, ev),
                                           "window_start", "api_name", "error_name"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("errors", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
