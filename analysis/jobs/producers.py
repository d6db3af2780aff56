"""Producers: idempotent and transactional producers, their transactions, and how they batch.

Per client id and producer id (-1: a plain producer, neither idempotent nor
transactional), from the record batch headers of Produce requests:
the producer epoch (the highest seen), the transactional id, records per
batch and batches per request. Transactions per transactional id:
``transactions_committed``/``_aborted`` count EndTxn requests the coordinator
accepted; ``transactions_begun`` counts the first AddPartitionsToTxn or
AddOffsetsToTxn after an EndTxn (or the capture start), i.e. transactions the
producer opened, finished or not.

Tables: ``producers``.

Usage::

    python -m analysis producers DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/producers.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis import derived, facts, frames, runner
from analysis.dataset import Dataset
from analysis.jobs import needs
from analysis.options import Options

PRODUCERS = ["client_id", "producer_id", "producer_epoch", "transactional_id", "idempotent", "transactional",
             "transactions_begun", "transactions_committed", "transactions_aborted", "requests", "batches", "records",
             "records_per_batch", "batches_per_request"]


def transactions(exchanges: DataFrame) -> DataFrame:
    """Per transactional id: transactions begun, committed and aborted."""
    tx_apis = (frames.ADD_PARTITIONS_TO_TXN, frames.ADD_OFFSETS_TO_TXN, frames.END_TXN)
    ev = (facts.typed(exchanges).where(derived.api(*tx_apis) & F.col("request_ts").isNotNull())
          .select(F.col("req_transactional_id").alias("transactional_id"), "api_key", "request_ts", "error_code",
                  F.col("req_committed").alias("committed")))
    prev = F.lag("api_key").over(Window.partitionBy("transactional_id").orderBy("request_ts"))
    ev = ev.withColumn("begins", (F.col("api_key") != frames.END_TXN)
                       & (prev.isNull() | (prev == frames.END_TXN)))
    ended = derived.api(frames.END_TXN) & (F.col("error_code") == 0)
    return (ev.groupBy("transactional_id")
            .agg(F.sum(F.col("begins").cast("long")).alias("transactions_begun"),
                 F.sum((ended & F.col("committed")).cast("long")).alias("transactions_committed"),
                 F.sum((ended & ~F.col("committed")).cast("long")).alias("transactions_aborted")))


def per_request(exchanges: DataFrame) -> DataFrame:
    """One row per Produce request and producer id among its batches: that producer's batches, records,
    highest epoch and whether a batch was transactional, summed on the request's own row (no shuffle)."""
    ids = F.array_distinct(F.transform("entries", lambda p: p["records"]["producer_id"]))

    def of(pid: Column) -> Column:
        mine = F.filter("entries", lambda p: p["records"]["producer_id"].eqNullSafe(pid))
        epoch = F.array_max(F.transform(mine, lambda p: p["records"]["producer_epoch"]))
        return F.struct(pid.alias("producer_id"), epoch.alias("producer_epoch"),
                        F.exists(mine, lambda p: F.coalesce(p["records"]["transactional"], F.lit(False)))
                        .alias("transactional"),
                        frames.records_total(mine, "batch_count").alias("batches"),
                        frames.records_total(mine, "record_count").alias("records"))
    return (facts.typed(exchanges).where(derived.api(frames.PRODUCE) & F.col("has_request"))
            .select("client_id", F.col("req_transactional_id").alias("transactional_id"),
                    frames.batch_entries().alias("entries"))
            .select("client_id", "transactional_id", F.explode(F.transform(ids, of)).alias("b"))
            .select("client_id", "transactional_id", "b.*"))


def producers(exchanges: DataFrame) -> DataFrame:
    # Per request first (on its own row), then a plain count: a distinct count of requests over every
    # batch shuffled each batch with its connection.
    per = (per_request(exchanges).groupBy("client_id", "producer_id")
           .agg(F.max("producer_epoch").alias("producer_epoch"), F.max("transactional_id").alias("transactional_id"),
                F.bool_or("transactional").alias("transactional"), F.count(F.lit(1)).alias("requests"),
                F.sum("batches").alias("batches"), F.sum("records").alias("records")))
    zero = F.lit(0).cast("long")
    return (per.join(transactions(exchanges), "transactional_id", "left")
            .withColumn("idempotent", F.col("producer_id") >= 0)
            .withColumn("transactional", F.col("transactional") | F.col("transactional_id").isNotNull())
            .withColumn("records_per_batch", F.col("records") / F.col("batches"))
            .withColumn("batches_per_request", F.col("batches") / F.col("requests"))
            .select(*[F.coalesce(c, zero).alias(c) if c.startswith("transactions_") else F.col(c)
                      for c in PRODUCERS]))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    return {"producers": needs(opts, frames.ordered(producers(ds.exchanges), F.col("records").desc(),
                                                           "client_id", "producer_id"), frames.PRODUCE)}


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("producers", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
