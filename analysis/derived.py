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


# ---------------------------------------------------------------------------------------------------
# Share groups (KIP-932)
#
# A share group's members acquire records under a time lock and acknowledge them one by one. What was
# acquired is the ``acquired_records`` ranges of ShareFetch responses (with each range's delivery count);
# what was acknowledged is the ``acknowledgement_batches`` of ShareFetch and ShareAcknowledge requests.
# Counts are records, read from those ranges: never from the record batches the responses carry (a
# batch holds records acquired by others, or none acquired at all).

SHARE_APIS = (frames.SHARE_GROUP_HEARTBEAT, frames.SHARE_FETCH, frames.SHARE_ACKNOWLEDGE)
# acknowledge_types: 0 is a gap (offsets that hold no record: nothing to count).
ACK_TYPES = {1: "ACCEPT", 2: "RELEASE", 3: "REJECT"}
SHARE_SESSION_ERRORS = ("SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH", "SHARE_SESSION_LIMIT_REACHED")
SHARE_KEYS = ["group_id", "topic", "partition"]
# A range is counted when 0 <= first <= last < 2^62 and it spans fewer than 2^31 offsets (a ShareFetch
# answer holds at most max_bytes, an int32, of records): offsets past that are no Kafka offsets, and
# their arithmetic would overflow Spark's longs (an error under ANSI, not a wrong count).
MAX_SHARE_OFFSET, MAX_SHARE_RANGE = 1 << 62, 1 << 31
# Record by record (lock expiry, in-flight runs), the first this many offsets of a range are followed:
# real ranges are max.poll.records long (500 by default); a forged one must not become billions of rows.
MAX_SHARE_RECORDS_FOLLOWED = 1 << 16


def _credible(first: Column, last: Column) -> Column:
    # CASE WHEN: the subtraction is evaluated only once the bounds hold (conjuncts may be reordered).
    return F.when((first >= 0) & (last >= first) & (last < MAX_SHARE_OFFSET),
                  last - first < MAX_SHARE_RANGE).otherwise(False)


def _followed(first: Column, last: Column) -> Column:
    """The offsets of a range followed record by record."""
    return F.sequence(first, F.least(last, first + (MAX_SHARE_RECORDS_FOLLOWED - 1)))


def _topic_of_id(partitions: DataFrame) -> DataFrame:
    """(topic_id, topic): the names the capture's partition rows give topic ids (Metadata, ShareFetch)."""
    return (partitions.where(F.col("topic").isNotNull() & F.col("topic_id").isNotNull())
            .groupBy("topic_id").agg(F.max("topic").alias("topic")))


def _share_exchanges(exchanges: DataFrame, *keys: int) -> DataFrame:
    ex = facts.typed(exchanges).where(api(*keys))
    return ex.select("*", F.col("share_group_id").alias("group_id"), F.col("share_member_id").alias("member_id"),
                     broker().alias("broker"))


