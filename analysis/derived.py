"""Facts derived from the dataset that both the table jobs and the findings rules read, each by one rule.

A table and a finding that speak of the same thing (a group's rebalance, a partition's lag, a broker)
must not be able to disagree about it, so what they share is derived here and nowhere else:

* **which exchanges an api's are**: by ``api_key`` (:func:`api`). The key is what the wire carried; the
  name is looked up from it, and the rules and jobs once filtered by one or the other.
* **a broker's address**: ``ip:port`` (:func:`broker`).
* **a consumer group's generations** (:func:`generations`): per group (whichever capture saw its exchanges:
  a generation is the coordinator's, not a capture's), classic and KIP-848 alike. A classic generation
  starts at the first JoinGroup request of the group after the previous generation, the joins that got no
  generation (MEMBER_ID_REQUIRED, retried after REBALANCE_IN_PROGRESS) included: the rebalance began
  when the first member asked to join, not when the coordinator finally answered. It ends at the last
  SyncGroup response of that generation (without one in the capture: the last successful JoinGroup
  response). Its members are the member ids whose JoinGroup succeeded into it. A KIP-848 group has no
  JoinGroup: each member epoch its ConsumerGroupHeartbeat responses hand out is a generation, from the
  first heartbeat request that got it to the response that delivered its assignment.
* **a consumer's fetch position and lag** (:func:`consumer_fetches`, :func:`lag_samples`,
  :func:`consumer_lag`): the position is the ``offset`` of a Fetch request's partition row (the
  ``fetch_offset`` the consumer asked from), and only consumers' Fetch requests count: one with a
  ``replica_id`` of 0 or more is a follower broker replicating the partition, whose position says
  nothing about any consumer.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis import facts, frames

# ---------------------------------------------------------------------------------------------------
# Apis and brokers


def api(*keys: int) -> Column:
    """Rows (exchanges or partition rows) of the apis ``keys`` (:mod:`analysis.frames`' constants)."""
    return F.col("api_key").isin(*keys)


def broker() -> Column:
    """The broker end of an exchange as ``ip:port``."""
    return F.concat_ws(":", "broker_ip", F.col("broker_port").cast("string"))


def parties(exchanges: DataFrame) -> DataFrame:
    """Per exchange: its keys and who was talking (client id, broker), to join onto partition rows."""
    return exchanges.select(*frames.KEYS, "client_id", broker().alias("broker"), "status", "api_version")


# ---------------------------------------------------------------------------------------------------
# Consumer group generations

GROUP_APIS = (frames.OFFSET_COMMIT, frames.JOIN_GROUP, frames.HEARTBEAT, frames.LEAVE_GROUP, frames.SYNC_GROUP,
              frames.TXN_OFFSET_COMMIT, frames.CONSUMER_GROUP_HEARTBEAT)

# What :func:`generations` gives, one row per (group_id, generation_id).
GENERATION = ["group_id", "generation_id", "capture", "start_ts", "end_ts", "duration_ms", "protocol", "members",
              "member_client_ids", "join_reason"]


def group_exchanges(exchanges: DataFrame) -> DataFrame:
    """Exchanges of the group apis (as facts), with ``group_id`` from the request."""
    return (facts.typed(exchanges).where(api(*GROUP_APIS))
            .withColumn("group_id", F.col("req_group_id")))


def joins(exchanges: DataFrame) -> DataFrame:
    """JoinGroup exchanges with their outcome; ``generation_id`` only where the join succeeded."""
    ok = F.col("error_code") == 0
    return (facts.typed(exchanges).where(api(frames.JOIN_GROUP))
            .select("capture", F.col("req_group_id").alias("group_id"),
                    "client_id", "request_ts", "response_ts", "error_name",
                    F.when(ok, F.col("resp_generation_id")).alias("generation_id"),
                    F.when(ok, F.col("resp_member_id")).alias("member_id"),
                    F.when(ok, F.col("resp_protocol_name")).alias("protocol"),
                    F.col("req_protocol_type").alias("protocol_type"),
                    F.col("req_reason").alias("reason")))


def _first_reason(column: str) -> Column:
    return F.min_by(F.col(column), F.when(F.col(column).isNotNull(), F.col("request_ts")))


def classic_generations(exchanges: DataFrame) -> DataFrame:
    """One row per (group, generation) from JoinGroup and SyncGroup."""
    exchanges = facts.typed(exchanges)
    j = joins(exchanges).where(F.col("request_ts").isNotNull())
    # A join without a generation (MEMBER_ID_REQUIRED, retried) belongs to the next generation the group forms.
    ahead = Window.partitionBy("group_id").orderBy("request_ts").rowsBetween(0, Window.unboundedFollowing)
    j = j.withColumn("gen", F.first("generation_id", ignorenulls=True).over(ahead)).where(F.col("gen").isNotNull())
    ok = F.col("generation_id").isNotNull()
    gens = (j.groupBy("group_id", F.col("gen").alias("generation_id"))
            .agg(F.min_by("capture", "request_ts").alias("capture"),
                 F.min("request_ts").alias("start_ts"),
                 F.max(F.when(ok, F.col("response_ts"))).alias("join_end"),
                 F.max(F.when(ok, F.concat_ws(" ", "protocol_type", "protocol"))).alias("protocol"),
                 F.countDistinct(F.when(ok, F.col("member_id"))).alias("members"),
                 F.array_sort(F.collect_set(F.when(ok, F.col("client_id")))).alias("member_client_ids"),
                 _first_reason("reason").alias("join_reason")))
    syncs = (exchanges.where(api(frames.SYNC_GROUP) & F.col("response_ts").isNotNull())
             .groupBy(F.col("req_group_id").alias("group_id"), F.col("req_generation_id").alias("generation_id"))
             .agg(F.max("response_ts").alias("sync_end")))
    return (gens.join(syncs, ["group_id", "generation_id"], "left")
            .withColumn("end_ts", F.coalesce("sync_end", "join_end")).drop("sync_end", "join_end"))


def kip848_heartbeats(exchanges: DataFrame) -> DataFrame:
    """Successful ConsumerGroupHeartbeat exchanges that handed out a member epoch (its ``generation_id``)."""
    return (facts.typed(exchanges).where(api(frames.CONSUMER_GROUP_HEARTBEAT) & (F.col("error_code") == 0))
            .select("capture", F.col("req_group_id").alias("group_id"), "client_id", "request_ts", "response_ts",
                    F.col("resp_member_epoch").alias("generation_id"),
                    F.col("resp_member_id").alias("member_id"),
                    F.col("resp_assignment").alias("assignment"))
            .where(F.col("generation_id") > 0))


def kip848_generations(exchanges: DataFrame) -> DataFrame:
    """One row per (group, member epoch) handed out by ConsumerGroupHeartbeat responses."""
    delivered = F.when(F.col("assignment").isNotNull(), F.col("response_ts"))
    return (kip848_heartbeats(exchanges)
            .groupBy("group_id", "generation_id")
            .agg(F.min_by("capture", "request_ts").alias("capture"),
                 F.min("request_ts").alias("start_ts"),
                 F.coalesce(F.min(delivered), F.min("response_ts")).alias("end_ts"),
                 F.lit("consumer (KIP-848)").alias("protocol"),
                 F.countDistinct("member_id").alias("members"),
                 F.array_sort(F.collect_set("client_id")).alias("member_client_ids"),
                 F.lit(None).cast("string").alias("join_reason")))


def generations(gx: DataFrame) -> DataFrame:
    """Every generation, classic and KIP-848, of the group exchanges ``gx`` (:func:`group_exchanges`):
    :data:`GENERATION`'s columns, ``capture`` the one that saw its first request."""
    gens = classic_generations(gx).unionByName(kip848_generations(gx), allowMissingColumns=True)
    return gens.select(*[frames.millis_between("start_ts", "end_ts").alias(c) if c == "duration_ms" else c
                         for c in GENERATION])


# ---------------------------------------------------------------------------------------------------
# Fetch positions and lag

TP = ["topic", "partition"]
LATEST = -1  # ListOffsets timestamp asking for the log end (high watermark)


def consumer_fetches(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Each partition a consumer's Fetch request asked for: ``capture``, the exchange's keys, ``client_id``,
    ``topic``, ``partition``, ``position`` (the offset it fetched from) and ``ts``. Followers' fetches
    (``replica_id`` 0 or more) are left out; an exchange whose request body was not decoded has no
    replica id and counts as a consumer's."""
    replica = F.coalesce(F.col("req_replica_id"), F.lit(-1))
    consumers = facts.typed(exchanges).where(api(frames.FETCH) & (replica < 0)).select(*frames.KEYS, "client_id")
    req = (partitions.where(api(frames.FETCH) & (F.col("direction") == "request") & (F.col("offset") >= 0))
           .select(*frames.KEYS, frames.topic().alias("topic"), "partition", F.col("offset").alias("position"), "ts"))
    return req.join(consumers, frames.KEYS)


def lag_samples(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One lag sample per partition of each answered consumer Fetch: the high watermark its response gave
    minus the position its request fetched from (at least 0), at the request's time ``ts``."""
    hw = (partitions.where(api(frames.FETCH) & (F.col("direction") == "response") & (F.col("high_watermark") >= 0))
          .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "high_watermark"))
    return (consumer_fetches(exchanges, partitions).join(hw, [*frames.KEYS, *TP])
            .withColumn("lag", F.greatest(F.col("high_watermark") - F.col("position"), F.lit(0))))


def commits(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """(group_id, topic, partition) -> latest accepted committed offset, when, and by which client."""
    commit = api(frames.OFFSET_COMMIT, frames.TXN_OFFSET_COMMIT)
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
    """(client_id, topic, partition) -> the latest position of the client's consumer fetches, and when."""
    return (consumer_fetches(exchanges, partitions).groupBy("client_id", *TP)
            .agg(F.max_by("position", "ts").alias("fetch_position"), F.max("ts").alias("fetch_ts")))


def high_watermarks(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """(topic, partition) -> the latest high watermark seen (any Fetch response, followers' included: it
    is the partition's, whoever asked; a ListOffsets answer to a LATEST query), and when."""
    fetch = (partitions.where(api(frames.FETCH) & (F.col("direction") == "response") & (F.col("high_watermark") >= 0))
             .select(frames.topic().alias("topic"), "partition", F.col("high_watermark").alias("hw"), "ts"))
    asked = (facts.typed(exchanges).where(api(frames.LIST_OFFSETS) & F.col("has_request"))
             .select(*frames.KEYS, F.explode("req_offset_queries").alias("t"))
             .select(*frames.KEYS, F.col("t.name").alias("topic"), F.explode("t.partitions").alias("p"))
             .where(F.col("p.timestamp") == LATEST)
             .select(*frames.KEYS, "topic", F.col("p.partition_index").alias("partition")))
    listed = (partitions.where(api(frames.LIST_OFFSETS) & (F.col("direction") == "response")
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
    return (facts.typed(exchanges).where(api(*apis) & F.col("client_id").isNotNull())
            .select("client_id", F.col("req_group_id").alias("group_id"))
            .where(F.col("group_id").isNotNull() & (F.col("group_id") != "")).distinct())


LAG = ["group_id", "client_id", "topic", "partition", "committed_offset", "committed_ts", "fetch_position",
       "fetch_ts", "high_watermark", "high_watermark_ts", "lag", "lag_from"]


def consumer_lag(exchanges: DataFrame, partitions: DataFrame,
                 keep: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
    """Per group (or client without a group), topic and partition: the latest accepted committed offset,
    the latest fetch position, the latest high watermark, and ``lag`` = high watermark − committed offset
    (the fetch position where nothing was committed: ``lag_from`` says which). :data:`LAG`'s columns.
    The fetch positions are read twice (consumers in a group, and alone): ``keep`` (``Dataset.keep``)
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


def lag_of_client(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """(client_id, topic, partition) -> ``lag`` and ``lag_from`` of the :func:`consumer_lag` row that speaks
    for the client: its group's (every group it fetched or committed for), else its own."""
    lag = consumer_lag(exchanges, partitions).select("group_id", "client_id", *TP, "lag", "lag_from")
    in_group = (lag.where(F.col("group_id").isNotNull()).drop("client_id")
                .join(group_of_client(exchanges), "group_id"))
    alone = lag.where(F.col("group_id").isNull())
    return in_group.unionByName(alone).select("client_id", "group_id", *TP, "lag", "lag_from")
