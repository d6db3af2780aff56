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
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/producers.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis import facts, frames, runner
from analysis.dataset import Dataset
from analysis.options import Options

# What this job reads of a batch's records summary.
BATCH = ["batch_count", "record_count", "producer_id", "producer_epoch", "transactional"]

PRODUCERS = ["client_id", "producer_id", "producer_epoch", "transactional_id", "idempotent", "transactional",
             "transactions_begun", "transactions_committed", "transactions_aborted", "requests", "batches", "records",
             "records_per_batch", "batches_per_request"]


def batches(exchanges: DataFrame) -> DataFrame:
    """One row per partition entry of each Produce request: producer id/epoch, batches and records."""
    return (facts.typed(exchanges).where((F.col("api_key") == frames.PRODUCE) & F.col("has_request"))
            .select(*frames.KEYS, "client_id", F.col("req_transactional_id").alias("transactional_id"),
                    F.explode(F.flatten(F.transform("req_topic_data", lambda t: t["partition_data"])))
                    .alias("p"))
            .select(*frames.KEYS, "client_id", "transactional_id", *[F.col(f"p.records.{c}").alias(c) for c in BATCH])
            .where(F.col("batch_count") > 0))


def transactions(exchanges: DataFrame) -> DataFrame:
    """Per transactional id: transactions begun, committed and aborted."""
    tx_apis = (frames.ADD_PARTITIONS_TO_TXN, frames.ADD_OFFSETS_TO_TXN, frames.END_TXN)
    ev = (facts.typed(exchanges).where(F.col("api_key").isin(*tx_apis) & F.col("request_ts").isNotNull())
          .select(F.col("req_transactional_id").alias("transactional_id"), "api_key", "request_ts", "error_code",
                  F.col("req_committed").alias("committed")))
    prev = F.lag("api_key").over(Window.partitionBy("transactional_id").orderBy("request_ts"))
    ev = ev.withColumn("begins", (F.col("api_key") != frames.END_TXN)
                       & (prev.isNull() | (prev == frames.END_TXN)))
    ended = (F.col("api_key") == frames.END_TXN) & (F.col("error_code") == 0)
    return (ev.groupBy("transactional_id")
            .agg(F.sum(F.col("begins").cast("long")).alias("transactions_begun"),
                 F.sum((ended & F.col("committed")).cast("long")).alias("transactions_committed"),
                 F.sum((ended & ~F.col("committed")).cast("long")).alias("transactions_aborted")))


def producers(exchanges: DataFrame) -> DataFrame:
    b = batches(exchanges)
    per = (b.groupBy("client_id", "producer_id")
           .agg(F.max("producer_epoch").alias("producer_epoch"), F.max("transactional_id").alias("transactional_id"),
                F.bool_or(F.coalesce("transactional", F.lit(False))).alias("transactional"),
                F.countDistinct(*frames.KEYS).alias("requests"),
                F.sum("batch_count").alias("batches"), F.sum("record_count").alias("records")))
    zero = F.lit(0).cast("long")
    return (per.join(transactions(exchanges), "transactional_id", "left")
            .withColumn("idempotent", F.col("producer_id") >= 0)
            .withColumn("transactional", F.col("transactional") | F.col("transactional_id").isNotNull())
            .withColumn("records_per_batch", F.col("records") / F.col("batches"))
            .withColumn("batches_per_request", F.col("batches") / F.col("requests"))
            .select(*[F.coalesce(c, zero).alias(c) if c.startswith("transactions_") else F.col(c)
                      for c in PRODUCERS]))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    return {"producers": runner.needs(opts, frames.ordered(producers(ds.exchanges), F.col("records").desc(),
                                                           "client_id", "producer_id"), frames.PRODUCE)}


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("producers", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
