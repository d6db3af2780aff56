"""Client rules: error and metadata storms, connection churn, authentication, client ids, versions."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import derived, frames
from analysis.findings._removed_versions import MIN_VERSION_4X
from analysis.findings.core import (
    Inputs,
    Rule,
    Thresholds,
    emit,
    fmt,
    per_second,
    requests_of,
    rounded,
    seconds,
    sh_quote,
    show_line,
    ts,
    uses,
)

# Errors that mean "my view of the cluster is stale": a client meeting them again and again is looping.
STORM_ERRORS = ("NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
                "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR",
                "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH")


def error_storm(inp: Inputs, th: Thresholds) -> DataFrame:
    ex = inp.exchanges.where(F.col("error_name").isin(*STORM_ERRORS))
    agg = (ex.withColumn("t", ts())
           .groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("errors"), F.min("t").alias("first_ts"), F.max("t").alias("last_ts"),
                F.sort_array(F.collect_set("error_name")).alias("error_names"),
                F.sort_array(F.collect_set("api_name")).alias("apis")))
    agg = agg.withColumn("rate", per_second(F.col("errors"), F.col("first_ts"), F.col("last_ts")))
    hits = agg.where((F.col("errors") >= th["min_errors"]) & (F.col("rate") >= th["min_errors_per_s"]))
    return emit(hits, "client.error_storm", "warning", "client", F.col("client_id"),
                {"errors": F.col("errors"), "errors_per_s": rounded(F.col("rate")),
                 "error_names": F.col("error_names"), "apis": F.col("apis")},
                fmt("%s got %s answers saying its view of the cluster is stale (%s), %s per second: "
                    "it keeps retrying against the wrong broker.", F.col("client_id"), F.col("errors"),
                    F.array_join(F.col("error_names"), ", "), rounded(F.col("rate"), 1)),
                "Check the brokers' health (leader elections, under-replicated partitions) and the client's "
                "retry.backoff.ms / retry.backoff.max.ms and metadata.max.age.ms.",
                show_line(F.col("capture"), client_id=F.col("client_id"), errors=True))


def metadata_storm(inp: Inputs, th: Thresholds) -> DataFrame:
    md = requests_of(inp.exchanges, frames.METADATA)
    # null topics (v1+) or an empty list (v0) asks for every topic in the cluster.
    topics = F.col("req_topics_json")
    all_topics = (topics.isNull() | (topics == "null")) | ((topics == "[]") & (F.col("api_version") == 0))
    agg = (md.groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("requests"), F.sum(all_topics.cast("long")).alias("all_topics"),
                F.min("request_ts").alias("first_ts"), F.max("request_ts").alias("last_ts"),
                F.countDistinct("connection").alias("connections"))
           .withColumn("rate", per_second(F.col("requests"), F.col("first_ts"), F.col("last_ts")))
           .withColumn("all_rate", per_second(F.col("all_topics"), F.col("first_ts"), F.col("last_ts"))))
    hits = agg.where(((F.col("requests") >= th["min_requests"]) & (F.col("rate") > th["max_requests_per_s"]))
                     | ((F.col("all_topics") >= th["min_requests"])
                        & (F.col("all_rate") > th["max_all_topics_requests_per_s"])))
    return emit(hits, "client.metadata_storm", "warning", "client", F.col("client_id"),
                {"metadata_requests": F.col("requests"), "requests_per_s": rounded(F.col("rate")),
                 "all_topics_requests": F.col("all_topics"), "connections": F.col("connections"),
                 "span_s": rounded(frames.seconds_between("first_ts", "last_ts"), 3)},
                fmt("%s sent %s Metadata requests (%s/s, %s for all topics): it refreshes its view of the "
                    "cluster far more often than it changes.", F.col("client_id"), F.col("requests"),
                    rounded(F.col("rate"), 1), F.col("all_topics")),
                "Check topic.metadata.refresh.interval.ms / metadata.max.age.ms (default 5 min), "
                "retry.backoff.ms, and whether the application creates a client per message.",
                show_line(F.col("capture"), ["Metadata"], client_id=F.col("client_id")))


def connection_churn(inp: Inputs, th: Thresholds) -> DataFrame:
    ex = inp.exchanges.withColumn("t", ts())
    conns = (ex.groupBy("capture", "client_id", "connection")
             .agg(F.min("t").alias("first_ts"), F.max("t").alias("last_ts"),
                  F.sum(derived.api(frames.API_VERSIONS).cast("long")).alias("api_versions"),
                  F.sum(derived.api(frames.SASL_HANDSHAKE, frames.SASL_AUTHENTICATE).cast("long")).alias("sasl")))
    # The client id comes from requests; a connection whose requests were all missed has none.
    conns = (conns.where(F.col("client_id").isNotNull())
             .withColumn("lasted_s", seconds(F.col("first_ts"), F.col("last_ts"))))
    agg = (conns.groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("connections"), F.min("first_ts").alias("first_ts"),
                F.max("last_ts").alias("last_ts"),
                frames.percentile("lasted_s", 0.5).alias("median_s"),
                F.sum("api_versions").alias("api_versions"), F.sum("sasl").alias("sasl")))
    agg = agg.withColumn("per_min", per_second(F.col("connections"), F.col("first_ts"), F.col("last_ts")) * 60)
    hits = agg.where((F.col("connections") >= th["min_connections"])
                     & (F.col("median_s") <= th["max_median_connection_s"]))
    return emit(hits, "client.connection_churn", "warning", "client", F.col("client_id"),
                {"connections": F.col("connections"), "median_connection_s": rounded(F.col("median_s"), 3),
                 "connections_per_min": rounded(F.col("per_min"), 1), "api_versions_requests": F.col("api_versions"),
                 "sasl_requests": F.col("sasl")},
                fmt("%s opened %s connections lasting %s s (median): each one pays a TCP handshake, "
                    "ApiVersions%s and Metadata again.", F.col("client_id"), F.col("connections"),
                    rounded(F.col("median_s"), 2), F.when(F.col("sasl") > 0, " and SASL").otherwise("")),
                "Reuse one producer/consumer for the application's life instead of one per message; check "
                "connections.max.idle.ms and reconnect.backoff.ms.",
                show_line(F.col("capture"), ["ApiVersions"], client_id=F.col("client_id")))


def auth_failures(inp: Inputs, th: Thresholds) -> DataFrame:
    sasl = inp.exchanges.where(derived.api(frames.SASL_HANDSHAKE, frames.SASL_AUTHENTICATE)
                               & F.col("error_code").isNotNull() & (F.col("error_code") != 0))
    who = F.coalesce(F.col("client_id"), F.concat(F.lit("ip "), F.col("client_ip")))
    agg = (sasl.withColumn("t", ts()).withColumn("who", who)
           .groupBy("capture", "who", "client_id")
           .agg(F.count(F.lit(1)).alias("failures"), F.min("t").alias("first_ts"), F.max("t").alias("last_ts"),
                F.sort_array(F.collect_set("error_name")).alias("errors"),
                F.countDistinct("connection").alias("connections")))
    hits = agg.where(F.col("failures") >= th["min_failures"])
    return emit(hits, "client.auth_failures", "critical", "client", F.col("who"),
                {"failures": F.col("failures"), "errors": F.col("errors"), "connections": F.col("connections")},
                fmt("%s failed SASL authentication %s times (%s) on %s connection(s).", F.col("who"),
                    F.col("failures"), F.array_join(F.col("errors"), ", "), F.col("connections")),
                "Check sasl.mechanism(s), sasl.username / sasl.jaas.config and the broker's "
                "sasl.enabled.mechanisms; a client retrying bad credentials loads the broker.",
                show_line(F.col("capture"), ["SaslHandshake", "SaslAuthenticate"], client_id=F.col("client_id")))


# Library defaults: a client nobody named cannot be told apart in quotas, logs or this report.
_DEFAULT_IDS = r"^(rdkafka|kafka-python-[0-9.]+|aiokafka-[0-9.]+|sarama|kgo|segment-kafka|" \
               r"producer-[0-9]+|consumer-.*-[0-9]+|adminclient-[0-9]+)$"


def no_client_id(inp: Inputs, th: Thresholds) -> DataFrame:
    req = requests_of(inp.exchanges)
    unnamed = F.col("client_id").isNull() | (F.trim(F.col("client_id")) == "") | F.col("client_id").rlike(_DEFAULT_IDS)
    agg = (req.where(unnamed)
           .groupBy("capture", F.coalesce(F.col("client_id"), F.lit("")).alias("client_id"))
           .agg(F.count(F.lit(1)).alias("requests"), F.countDistinct("connection").alias("connections"),
                F.sort_array(F.collect_set("client_ip")).alias("client_ips"),
                F.min("request_ts").alias("first_ts"), F.max("request_ts").alias("last_ts")))
    hits = agg.where(F.col("requests") >= th["min_requests"])
    empty = F.col("client_id") == ""
    return emit(hits, "client.no_client_id", "info", "client",
                F.when(empty, F.lit("(none)")).otherwise(F.col("client_id")),
                {"client_id": F.col("client_id"), "requests": F.col("requests"), "connections": F.col("connections"),
                 "client_ips": F.col("client_ips")},
                F.when(empty, fmt("%s requests from %s carry no client id.", F.col("requests"),
                                  F.array_join(F.col("client_ips"), ", ")))
                .otherwise(fmt("%s requests from %s use the library's default client id %s.", F.col("requests"),
                               F.array_join(F.col("client_ips"), ", "), F.col("client_id"))),
                "Set client.id to a name that says which application and instance this is.",
                F.when(empty, F.concat(F.lit("kdissect show "), sh_quote(F.col("capture")), F.lit(" -c 50")))
                .otherwise(show_line(F.col("capture"), client_id=F.col("client_id"))))


def legacy_format(inp: Inputs, th: Thresholds) -> DataFrame:
    # Produce v0-2 carry message format v0/v1; Fetch v0-3 makes the broker down-convert to it.
    legacy_api = ((derived.api(frames.PRODUCE) & (F.col("api_version") <= 2))
                  | (derived.api(frames.FETCH) & (F.col("api_version") <= 3)))
    magics = F.flatten(F.flatten(F.transform("req_topic_data", lambda t: F.transform(
        t["partition_data"], lambda p: p["records"]["magics"]))))
    # Any batch of message format 0 or 1 (the JSON path with wildcards had the same with a regex).
    legacy_magic = derived.api(frames.PRODUCE) & F.exists(magics, lambda m: m.isin(0, 1))
    req = frames.where_lambda(requests_of(inp.exchanges, frames.PRODUCE, frames.FETCH), legacy_api | legacy_magic)
    agg = (req.groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("requests"),
                F.sort_array(F.collect_set(F.concat("api_name", F.lit(" v"), F.col("api_version").cast("string"))))
                .alias("versions"),
                F.min("request_ts").alias("first_ts"), F.max("request_ts").alias("last_ts")))
    hits = agg.where(F.col("requests") >= th["min_requests"])
    return emit(hits, "client.legacy_format", "warning", "client", F.col("client_id"),
                {"requests": F.col("requests"), "api_versions": F.col("versions")},
                fmt("%s uses the legacy message format (%s): the broker converts every batch it sends or "
                    "receives, at a CPU and memory cost, and 4.x brokers refuse it.", F.col("client_id"),
                    F.array_join(F.col("versions"), ", ")),
                "Upgrade the client library; for librdkafka check api.version.request=true and "
                "broker.version.fallback, for kafka-python the api_version setting.",
                show_line(F.col("capture"), ["Produce", "Fetch"], client_id=F.col("client_id")))


def old_versions(inp: Inputs, th: Thresholds) -> DataFrame:
    spark = inp.exchanges.sparkSession
    floor = spark.createDataFrame(sorted(MIN_VERSION_4X.items()), "api_name string, min_version_4x int")
    req = requests_of(inp.exchanges).join(F.broadcast(floor), "api_name")
    req = req.where(F.col("api_version") < F.col("min_version_4x"))
    per_api = (req.groupBy("capture", "client_id", "api_name", "api_version", "min_version_4x")
               .agg(F.count(F.lit(1)).alias("n"), F.min("request_ts").alias("first_ts"),
                    F.max("request_ts").alias("last_ts")))
    label = F.when(F.col("min_version_4x") >= 99, F.concat("api_name", F.lit(" v"), F.col("api_version").cast("string"),
                                                        F.lit(" (api removed)")))\
        .otherwise(F.concat("api_name", F.lit(" v"), F.col("api_version").cast("string"), F.lit(" (4.x needs v"),
                            F.col("min_version_4x").cast("string"), F.lit("+)")))
    agg = (per_api.groupBy("capture", "client_id")
           .agg(F.sum("n").alias("requests"), F.sort_array(F.collect_set(label)).alias("versions"),
                F.sort_array(F.collect_set("api_name")).alias("apis"),
                F.min("first_ts").alias("first_ts"), F.max("last_ts").alias("last_ts")))
    hits = agg.where(F.col("requests") >= th["min_requests"])
    return emit(hits, "client.old_versions", "warning", "client", F.col("client_id"),
                {"requests": F.col("requests"), "removed_versions": F.col("versions")},
                fmt("%s uses api versions that Kafka 4.0 removed (KIP-896): %s; it cannot talk to a 4.x broker.",
                    F.col("client_id"), F.array_join(F.col("versions"), ", ")),
                "Upgrade the client library before upgrading brokers to Kafka 4.x (KIP-896 lists the "
                "minimum client versions).",
                F.concat_ws(" ", F.lit("kdissect show"), sh_quote(F.col("capture")), F.lit("--api"),
                            F.array_join(F.col("apis"), ","),
                            F.when(F.col("client_id").isNotNull(),
                                   F.concat(F.lit("--client-id "), sh_quote(F.col("client_id"))))))


RULES = (
    Rule("client.error_storm", "a client meeting NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, "
         "LEADER_NOT_AVAILABLE, COORDINATOR_* (stale-metadata errors) again and again",
         "errors, errors_per_s, error_names, apis", "retry.backoff.ms, metadata.max.age.ms", error_storm,
         {"min_errors": 10, "min_errors_per_s": 0.5},
         applies=lambda present: bool(present.errors & set(STORM_ERRORS))),
    Rule("client.metadata_storm", "Metadata requests per client per second above a threshold, or all-topics "
         "Metadata at a high rate", "metadata_requests, requests_per_s, all_topics_requests, connections",
         "topic.metadata.refresh.interval.ms, metadata.max.age.ms", metadata_storm,
         {"min_requests": 20, "max_requests_per_s": 2.0, "max_all_topics_requests_per_s": 0.5},
         applies=uses(frames.METADATA)),
    Rule("client.connection_churn", "many short connections from one client (reconnect loops, a client per "
         "message), each paying ApiVersions and SASL again", "connections, median_connection_s, "
         "connections_per_min, api_versions_requests, sasl_requests", "client reuse, connections.max.idle.ms, "
         "reconnect.backoff.ms", connection_churn, {"min_connections": 10, "max_median_connection_s": 10.0}),
    Rule("client.auth_failures", "repeated SASL authentication failures", "failures, errors, connections",
         "sasl.mechanism, sasl.jaas.config / sasl.username", auth_failures, {"min_failures": 3}, "critical",
         applies=uses(frames.SASL_HANDSHAKE, frames.SASL_AUTHENTICATE)),
    Rule("client.no_client_id", "requests with no client id or a library default one (rdkafka, "
         "kafka-python-x, producer-1, ...)", "client_id, requests, connections, client_ips", "client.id",
         no_client_id, {"min_requests": 1}, "info"),
    Rule("client.legacy_format", "Produce v0-2 / magic 0-1 batches or Fetch v0-3: the legacy message format "
         "the broker must down-convert", "requests, api_versions", "client upgrade, api.version.request, "
         "broker.version.fallback", legacy_format, {"min_requests": 1},
         applies=uses(frames.PRODUCE, frames.FETCH)),
    Rule("client.old_versions", "api versions in Kafka 3.9's specs that 4.x removed (KIP-896): the client "
         "cannot talk to a 4.x broker", "requests, removed_versions", "client upgrade", old_versions,
         {"min_requests": 1}),
)
