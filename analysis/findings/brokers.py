"""Broker and load rules: a slow broker, throttling, unanswered requests, hot partitions."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis import derived, frames
from analysis.findings.core import (
    Inputs,
    Rule,
    Thresholds,
    emit,
    fmt,
    requests_of,
    rounded,
    sh_quote,
    show_line,
    tp,
    uses,
)

# Apis whose latency is a wait the client asked for (long poll, rebalance barrier), not broker speed.
WAITING_APIS = (frames.FETCH, frames.JOIN_GROUP, frames.SYNC_GROUP, frames.SHARE_FETCH, frames.CONSUMER_GROUP_HEARTBEAT,
                frames.SHARE_GROUP_HEARTBEAT)


def slow(inp: Inputs, th: Thresholds) -> DataFrame:
    ex = (inp.exchanges.where(F.col("latency_ms").isNotNull() & ~derived.api(*WAITING_APIS))
          .withColumn("broker", derived.broker()))
    per = (ex.groupBy("capture", "api_name", "broker")
           .agg(F.count(F.lit(1)).alias("count"), frames.percentile("latency_ms", 0.99).alias("p99"),
                F.min("request_ts").alias("first_ts"), F.max("request_ts").alias("last_ts"))
           .where(F.col("count") >= th["min_requests"]))
    # Peers: every other broker serving the api; the median of their p99s. Each broker is paired with its
    # peers inside one row of its api's brokers (a self-join would compute ``per``, a sort of every
    # exchange, once for each side).
    apis = per.groupBy("capture", "api_name").agg(
        F.collect_list(F.struct("broker", "count", "p99", "first_ts", "last_ts")).alias("brokers"))
    pairs = (apis.select("capture", "api_name", "brokers", F.explode("brokers").alias("a"))
             .select("capture", "api_name", "a", F.explode("brokers").alias("b"))
             .where(F.col("a.broker") != F.col("b.broker")))
    j = (pairs.groupBy("capture", "api_name", "a")
         .agg(frames.percentile("b.p99", 0.5).alias("peer_p99"), F.count(F.lit(1)).alias("peers"))
         .select("capture", "api_name", "a.*", "peer_p99", "peers"))
    hits = j.where((F.col("p99") >= th["min_ratio"] * F.col("peer_p99"))
                   & (F.col("p99") - F.col("peer_p99") >= th["min_difference_ms"]))
    return emit(hits, "broker.slow", "warning", "broker", F.col("broker"),
                {"api_name": F.col("api_name"), "p99_ms": rounded(F.col("p99"), 3),
                 "peer_p99_ms": rounded(F.col("peer_p99"), 3), "requests": F.col("count"), "peers": F.col("peers")},
                fmt("Broker %s answers %s with p99 %s ms, against %s ms on its %s peer(s).", F.col("broker"),
                    F.col("api_name"), rounded(F.col("p99"), 1), rounded(F.col("peer_p99"), 1), F.col("peers")),
                "Look at that broker's disks, request handler and network threads (num.io.threads, "
                "num.network.threads), GC and partition leadership balance.",
                F.concat(F.lit("kdissect show "), sh_quote(F.col("capture")), F.lit(" --api "), F.col("api_name"),
                         F.lit(" --slower-than "), F.floor(F.col("peer_p99") * th["min_ratio"]).cast("string")))


def throttling(inp: Inputs, th: Thresholds) -> DataFrame:
    # ApiVersions is left out: quotas are not applied to it, and the librdkafka mock cluster's answers
    # carry junk there (1179648 ms).
    ex = (inp.exchanges.where((F.col("throttle_ms") > 0) & ~derived.api(frames.API_VERSIONS))
          .withColumn("broker", derived.broker()))
    agg = (ex.groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("throttled"), F.max("throttle_ms").alias("max_ms"),
                F.sum("throttle_ms").alias("total_ms"), F.sort_array(F.collect_set("api_name")).alias("apis"),
                F.sort_array(F.collect_set("broker")).alias("brokers"),
                F.min("request_ts").alias("first_ts"), F.max("response_ts").alias("last_ts")))
    hits = agg.where(F.col("throttled") >= th["min_throttled_responses"])
    return emit(hits, "broker.throttling", "warning", "client", F.col("client_id"),
                {"throttled_responses": F.col("throttled"), "max_throttle_ms": F.col("max_ms"),
                 "total_throttle_ms": F.col("total_ms"), "apis": F.col("apis"), "brokers": F.col("brokers")},
                fmt("%s was throttled in %s response(s) (%s, up to %s ms, %s ms in all): a quota bites.",
                    F.col("client_id"), F.col("throttled"), F.array_join(F.col("apis"), ", "), F.col("max_ms"),
                    F.col("total_ms")),
                "Check the client quotas (producer_byte_rate, consumer_byte_rate, request_percentage: "
                "kafka-configs --describe --entity-type clients/users) or spread the load.",
                show_line(F.col("capture"), client_id=F.col("client_id")))


def unanswered(inp: Inputs, th: Thresholds) -> DataFrame:
    ex = inp.exchanges
    end = ex.groupBy("capture").agg(F.max(F.greatest("request_ts", "response_ts")).alias("capture_end"))
    # A later request on the same connection that was answered: Kafka answers in order, so this one was skipped.
    answered = (ex.where(F.col("response_ts").isNotNull())
                .groupBy("capture", "connection").agg(F.max("request_ts").alias("last_answered")))
    # How long a request may legitimately wait: what it asked for.
    allowance_ms = F.coalesce(
        F.when(derived.api(frames.FETCH), F.col("req_max_wait_ms"))
        .when(derived.api(frames.JOIN_GROUP), F.col("req_rebalance_timeout_ms"))
        .when(derived.api(frames.PRODUCE), F.col("req_timeout_ms")),
        F.lit(0)).cast("double")
    # A later request from the same client to the same broker on another connection: it gave up on this one.
    later = (requests_of(ex).groupBy("capture", "client_id", "broker_ip", "broker_port")
             .agg(F.max("request_ts").alias("client_last")))
    lone = (requests_of(ex).where(F.col("status") == "no_response")
            .join(end, "capture").join(answered, ["capture", "connection"], "left")
            .join(later, ["capture", "client_id", "broker_ip", "broker_port"], "left")
            .withColumn("deadline", frames.epoch_seconds("request_ts") + allowance_ms / 1000 + th["edge_s"]))
    skipped = F.col("last_answered") > F.col("request_ts")
    abandoned = ((frames.epoch_seconds("client_last") > F.col("deadline"))
                 & (frames.epoch_seconds("capture_end") > F.col("deadline")))
    hits = lone.where(skipped | abandoned).withColumn("broker", derived.broker())
    agg = (hits.groupBy("capture", "broker")
           .agg(F.count(F.lit(1)).alias("unanswered"), F.min("request_ts").alias("first_ts"),
                F.max("request_ts").alias("last_ts"), F.sort_array(F.collect_set("api_name")).alias("apis"),
                F.sort_array(F.collect_set("client_id")).alias("clients"),
                F.sort_array(F.collect_list(F.struct("connection", "correlation_id", "api_name")))
                .alias("requests")))
    hits2 = agg.where(F.col("unanswered") >= th["min_unanswered"])
    return emit(hits2, "broker.unanswered", "warning", "broker", F.col("broker"),
                {"unanswered": F.col("unanswered"), "apis": F.col("apis"), "clients": F.col("clients"),
                 "requests": F.slice("requests", 1, 20)},
                fmt("%s request(s) (%s) to %s were never answered in the middle of the capture; the client "
                    "went on without the answer (timeout, reconnect).", F.col("unanswered"),
                    F.array_join(F.col("apis"), ", "), F.col("broker")),
                "Check the broker's request queue and handler threads, the network path, and request.timeout.ms "
                "on the clients; a lost Produce answer makes a non-idempotent producer write twice.",
                F.concat_ws(" ", F.lit("kdissect show"), sh_quote(F.col("capture")), F.lit("--api"),
                            F.array_join("apis", ","), F.lit("--client-id"), sh_quote(F.element_at("clients", 1))))


def hot_partition(inp: Inputs, th: Thresholds) -> DataFrame:
    p = inp.partitions.where(F.col("topic").isNotNull() & F.col("partition").isNotNull())
    # Every partition a message names counts, so idle partitions (seen in Metadata, say) weigh in at 0.
    known = p.select("capture", "topic", "partition").distinct()
    load = (p.where(derived.api(frames.PRODUCE) & (F.col("direction") == "request"))
            .groupBy("capture", "topic", "partition")
            .agg(F.sum("bytes").alias("bytes"), F.sum("record_count").alias("records"),
                 F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts")))
    allp = known.join(load, ["capture", "topic", "partition"], "left").fillna(0, ["bytes", "records"])
    w = Window.partitionBy("capture", "topic")
    allp = (allp.withColumn("median", frames.percentile("bytes", 0.5, w))
            .withColumn("partitions", F.count(F.lit(1)).over(w))
            .withColumn("topic_bytes", F.sum("bytes").over(w)))
    hits = allp.where((F.col("partitions") >= 2) & (F.col("bytes") >= th["min_bytes"])
                      & (F.col("bytes") >= th["min_ratio"] * F.greatest(F.col("median"), F.lit(1))))
    part = tp(F.col("topic"), F.col("partition"))
    return emit(hits, "topic.hot_partition", "warning", "topic_partition", part,
                {"bytes": F.col("bytes"), "records": F.col("records"), "topic_median_bytes": F.col("median"),
                 "topic_partitions": F.col("partitions"),
                 "share": rounded(F.try_divide(F.col("bytes"), F.col("topic_bytes")), 3)},
                fmt("Partition %s received %s bytes, %s times its topic's median partition (%s bytes over %s "
                    "partitions): one broker and one consumer carry most of the topic.", part, F.col("bytes"),
                    rounded(F.col("bytes") / F.greatest(F.col("median"), F.lit(1)), 1), F.col("median"),
                    F.col("partitions")),
                "Check the record keys (one hot key) and the producer's partitioner (partitioner, "
                "sticky partitioning with linger.ms); consider more partitions or a better key.",
                show_line(F.col("capture"), ["Produce"], topic=F.col("topic")))


RULES = (
    Rule("broker.slow", "one broker's p99 for an api far above its peers' (waiting apis like Fetch excluded)",
         "api_name, p99_ms, peer_p99_ms, requests, peers", "broker num.io.threads, num.network.threads, disks",
         slow, {"min_requests": 20, "min_ratio": 5.0, "min_difference_ms": 50.0}),
    Rule("broker.throttling", "responses with throttle_time_ms > 0: a quota bites",
         "throttled_responses, max_throttle_ms, total_throttle_ms, apis", "quotas: producer_byte_rate, "
         "consumer_byte_rate, request_percentage", throttling, {"min_throttled_responses": 1},
         applies=lambda present: bool(present.throttled - {"ApiVersions"})),
    Rule("broker.unanswered", "requests never answered in the middle of a capture (a later request on the "
         "connection was answered, or the client went on elsewhere), not at its edges",
         "unanswered, apis, clients, requests", "request.timeout.ms; broker request queue", unanswered,
         {"edge_s": 1.0, "min_unanswered": 1}),
    Rule("topic.hot_partition", "a partition receiving far more than its topic's median partition",
         "bytes, records, topic_median_bytes, topic_partitions, share", "record keys, partitioner",
         hot_partition, {"min_ratio": 5.0, "min_bytes": 1048576},
         applies=uses(frames.PRODUCE)),
)
