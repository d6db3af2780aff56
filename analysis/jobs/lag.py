"""Consumer lag as the wire shows it, and how long produced data waits before a consumer reads it.

``consumer_lag``: per group (or per client id for consumers without a group),
topic and partition: the latest committed offset the broker accepted
(OffsetCommit / TxnOffsetCommit), the latest fetch position (``fetch_offset``
of the consumer's Fetch requests; follower fetches excluded), the latest high
watermark seen (Fetch responses, and ListOffsets responses to a LATEST (-1)
query), and ``lag`` = high watermark − committed offset (the fetch position
where nothing was committed). Each value carries when it was seen: they are
samples taken at different moments, so lag is only as fresh as the older of
the two. A partition no Fetch or ListOffsets response described has no high
watermark, hence no lag. The wire cannot show lag of consumers that were not
captured, nor offsets committed before the capture started.

``produce_to_fetch``: per topic-partition and consumer client id, for every
record seen produced (its offset: the Produce response's ``base_offset`` plus
its position in the batch) and later carried by a Fetch response, the time
from the Produce response to the first Fetch response that carried it.

Tables: ``consumer_lag``, ``produce_to_fetch``.

Usage::

    python -m analysis lag DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/lag.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import facts, frames, runner
from analysis.dataset import Dataset
from analysis.jobs import needs
from analysis.options import Options

TP = ["topic", "partition"]
LATEST = -1  # ListOffsets timestamp asking for the log end (high watermark)

LAG = ["group_id", "client_id", "topic", "partition", "committed_offset", "committed_ts", "fetch_position",
       "fetch_ts", "high_watermark", "high_watermark_ts", "lag", "lag_from"]


def commits(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """(group_id, topic, partition) -> latest accepted committed offset, when, and by which client."""
    commit = F.col("api_key").isin(frames.OFFSET_COMMIT, frames.TXN_OFFSET_COMMIT)
    req = (partitions.where(commit & (F.col("direction") == "request"))
           .select(*frames.KEYS, frames.topic().alias("topic"), "partition", F.col("offset").alias("off"), "ts"))
    resp = (partitions.where(commit & (F.col("direction") == "response") & (F.col("error_code") == 0))
            .select(*frames.KEYS, frames.topic().alias("topic"), "partition"))
    who = facts.typed(exchanges).where(commit).select(*frames.KEYS, F.col("req_group_id").alias("group_id"),
                                                      "client_id")
    return (req.join(resp, [*frames.KEYS, *TP]).join(who, frames.KEYS)
            .where(F.col("off") >= 0)
            .groupBy("group_id", *TP)
            .agg(F.max_by("off", "ts").alias("committed_offset"), F.max("ts").alias("committed_ts"),
                 F.max_by("client_id", "ts").alias("committer")))


def positions(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """(client_id, topic, partition) -> latest fetch_offset of consumer Fetch requests, and when."""
    fetches = facts.typed(exchanges).where(F.col("api_key") == frames.FETCH)
    replica = F.coalesce(F.col("req_replica_id"), F.lit(-1))
    consumers = fetches.where(replica < 0).select(*frames.KEYS, "client_id")
    req = (partitions.where((F.col("api_key") == frames.FETCH) & (F.col("direction") == "request"))
           .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "offset", "ts"))
    return (req.join(consumers, frames.KEYS).where(F.col("offset") >= 0)
            .groupBy("client_id", *TP)
            .agg(F.max_by("offset", "ts").alias("fetch_position"), F.max("ts").alias("fetch_ts")))


def high_watermarks(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """(topic, partition) -> the latest high watermark seen, and when."""
    fetch = (partitions.where((F.col("api_key") == frames.FETCH) & (F.col("direction") == "response")
                              & (F.col("high_watermark") >= 0))
             .select(frames.topic().alias("topic"), "partition", F.col("high_watermark").alias("hw"), "ts"))
    asked = (facts.typed(exchanges).where((F.col("api_key") == frames.LIST_OFFSETS) & F.col("has_request"))
             .select(*frames.KEYS, F.explode("req_offset_queries").alias("t"))
             .select(*frames.KEYS, F.col("t.name").alias("topic"), F.explode("t.partitions").alias("p"))
             .where(F.col("p.timestamp") == LATEST)
             .select(*frames.KEYS, "topic", F.col("p.partition_index").alias("partition")))
    listed = (partitions.where((F.col("api_key") == frames.LIST_OFFSETS) & (F.col("direction") == "response")
                               & (F.col("error_code") == 0) & (F.col("offset") >= 0))
              .select(*frames.KEYS, frames.topic().alias("topic"), "partition", F.col("offset").alias("hw"), "ts")
              .join(asked, [*frames.KEYS, *TP])
              .select("topic", "partition", "hw", "ts"))
    return (fetch.unionByName(listed).groupBy(*TP)
            .agg(F.max_by("hw", "ts").alias("high_watermark"), F.max("ts").alias("high_watermark_ts")))


def group_of_client(exchanges: DataFrame) -> DataFrame:
    """(client_id, group_id) for clients that joined or committed for a group."""
    apis = (frames.JOIN_GROUP, frames.SYNC_GROUP, frames.HEARTBEAT, frames.OFFSET_COMMIT,
            frames.CONSUMER_GROUP_HEARTBEAT)
    return (facts.typed(exchanges).where(F.col("api_key").isin(*apis) & F.col("client_id").isNotNull())
            .select("client_id", F.col("req_group_id").alias("group_id"))
            .where(F.col("group_id").isNotNull() & (F.col("group_id") != "")).distinct())


def consumer_lag(exchanges: DataFrame, partitions: DataFrame,
                 keep: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
    """Per group (or lone client), topic and partition: committed offset, fetch position, high watermark
    and lag. The fetch positions are read twice (consumers in a group, and alone): ``keep`` (``Dataset.keep``)
    computes them once."""
    pos = positions(exchanges, partitions).join(group_of_client(exchanges), "client_id", "left")
    if keep is not None:
        pos = keep(pos)
    in_group = (pos.where(F.col("group_id").isNotNull()).groupBy("group_id", *TP)
                .agg(F.max_by("fetch_position", "fetch_ts").alias("fetch_position"),
                     F.max("fetch_ts").alias("fetch_ts"), F.max_by("client_id", "fetch_ts").alias("fetcher")))
    grouped = (commits(exchanges, partitions).join(in_group, ["group_id", *TP], "full")
               .withColumn("client_id", F.coalesce("fetcher", "committer")))
    alone = (pos.where(F.col("group_id").isNull())
             .select("group_id", "client_id", *TP, F.lit(None).cast("long").alias("committed_offset"),
                     F.lit(None).cast("timestamp").alias("committed_ts"), "fetch_position", "fetch_ts"))
    cols = ["group_id", "client_id", *TP, "committed_offset", "committed_ts", "fetch_position", "fetch_ts"]
    basis = F.coalesce("committed_offset", "fetch_position")
    return (grouped.select(*cols).unionByName(alone.select(*cols))
            .join(high_watermarks(exchanges, partitions), TP, "left")
            # greatest() skips a null: without a high watermark it would say 0, where there is no lag to say.
            .withColumn("lag", F.when(F.col("high_watermark").isNotNull() & basis.isNotNull(),
                                      F.greatest(F.col("high_watermark") - basis, F.lit(0))))
            .withColumn("lag_from", F.when(F.col("committed_offset").isNotNull(), F.lit("committed"))
                        .when(F.col("fetch_position").isNotNull(), F.lit("fetch_position")))
            .select(*LAG))


def produce_to_fetch(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Per topic-partition and consumer: records seen produced then fetched, and produce -> first fetch delay."""
    req = (partitions.where((F.col("api_key") == frames.PRODUCE) & (F.col("direction") == "request"))
           .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "record_count"))
    resp = (partitions.where((F.col("api_key") == frames.PRODUCE) & (F.col("direction") == "response")
                             & (F.col("error_code") == 0) & (F.col("base_offset") >= 0))
            .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "base_offset",
                    F.col("ts").alias("produced_ts")))
    produced = (req.join(resp, [*frames.KEYS, *TP]).where(F.col("record_count") > 0)
                .select(*TP, "produced_ts", F.explode(F.sequence(
                    F.col("base_offset"), F.col("base_offset") + F.col("record_count") - 1)).alias("offset")))
    fetched = (partitions.where((F.col("api_key") == frames.FETCH) & (F.col("direction") == "response")
                                & (F.col("record_count") > 0) & F.col("base_offset").isNotNull())
               .select(frames.topic().alias("topic"), "partition", "client_id", F.col("ts").alias("fetched_ts"),
                       F.explode(F.sequence("base_offset", "last_offset")).alias("offset")))
    first = (produced.join(fetched, [*TP, "offset"])
             .where(F.col("fetched_ts") >= F.col("produced_ts"))
             .groupBy(*TP, "client_id", "offset")
             .agg(F.min(frames.millis_between("produced_ts", "fetched_ts")).alias("delay_ms")))
    delays = frames.sorted_values("delay_ms")
    return (first.groupBy(*TP, "client_id")
            .agg(F.count(F.lit(1)).alias("count"), frames.nearest_rank(delays, 0.5).alias("p50_ms"),
                 frames.nearest_rank(delays, 0.99).alias("p99_ms"),
                 F.max("delay_ms").alias("max_ms")))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    # Fetch positions, or commits; both a Produce and the Fetch that got its records.
    lag_apis = (frames.FETCH, frames.OFFSET_COMMIT, frames.TXN_OFFSET_COMMIT)
    return {
        "consumer_lag": needs(opts, frames.ordered(consumer_lag(ds.exchanges, ds.partitions, ds.keep),
                                                          F.col("lag").desc_nulls_last(), "group_id", "topic",
                                                          "partition", "client_id"), *lag_apis),
        "produce_to_fetch": needs(opts, frames.ordered(produce_to_fetch(ds.exchanges, ds.partitions),
                                                              F.col("p50_ms").desc(), "topic", "partition",
                                                              "client_id"), all_of=(frames.PRODUCE, frames.FETCH)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("lag", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