def share_acquisitions(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per acquired range of a ShareFetch response: the exchange's keys, ``group_id``,
    ``member_id``, ``client_id``, ``broker``, ``topic``, ``partition``, ``first_offset``, ``last_offset``,
    ``delivery_count``, ``records`` (the range's size), ``ts`` (the response's time: when the lock began)
    and ``lock_timeout_ms`` (the response's acquisition lock timeout)."""
    ex = (_share_exchanges(exchanges, frames.SHARE_FETCH).where(F.col("share_responses").isNotNull())
          .select(*frames.KEYS, "group_id", "member_id", "client_id", "broker", F.col("response_ts").alias("ts"),
                  F.col("share_lock_timeout_ms").alias("lock_timeout_ms"), F.explode("share_responses").alias("t"))
          .select("*", F.col("t.topic_id").alias("topic_id"), F.explode("t.partitions").alias("p"))
          .select("*", F.col("p.partition_index").alias("partition"), F.explode("p.acquired_records").alias("a"))
          .where(_credible(F.col("a.first_offset"), F.col("a.last_offset"))))
    return (ex.join(_topic_of_id(partitions), "topic_id", "left")
            .select(*frames.KEYS, "group_id", "member_id", "client_id", "broker",
                    F.coalesce("topic", "topic_id").alias("topic"), "partition",
                    F.col("a.first_offset").alias("first_offset"), F.col("a.last_offset").alias("last_offset"),
                    F.col("a.delivery_count").alias("delivery_count"),
                    (F.col("a.last_offset") - F.col("a.first_offset") + 1).alias("records"), "ts", "lock_timeout_ms"))


def share_acknowledgements(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per acknowledged run of records in a ShareFetch or ShareAcknowledge request: the
    exchange's keys, ``api_name``, ``group_id``, ``member_id``, ``client_id``, ``broker``, ``topic``,
    ``partition``, ``first_offset``, ``last_offset``, ``records``, ``ack_type`` (ACCEPT, RELEASE,
    REJECT), ``ts`` (the request's time) and ``ack_error_code``: the top-level error of the answer if
    it failed, else the partition's acknowledgement error (ShareFetch ``acknowledge_error_code``,
    ShareAcknowledge ``error_code``); null when unanswered. A batch with one type covers its whole
    range; a batch with one type per offset is split into its offsets; gaps (type 0) are left out."""
    ex = _share_exchanges(exchanges, frames.SHARE_FETCH, frames.SHARE_ACKNOWLEDGE)
    batches = (ex.where(F.col("share_acks").isNotNull())
               .select(*frames.KEYS, "api_name", "group_id", "member_id", "client_id", "broker",
                       F.col("request_ts").alias("ts"), F.explode("share_acks").alias("t"))
               .select("*", F.col("t.topic_id").alias("topic_id"), F.explode("t.partitions").alias("p"))
               .select("*", F.col("p.partition_index").alias("partition"),
                       F.explode("p.acknowledgement_batches").alias("b"))
               .where(_credible(F.col("b.first_offset"), F.col("b.last_offset"))))
    first, types = F.col("b.first_offset"), F.col("b.acknowledge_types")
    runs = F.when(F.size(types) == 1, F.array(F.struct(first.alias("o"), F.col("b.last_offset").alias("l"),
                                                       types[0].alias("k"))))\
        .otherwise(F.transform(types, lambda k, i: F.struct((first + i).alias("o"), (first + i).alias("l"),
                                                             k.alias("k"))))
    runs_df = (batches.select("*", F.explode(runs).alias("r"))
               .where(F.col("r.k").isin(*ACK_TYPES) & (F.col("r.l") >= F.col("r.o"))))
    answers = (ex.where(F.col("share_responses").isNotNull())
               .select(*frames.KEYS, F.explode("share_responses").alias("t"))
               .select(*frames.KEYS, F.col("t.topic_id").alias("topic_id"), F.explode("t.partitions").alias("p"))
               .select(*frames.KEYS, "topic_id", F.col("p.partition_index").alias("partition"),
                       F.col("p.acknowledge_error_code").alias("fetch_code"), F.col("p.error_code").alias("ack_code")))
    top = ex.select(*frames.KEYS, "api_key", F.col("error_code").alias("top_code"), "has_response")
    kind = F.create_map(*[x for k, v in ACK_TYPES.items() for x in (F.lit(k), F.lit(v))])
    part_code = F.when(F.col("api_key") == frames.SHARE_FETCH, F.col("fetch_code")).otherwise(F.col("ack_code"))
    return (runs_df.join(answers, [*frames.KEYS, "topic_id", "partition"], "left")
            .join(top, frames.KEYS, "left")
            .join(_topic_of_id(partitions), "topic_id", "left")
            .select(*frames.KEYS, "api_name", "group_id", "member_id", "client_id", "broker",
                    F.coalesce("topic", "topic_id").alias("topic"), "partition",
                    F.col("r.o").alias("first_offset"), F.col("r.l").alias("last_offset"),
                    (F.col("r.l") - F.col("r.o") + 1).alias("records"), kind[F.col("r.k")].alias("ack_type"), "ts",
                    F.when(~F.col("has_response"), F.lit(None))
                     .when(frames.failed("top_code"), F.col("top_code"))
                     .otherwise(F.coalesce(part_code, F.lit(0))).cast("int").alias("ack_error_code")))


SHARE_DELIVERIES = ["group_id", "topic", "partition", "client_id", "acquired", "accepted", "released", "rejected",
                    "redelivered", "max_delivery_count", "first_ts", "last_ts"]


def share_deliveries(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Per share group, topic, partition and client: records ``acquired`` (the sizes of its acquired
    ranges), ``redelivered`` (acquired with a delivery count above 1), ``max_delivery_count``, and the
    records it acknowledged as ``accepted``, ``released`` and ``rejected`` (sent, whatever the answer):
    :data:`SHARE_DELIVERIES`' columns, 0 where there were none."""
    acq = (share_acquisitions(exchanges, partitions).groupBy("group_id", "topic", "partition", "client_id")
           .agg(F.sum("records").alias("acquired"),
                F.sum(F.when(F.col("delivery_count") > 1, F.col("records")).otherwise(0)).alias("redelivered"),
                F.max("delivery_count").alias("max_delivery_count"),
                F.min("ts").alias("acq_first"), F.max("ts").alias("acq_last")))
    by_type = {"accepted": "ACCEPT", "released": "RELEASE", "rejected": "REJECT"}
    acks = (share_acknowledgements(exchanges, partitions).groupBy("group_id", "topic", "partition", "client_id")
            .agg(*[F.sum(F.when(F.col("ack_type") == t, F.col("records")).otherwise(0)).alias(c)
                   for c, t in by_type.items()],
                 F.min("ts").alias("ack_first"), F.max("ts").alias("ack_last")))
    keys = ["group_id", "topic", "partition", "client_id"]
    counts = ["acquired", "accepted", "released", "rejected", "redelivered"]
    same = [F.col(f"a.{k}").eqNullSafe(F.col(f"k.{k}")) for k in keys]
    joined = acq.alias("a").join(acks.alias("k"), same, "full")
    return joined.select(*[F.coalesce(F.col(f"a.{k}"), F.col(f"k.{k}")).alias(k) for k in keys],
                         *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in counts],
                         "max_delivery_count",
                         F.least("acq_first", "ack_first").alias("first_ts"),
                         F.greatest("acq_last", "ack_last").alias("last_ts"))


def share_record_deliveries(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per record delivery: each offset of each acquired range (``group_id``, ``topic``,
    ``partition``, ``offset``, ``capture``, ``client_id``, ``member_id``, ``delivery_count``,
    ``acquired_ts``, ``lock_timeout_ms``), with the acknowledgement the same member sent for it before
    the record was acquired again (``ack_type``, ``ack_ts``: null if none) and that next acquisition
    (``next_ts``, ``next_client_id``, ``next_delivery_count``: null if the capture holds none)."""
    acq = (share_acquisitions(exchanges, partitions)
           .select("capture", *SHARE_KEYS, "client_id", "member_id", "delivery_count", "lock_timeout_ms",
                   F.col("ts").alias("acquired_ts"),
                   F.explode(_followed(F.col("first_offset"), F.col("last_offset"))).alias("offset")))
    after = Window.partitionBy(*SHARE_KEYS, "offset").orderBy("acquired_ts", "delivery_count")
    acq = (acq.withColumn("next_ts", F.lead("acquired_ts").over(after))
           .withColumn("next_client_id", F.lead("client_id").over(after))
           .withColumn("next_delivery_count", F.lead("delivery_count").over(after)))
    acks = (share_acknowledgements(exchanges, partitions)
            .select(*SHARE_KEYS, "member_id", "ack_type", F.col("ts").alias("ack_ts"),
                    F.explode(_followed(F.col("first_offset"), F.col("last_offset"))).alias("offset")))
    mine = ([F.col(f"d.{k}").eqNullSafe(F.col(f"k.{k}")) for k in [*SHARE_KEYS, "offset", "member_id"]]
            + [F.col("k.ack_ts") >= F.col("d.acquired_ts"),
               F.col("d.next_ts").isNull() | (F.col("k.ack_ts") < F.col("d.next_ts"))])
    cols = ["capture", *SHARE_KEYS, "offset", "client_id", "member_id", "delivery_count", "acquired_ts",
            "lock_timeout_ms", "next_ts", "next_client_id", "next_delivery_count"]
    return (acq.alias("d").join(acks.alias("k"), mine, "left")
            .groupBy(*[F.col(f"d.{c}").alias(c) for c in cols])
            .agg(F.min_by("k.ack_type", "k.ack_ts").alias("ack_type"), F.min("k.ack_ts").alias("ack_ts")))


SHARE_UNACKNOWLEDGED = ["group_id", "topic", "partition", "first_offset", "last_offset", "records", "client_id",
                        "member_id", "delivery_count", "acquired_ts", "lock_expires_ts", "state", "next_client_id",
                        "next_delivery_count", "next_ts", "capture"]


def share_unacknowledged(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Runs of records a member acquired and never acknowledged: ``state`` ``in_flight`` when the capture
    holds no later acquisition of them (still locked, or waiting for their lock to run out, at its end),
    ``lock_expired`` when they were acquired again (``next_client_id``, ``next_ts``) at or after the
    acquisition lock ran out (``lock_expires_ts``), ``released`` when acquired again before: the member's
    share session ended and the broker let them go. :data:`SHARE_UNACKNOWLEDGED`' columns."""
    d = share_record_deliveries(exchanges, partitions).where(F.col("ack_type").isNull())
    expires = F.col("acquired_ts") + F.make_dt_interval(secs=F.col("lock_timeout_ms") / F.lit(1000.0))
    d = (d.withColumn("lock_expires_ts", F.when(F.col("lock_timeout_ms") > 0, expires))
         .withColumn("state", F.when(F.col("next_ts").isNull(), F.lit("in_flight"))
                     .when(F.col("lock_expires_ts").isNull() | (F.col("next_ts") >= F.col("lock_expires_ts")),
                           F.lit("lock_expired"))
                     .otherwise(F.lit("released"))))
    run = ["capture", *SHARE_KEYS, "client_id", "member_id", "delivery_count", "acquired_ts", "lock_expires_ts",
           "state", "next_client_id", "next_delivery_count"]
    island = F.col("offset") - F.row_number().over(Window.partitionBy(*run).orderBy("offset"))
    return (d.withColumn("island", island).groupBy(*run, "island")
            .agg(F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                 F.count(F.lit(1)).alias("records"), F.min("next_ts").alias("next_ts"))
            .select(*SHARE_UNACKNOWLEDGED))


SHARE_MEMBERS = ["group_id", "member_id", "client_id", "joined_ts", "left_ts", "last_heartbeat_ts", "heartbeats",
                 "member_epoch", "group_epoch", "assigned_partitions", "assignments", "heartbeat_errors", "capture"]


def share_members(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Per share group and member (ShareGroupHeartbeat): its client id, when it joined (its epoch-0
    heartbeat) and left (its epoch -1 heartbeat; null if it did not in the capture), its last heartbeat
    and how many, the member epoch it last got and the highest the group handed anyone (``group_epoch``),
    the partitions it was last assigned, every assignment it was given in order (``assignments``:
    ``"epoch N: topic-p topic-p"``) and its heartbeats' error names. :data:`SHARE_MEMBERS`' columns."""
    hb = (_share_exchanges(exchanges, frames.SHARE_GROUP_HEARTBEAT)
          .select("capture", "group_id", F.coalesce(F.nullif("member_id", F.lit("")),
                                                    F.col("share_resp_member_id")).alias("member_id"),
                  "client_id", "request_ts", "response_ts", "error_code", "error_name",
                  F.col("share_member_epoch").alias("sent_epoch"), F.col("share_resp_member_epoch").alias("epoch"),
                  "share_assignment"))
    ok = F.col("error_code") == 0
    names = _topic_of_id(partitions)
    given = (hb.where(ok & F.col("share_assignment").isNotNull())
             .select("group_id", "member_id", "response_ts", "epoch", F.explode_outer("share_assignment").alias("t"))
             .select("*", F.col("t.topic_id").alias("topic_id"), F.explode_outer("t.partitions").alias("p"))
             .join(names, "topic_id", "left")
             .groupBy("group_id", "member_id", "response_ts", "epoch")
             .agg(F.array_sort(F.collect_list(F.when(F.col("p").isNotNull(), F.concat(
                 F.coalesce("topic", "topic_id"), F.lit("-"), F.col("p").cast("string"))))).alias("parts")))
    # A coordinator may repeat an unchanged assignment (the mock does, in every answer): keep the changes.
    text = F.concat(F.lit("epoch "), F.col("epoch").cast("string"), F.lit(": "), F.array_join("parts", " "))
    given = (given.withColumn("text", text)
             .withColumn("prev", F.lag("text").over(Window.partitionBy("group_id", "member_id").orderBy("response_ts")))
             .where(F.col("prev").isNull() | (F.col("prev") != F.col("text")))
             .groupBy("group_id", "member_id")
             .agg(F.max_by("parts", "response_ts").alias("assigned_partitions"),
                  F.array_sort(F.collect_list(F.struct("response_ts", "text"))).alias("_a"))
             .select("group_id", "member_id", "assigned_partitions",
                     F.transform("_a", lambda a: a["text"]).alias("assignments")))
    members = (hb.where(F.col("member_id").isNotNull() & (F.col("member_id") != ""))
               .groupBy("group_id", "member_id")
               .agg(F.max("client_id").alias("client_id"), F.min_by("capture", "request_ts").alias("capture"),
                    F.min(F.when(F.col("sent_epoch") == 0, F.col("request_ts"))).alias("joined_ts"),
                    F.max(F.when(F.col("sent_epoch") == -1, F.col("request_ts"))).alias("left_ts"),
                    F.max("request_ts").alias("last_heartbeat_ts"), F.count(F.lit(1)).alias("heartbeats"),
                    F.max_by(F.when(ok & (F.col("epoch") > 0), F.col("epoch")),
                             F.when(ok & (F.col("epoch") > 0), F.col("response_ts"))).alias("member_epoch"),
                    F.array_sort(F.collect_set(F.when(frames.failed(), F.col("error_name")))).alias("heartbeat_errors")))
    epochs = hb.where(ok).groupBy("group_id").agg(F.max("epoch").alias("group_epoch"))
    return (members.join(given, ["group_id", "member_id"], "left").join(epochs, "group_id", "left")
            .select(*SHARE_MEMBERS))


SHARE_SESSION_ERROR = ["group_id", "client_id", "member_id", "broker", "api_name", "error", "level", "count",
                       "session_epochs", "first_ts", "last_ts", "capture"]


def share_session_errors(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """The errors ShareFetch and ShareAcknowledge answers carried, per group, client, member, broker, api
    and error: top-level ones (``level`` ``request``: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
    ...) by name, and per-partition ones (``partition``; ``acknowledgement`` for ShareFetch's
    acknowledge_error_code) by name where the partition rows name them, else as ``code N``; with the share
    session epochs the failing requests sent. :data:`SHARE_SESSION_ERROR`' columns."""
    ex = _share_exchanges(exchanges, frames.SHARE_FETCH, frames.SHARE_ACKNOWLEDGE)
    who = ["capture", "group_id", "client_id", "member_id", "broker", "api_name", "share_session_epoch",
           frames.exchange_ts().alias("ts")]
    top = (ex.where(frames.failed())
           .select(*who, F.col("error_name").alias("error"), F.lit("request").alias("level")))
    parts = (ex.where(F.col("share_responses").isNotNull() & ~frames.failed())
             .select(*who, F.explode("share_responses").alias("t"))
             .select("*", F.explode("t.partitions").alias("p")))
    part = F.concat(F.lit("code "), F.col("p.error_code").cast("string"))
    ack = F.concat(F.lit("code "), F.col("p.acknowledge_error_code").cast("string"))
    per_part = (parts.where(frames.failed("p.error_code"))
                .select(*[c for c in who if isinstance(c, str)], "ts", part.alias("error"),
                        F.lit("partition").alias("level"))
                .unionByName(parts.where(frames.failed("p.acknowledge_error_code"))
                             .select(*[c for c in who if isinstance(c, str)], "ts", ack.alias("error"),
                                     F.lit("acknowledgement").alias("level"))))
    return (top.unionByName(per_part)
            .groupBy("group_id", "client_id", "member_id", "broker", "api_name", "error", "level")
            .agg(F.count(F.lit(1)).alias("count"),
                 F.array_sort(F.collect_set("share_session_epoch")).alias("session_epochs"),
                 F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"), F.min_by("capture", "ts").alias("capture"))
            .select(*SHARE_SESSION_ERROR))
