"""Producer rules: batching, compression, batch size, acks, idempotence, duplicate batches."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import derived, facts, frames
from analysis.findings.core import (
    Inputs,
    Rule,
    Thresholds,
    emit,
    fmt,
    parts_with_client,
    per_second,
    requests_of,
    rounded,
    show_line,
    tp,
    uses,
)


# What the rules read of a batch's records summary (the facts' Produce schema holds one or two more).
_RECORDS = ["record_count", "batch_count", "total_bytes", "first_timestamp", "max_timestamp", "codec", "producer_id",
            "producer_epoch", "base_sequence", "magics", "first_crc"]


def produce_batches(exchanges: DataFrame) -> DataFrame:
    """One row per topic-partition entry of each captured Produce request, with its records summary."""
    req = requests_of(facts.typed(exchanges), frames.PRODUCE).select(
        "capture", "connection", "correlation_id", "client_id", "request_ts", "status", "req_acks", "req_topic_data")
    topics = req.select("*", F.explode_outer("req_topic_data").alias("t"))
    parts = topics.select("*", F.explode_outer("t.partition_data").alias("p"))
    return parts.select(
        "capture", "connection", "correlation_id", "client_id", "request_ts", "status",
        F.col("req_acks").alias("acks"),
        F.coalesce("t.name", "t.topic_id").alias("topic"),
        F.col("p.index").alias("partition"),
        *[F.col(f"p.records.{c}").alias(c) for c in _RECORDS])


def batches_of(inp: Inputs) -> DataFrame:
    """:func:`produce_batches` of the inputs, the shared one when prepared."""
    return inp.produce if inp.produce is not None else produce_batches(inp.exchanges)


def _produce_outcomes(partitions: DataFrame) -> DataFrame:
    return (partitions.where(derived.api(frames.PRODUCE) & (F.col("direction") == "response"))
            .select("capture", "connection", "correlation_id", "topic", "partition",
                    F.col("error_name").alias("outcome"), F.col("base_offset").alias("assigned_offset")))


# --------------------------------------------------------------------------

def tiny_batches(inp: Inputs, th: Thresholds) -> DataFrame:
    # Each request's totals from its own row (its partition entries holding batches), not a grouping of
    # the batches by request: that shuffled every batch with its connection.
    entries = F.col("entries")
    per_req = (frames.where_lambda(
        requests_of(facts.typed(inp.exchanges), frames.PRODUCE)
        .select("capture", "client_id", F.col("request_ts").alias("ts"), frames.batch_entries().alias("entries")),
        F.size("entries") > 0)
               .select("capture", "client_id", "ts", frames.records_total(entries, "record_count").alias("records"),
                       frames.records_total(entries, "batch_count").alias("batches"))
               .withColumn("per_batch", F.col("records") / F.col("batches")))
    agg = (per_req.groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("requests"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
                F.sum("records").alias("records"), F.sum("batches").alias("batches"),
                frames.percentile("per_batch", 0.5).alias("median_records"))
           .withColumn("rate", per_second(F.col("requests"), F.col("first_ts"), F.col("last_ts"))))
    # A producer that sent a few dozen records in all pays little for sending them one by one, whatever its
    # rate over its few seconds: the records floor asks for traffic that matters.
    hits = agg.where((F.col("median_records") <= th["max_median_records_per_batch"])
                     & (F.col("rate") > th["min_requests_per_s"]) & (F.col("requests") >= th["min_requests"])
                     & (F.col("records") >= th["min_records"]))
    return emit(hits, "producer.tiny_batches", "warning", "client", F.col("client_id"),
                {"produce_requests": F.col("requests"), "requests_per_s": rounded(F.col("rate")),
                 "median_records_per_batch": F.col("median_records"), "records": F.col("records"),
                 "batches": F.col("batches")},
                fmt("%s sent %s Produce requests (%s/s) with a median of %s record(s) per batch: "
                    "records travel almost one by one.", F.col("client_id"), F.col("requests"),
                    rounded(F.col("rate"), 1), F.col("median_records")),
                "Raise linger.ms (e.g. 5-50 ms) so records share a batch, and check batch.size "
                "(librdkafka: batch.size / batch.num.messages).",
                show_line(F.col("capture"), ["Produce"], client_id=F.col("client_id")))


def uncompressed(inp: Inputs, th: Thresholds) -> DataFrame:
    rows = parts_with_client(inp).where(
        derived.api(frames.PRODUCE) & (F.col("direction") == "request") & (F.col("bytes") > 0))
    agg = (rows.groupBy("capture", "topic")
           .agg(F.sum("bytes").alias("bytes"),
                F.sum(F.when(F.col("compression") == "none", F.col("bytes")).otherwise(0)).alias("plain"),
                F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
                F.sort_array(F.collect_set(F.when(F.col("compression") == "none", F.col("client_id"))))
                .alias("producers")))
    agg = (agg.withColumn("share", F.col("plain") / F.col("bytes"))
           .withColumn("rate", per_second(F.col("plain"), F.col("first_ts"), F.col("last_ts"))))
    hits = agg.where((F.col("plain") >= th["min_bytes"]) & (F.col("rate") >= th["min_bytes_per_s"])
                     & (F.col("share") >= th["min_uncompressed_share"]))
    return emit(hits, "producer.uncompressed", "warning", "topic", F.col("topic"),
                {"produced_bytes": F.col("bytes"), "uncompressed_bytes": F.col("plain"),
                 "uncompressed_share": rounded(F.col("share"), 3),
                 "uncompressed_bytes_per_s": rounded(F.col("rate"), 0),
                 "producers": F.col("producers")},
                fmt("Topic %s received %s bytes of uncompressed record batches (%s%% of its data, %s B/s).",
                    F.col("topic"), F.col("plain"), rounded(F.col("share") * 100, 0), rounded(F.col("rate"), 0)),
                "Set compression.type (lz4 or zstd) on the producers of this topic; batching "
                "(linger.ms) makes compression pay off.",
                show_line(F.col("capture"), ["Produce"], topic=F.col("topic")))


_TOO_LARGE = ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE")


def large_batches(inp: Inputs, th: Thresholds) -> DataFrame:
    rows = parts_with_client(inp).where(derived.api(frames.PRODUCE))
    sent = rows.where((F.col("direction") == "request") & (F.col("batch_count") > 0))
    near = (sent.where(F.col("bytes") / F.col("batch_count") >= th["near_limit_bytes"])
            .groupBy("capture", "client_id", "topic")
            .agg(F.count(F.lit(1)).alias("batches"), F.max(F.col("bytes") / F.col("batch_count")).alias("largest"),
                 F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts")))
    near_f = emit(near, "producer.large_batches", "warning", "client", F.col("client_id"),
                  {"topic": F.col("topic"), "batches_near_limit": F.col("batches"),
                   "largest_batch_bytes": F.col("largest").cast("long"),
                   "near_limit_bytes": F.lit(int(th["near_limit_bytes"]))},
                  fmt("%s sent %s batch(es) to %s close to the 1 MiB default size limit (largest %s bytes).",
                      F.col("client_id"), F.col("batches"), F.col("topic"), F.col("largest").cast("long")),
                  "Check batch.size on the producer against max.message.bytes (topic) / message.max.bytes "
                  "(broker) and max.request.size (producer).",
                  show_line(F.col("capture"), ["Produce"], client_id=F.col("client_id"), topic=F.col("topic")))
    rejected = (rows.where((F.col("direction") == "response") & F.col("error_name").isin(*_TOO_LARGE))
                .groupBy("capture", "client_id", "topic")
                .agg(F.count(F.lit(1)).alias("rejected"), F.sort_array(F.collect_set("error_name")).alias("errors"),
                     F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts")))
    rej_f = emit(rejected, "producer.large_batches", "critical", "client", F.col("client_id"),
                 {"topic": F.col("topic"), "rejected_partitions": F.col("rejected"), "errors": F.col("errors")},
                 fmt("The broker rejected %s Produce partition entr(ies) of %s to %s as too large (%s): "
                     "those records were not written.", F.col("rejected"), F.col("client_id"), F.col("topic"),
                     F.array_join(F.col("errors"), ", ")),
                 "Lower batch.size / max.request.size on the producer, or raise max.message.bytes on the topic "
                 "(message.max.bytes on the broker).",
                 show_line(F.col("capture"), ["Produce"], client_id=F.col("client_id"), errors=True))
    return near_f.unionByName(rej_f)


def acks(inp: Inputs, th: Thresholds) -> DataFrame:
    # One aggregation of the exchanges (one row per request, its topics an array of its own): a distinct
    # count of requests over the exploded batches shuffled every batch with its connection (5 CPU s of 200,000).
    topics = F.transform(F.coalesce("req_topic_data", F.array()), lambda t: F.coalesce(t["name"], t["topic_id"]))
    agg = (requests_of(facts.typed(inp.exchanges), frames.PRODUCE).where(F.col("req_acks").isin(0, 1))
           .groupBy("capture", "client_id", F.col("req_acks").alias("acks"))
           .agg(F.count(F.lit(1)).alias("requests"), F.collect_set(topics).alias("topics"),
                F.min("request_ts").alias("first_ts"), F.max("request_ts").alias("last_ts"))
           .withColumn("topics", F.sort_array(F.array_distinct(F.filter(F.flatten("topics"),
                                                                         lambda t: t.isNotNull())))))
    agg = agg.where(F.col("requests") >= th["min_requests"])
    zero = F.col("acks") == 0
    return emit(agg, "producer.acks", F.when(zero, "warning").otherwise("info"), "client", F.col("client_id"),
                {"acks": F.col("acks"), "produce_requests": F.col("requests"), "topics": F.col("topics")},
                F.when(zero, fmt("%s produces with acks=0 to %s: the broker never confirms a write, so lost "
                                 "records go unnoticed.", F.col("client_id"), F.array_join(F.col("topics"), ", ")))
                .otherwise(fmt("%s produces with acks=1 to %s: a write is confirmed before it is replicated, "
                               "so a leader failure can lose it.", F.col("client_id"),
                               F.array_join(F.col("topics"), ", "))),
                "Set acks=all (-1) with min.insync.replicas >= 2 on topics whose data matters.",
                show_line(F.col("capture"), ["Produce"], client_id=F.col("client_id")))


RESEND_KEY = ["capture", "client_id", "topic", "partition", "first_crc", "record_count", "total_bytes",
              "first_timestamp", "max_timestamp", "producer_id", "base_sequence"]


def resent_batches(inp: Inputs) -> DataFrame:
    """Batches sent more than once: same client, topic-partition, batch CRC, records, size and timestamps.

    Counted first, then only the batches sent twice or more are joined to their answers and listed: in a
    capture of hundreds of thousands of batches a few are re-sent, and a count is far cheaper than a list
    per batch. Key columns may be null (a legacy message set has no producer id): they match as the
    grouping does."""
    b = batches_of(inp).where(F.col("batch_count") > 0)
    twice = (b.groupBy(*RESEND_KEY).agg(F.count(F.lit(1)).alias("copies")).where(F.col("copies") >= 2)
             .drop("copies"))
    same = reduce(lambda a, c: a & c, [b[k].eqNullSafe(twice[k]) for k in RESEND_KEY])
    b = b.join(twice, same, "left_semi")
    out = _produce_outcomes(inp.partitions)
    b = b.join(out, ["capture", "connection", "correlation_id", "topic", "partition"], "left")
    return (b.groupBy(*RESEND_KEY)
            .agg(F.count(F.lit(1)).alias("copies"),
                 F.sort_array(F.collect_list(F.struct(
                     F.col("request_ts").alias("ts"), "connection", "correlation_id",
                     F.coalesce(F.col("outcome"), F.when(F.col("status") == "no_response", "no answer")
                                .otherwise(F.col("status"))).alias("outcome"),
                     "assigned_offset"))).alias("sends"),
                 F.min("request_ts").alias("first_ts"), F.max("request_ts").alias("last_ts")))


def _resent(inp: Inputs) -> DataFrame:
    """:func:`resent_batches` of the inputs: kept once for both rules (``findings.prepared``), else derived."""
    return inp.resent if inp.resent is not None else resent_batches(inp)


def duplicates(inp: Inputs, th: Thresholds) -> DataFrame:
    r = _resent(inp)
    # Not rejected: the broker accepted it (NONE) or its answer never came (it may well have written it).
    kept = F.size(F.filter("sends", lambda s: s["outcome"].isin("NONE", "no answer")))
    r = r.withColumn("kept", kept)
    idem = F.col("producer_id") >= 0
    hits = frames.where_lambda(r, idem | (F.col("kept") >= 2))
    return emit(hits, "producer.duplicates", F.when(idem, "info").otherwise("warning"), "topic_partition",
                tp(F.col("topic"), F.col("partition")),
                {"client_id": F.col("client_id"), "records": F.col("record_count"), "bytes": F.col("total_bytes"),
                 "copies": F.col("copies"), "producer_id": F.col("producer_id"),
                 "base_sequence": F.col("base_sequence"),
                 "sends": F.transform("sends", lambda s: F.struct(
                     F.date_format(s["ts"], "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").alias("ts"),
                     s["connection"].alias("connection"), s["correlation_id"].alias("correlation_id"),
                     s["outcome"].alias("outcome"), s["assigned_offset"].alias("assigned_offset")))},
                F.when(idem, fmt("%s re-sent a batch of %s record(s) to %s %s times; it is idempotent "
                                 "(producer id %s), so the broker keeps one copy.", F.col("client_id"),
                                 F.col("record_count"), tp(F.col("topic"), F.col("partition")), F.col("copies"),
                                 F.col("producer_id")))
                .otherwise(fmt("%s sent the same batch of %s record(s) to %s %s times without idempotence, "
                               "and no copy was rejected: the records are most likely stored twice.",
                               F.col("client_id"), F.col("record_count"), tp(F.col("topic"), F.col("partition")),
                               F.col("copies"))),
                F.when(idem, F.lit("Nothing to fix; retries (request.timeout.ms, delivery.timeout.ms) are "
                                   "harmless with enable.idempotence=true."))
                .otherwise(F.lit("Set enable.idempotence=true (needs acks=all) so retries cannot duplicate; "
                                 "check request.timeout.ms against the broker's response time.")),
                show_line(F.col("capture"), ["Produce"], client_id=F.col("client_id"), topic=F.col("topic")))


def not_idempotent(inp: Inputs, th: Thresholds) -> DataFrame:
    r = _resent(inp).where(F.col("producer_id") < 0)
    agg = (r.groupBy("capture", "client_id")
           .agg(F.count(F.lit(1)).alias("resent_batches"), F.sum(F.col("copies") - 1).alias("retries"),
                F.sort_array(F.collect_set(tp(F.col("topic"), F.col("partition")))).alias("partitions"),
                F.min("first_ts").alias("first_ts"), F.max("last_ts").alias("last_ts")))
    hits = agg.where(F.col("retries") >= th["min_retries"])
    return emit(hits, "producer.not_idempotent", "warning", "client", F.col("client_id"),
                {"producer_id": F.lit(-1), "resent_batches": F.col("resent_batches"), "retries": F.col("retries"),
                 "partitions": F.col("partitions")},
                fmt("%s retries Produce requests (%s batch(es) re-sent) without idempotence (producer id -1): "
                    "a retry after a lost answer writes the records twice.", F.col("client_id"),
                    F.col("resent_batches")),
                "Set enable.idempotence=true (with acks=all); librdkafka, kafka-python and aiokafka all "
                "support it against Kafka >= 0.11.",
                show_line(F.col("capture"), ["Produce", "InitProducerId"], client_id=F.col("client_id")))


RULES = (
    Rule("producer.tiny_batches", "one or two records per batch at a high request rate from one client",
         "produce_requests, requests_per_s, median_records_per_batch", "linger.ms, batch.size",
         tiny_batches, {"max_median_records_per_batch": 2, "min_requests_per_s": 10, "min_requests": 20,
                        "min_records": 100},
         applies=uses(frames.PRODUCE)),
    Rule("producer.uncompressed", "uncompressed record batches on a topic carrying a lot of data",
         "produced_bytes, uncompressed_bytes, uncompressed_share, uncompressed_bytes_per_s, producers",
         "compression.type", uncompressed,
         {"min_bytes": 32768, "min_bytes_per_s": 16384, "min_uncompressed_share": 0.5},
         applies=uses(frames.PRODUCE)),
    Rule("producer.large_batches", "batches close to the size limit (warning) or rejected as too large "
         "(MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE: critical)", "batches_near_limit, largest_batch_bytes, errors",
         "batch.size, max.request.size, max.message.bytes", large_batches, {"near_limit_bytes": 943718},
         "warning, critical",
         applies=uses(frames.PRODUCE)),
    Rule("producer.acks", "producers using acks=0 (warning) or acks=1 (info), and to which topics",
         "acks, produce_requests, topics", "acks, min.insync.replicas", acks, {"min_requests": 1}, "warning, info",
         applies=uses(frames.PRODUCE)),
    Rule("producer.not_idempotent", "a producer without idempotence (producer id -1) that retries batches",
         "resent_batches, retries, partitions", "enable.idempotence", not_idempotent, {"min_retries": 1},
         applies=uses(frames.PRODUCE)),
    Rule("producer.duplicates", "the same batch sent twice and not rejected: non-idempotent (warning), "
         "idempotent and de-duplicated by the broker (info)", "client_id, records, copies, sends (ts, "
         "connection, correlation_id, outcome, assigned_offset)", "enable.idempotence, request.timeout.ms",
         duplicates, {}, "warning, info",
         applies=uses(frames.PRODUCE)),
)
