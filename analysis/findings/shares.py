"""Share group rules (KIP-932): poison records, acquisition locks that run out, share session churn, a
member that acquires far more than the others.

Each reads the derivation the share tables are made of (:mod:`analysis.derived`): the acquired ranges and
acknowledgements of ``share_deliveries``, the unacknowledged runs of ``share_in_flight``, the errors of
``share_session_errors``. A finding and its table cannot disagree.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from analysis import derived, frames
from analysis.findings.core import Inputs, Rule, Thresholds, emit, fmt, rounded, show_line, tp, uses

_SHOW = ["ShareFetch", "ShareAcknowledge"]
_LIST = 20  # offsets named in a finding's evidence at most


def _offsets(values: Column) -> Column:
    """The first :data:`_LIST` of a sorted array of offsets."""
    return F.slice(F.array_sort(values), 1, _LIST)


def poison_records(inp: Inputs, th: Thresholds) -> DataFrame:
    """Records rejected by a member, or delivered ``min_delivery_count`` times or more."""
    acks = derived.share_acknowledgements(inp.exchanges, inp.partitions)
    rejected = (acks.where(F.col("ack_type") == "REJECT")
                .select("capture", *derived.SHARE_KEYS, "client_id", "ts",
                        F.explode(F.sequence("first_offset", "last_offset")).alias("offset"),
                        F.lit(None).cast("int").alias("delivery_count")))
    again = (derived.share_acquisitions(inp.exchanges, inp.partitions)
             .where(F.col("delivery_count") >= th["min_delivery_count"])
             .select("capture", *derived.SHARE_KEYS, "client_id", "ts",
                     F.explode(F.sequence("first_offset", "last_offset")).alias("offset"), "delivery_count"))
    agg = (rejected.unionByName(again).groupBy(*derived.SHARE_KEYS)
           .agg(F.min_by("capture", "ts").alias("capture"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
                _offsets(F.collect_set(F.when(F.col("delivery_count").isNull(), F.col("offset")))).alias("rejected"),
                F.countDistinct(F.when(F.col("delivery_count").isNull(), F.col("offset"))).alias("rejected_records"),
                _offsets(F.collect_set(F.when(F.col("delivery_count").isNotNull(), F.col("offset"))))
                .alias("redelivered"),
                F.max("delivery_count").alias("max_delivery_count"),
                F.array_sort(F.collect_set("client_id")).alias("clients")))
    part = tp(F.col("topic"), F.col("partition"))
    return emit(agg, "share.poison_records", "warning", "group_partition", F.concat_ws(" ", "group_id", part),
                {"group_id": F.col("group_id"), "topic_partition": part, "rejected_offsets": F.col("rejected"),
                 "rejected_records": F.col("rejected_records"), "redelivered_offsets": F.col("redelivered"),
                 "max_delivery_count": F.col("max_delivery_count"), "clients": F.col("clients")},
                fmt("Share group %s, %s: %s, by %s: records the consumers cannot process.",
                    F.col("group_id"), part, F.concat_ws("; ", F.when(F.col("rejected_records") > 0, fmt(
                        "%s record(s) rejected (offsets %s)", F.col("rejected_records"),
                        F.array_join("rejected", ","))),
                        F.when(F.size("redelivered") > 0, fmt(
                            "records at offsets %s delivered up to %s times", F.array_join("redelivered", ","),
                            F.col("max_delivery_count")))),
                    F.array_join("clients", ", ")),
                "Find what the consumer fails on in those records (a REJECT archives them; a RELEASE sends them "
                "round again until group.share.delivery.count.limit, 5 by default, archives them); keep them "
                "aside (a dead-letter topic) rather than releasing them again.",
                show_line(F.col("capture"), _SHOW, client_id=F.element_at("clients", 1), topic=F.col("topic")))


def lock_expired(inp: Inputs, th: Thresholds) -> DataFrame:
    """Records a member acquired and never acknowledged, delivered again after their lock ran out."""
    runs = derived.share_unacknowledged(inp.exchanges, inp.partitions).where(F.col("state") == "lock_expired")
    agg = (runs.groupBy(*derived.SHARE_KEYS, "client_id")
           .agg(F.min_by("capture", "acquired_ts").alias("capture"), F.min("acquired_ts").alias("first_ts"),
                F.max("next_ts").alias("last_ts"), F.sum("records").alias("records"),
                F.array_sort(F.collect_list(F.concat(F.col("first_offset").cast("string"), F.lit("-"),
                                                     F.col("last_offset").cast("string")))).alias("offsets"),
                F.array_sort(F.collect_set("next_client_id")).alias("delivered_to"),
                F.max(frames.millis_between("acquired_ts", "lock_expires_ts")).cast("long").alias("lock_ms")))
    hits = agg.where(F.col("records") >= th["min_records"])
    part = tp(F.col("topic"), F.col("partition"))
    return emit(hits, "share.lock_expired", "warning", "client", F.col("client_id"),
                {"group_id": F.col("group_id"), "topic_partition": part, "records": F.col("records"),
                 "offsets": F.col("offsets"), "lock_ms": F.col("lock_ms"),
                 "delivered_to": F.col("delivered_to")},
                fmt("%s (share group %s) acquired %s record(s) of %s (offsets %s) and never acknowledged them: "
                    "their %s ms acquisition lock ran out and they were delivered again, to %s.",
                    F.col("client_id"), F.col("group_id"), F.col("records"), part, F.array_join("offsets", ", "),
                    F.col("lock_ms"), F.array_join("delivered_to", ", ")),
                "Acknowledge each record within the lock (group.share.record.lock.duration.ms, 30 s by default): "
                "poll fewer records at once (max.poll.records) or process them faster; a consumer that stalls "
                "holds them until the lock runs out.",
                show_line(F.col("capture"), _SHOW, client_id=F.col("client_id"), topic=F.col("topic")))


def session_churn(inp: Inputs, th: Thresholds) -> DataFrame:
    """ShareFetch/ShareAcknowledge answers that say the member's share session is gone or out of step."""
    errs = (derived.share_session_errors(inp.exchanges, inp.partitions)
            .where(F.col("error").isin(*derived.SHARE_SESSION_ERRORS)))
    agg = (errs.groupBy("group_id", "client_id")
           .agg(F.sum("count").alias("errors"), F.min_by("capture", "first_ts").alias("capture"),
                F.min("first_ts").alias("first_ts"), F.max("last_ts").alias("last_ts"),
                F.array_sort(F.collect_set("error")).alias("error_names"),
                F.array_sort(F.collect_set("broker")).alias("brokers"),
                F.array_sort(F.collect_set("api_name")).alias("apis")))
    hits = agg.where(F.col("errors") >= th["min_errors"])
    return emit(hits, "share.session_churn", "warning", "client", F.col("client_id"),
                {"group_id": F.col("group_id"), "errors": F.col("errors"), "error_names": F.col("error_names"),
                 "brokers": F.col("brokers"), "apis": F.col("apis")},
                fmt("%s (share group %s) got %s share session error(s) (%s) from %s: each time the broker held "
                    "no share session for it at that epoch, so the request's acknowledgements were not applied "
                    "and the client had to open a new session.",
                    F.col("client_id"), F.col("group_id"), F.col("errors"), F.array_join("error_names", ", "),
                    F.array_join("brokers", ", ")),
                "Look for what resets sessions: reconnects (connections.max.idle.ms, network), a client leaving and "
                "rejoining, or the broker's share session cache (group.share.max.share.sessions); "
                "SHARE_SESSION_NOT_FOUND after a leave (epoch -1) is the client closing a session already gone.",
                show_line(F.col("capture"), _SHOW, client_id=F.col("client_id"), errors=True))


def unbalanced(inp: Inputs, th: Thresholds) -> DataFrame:
    """A member that acquired ``min_ratio`` times or more the mean of the group's other members."""
    per = (derived.share_deliveries(inp.exchanges, inp.partitions)
           .groupBy("group_id", "client_id")
           .agg(F.sum("acquired").alias("acquired"), F.min("first_ts").alias("first_ts"),
                F.max("last_ts").alias("last_ts")))
    group = (per.groupBy("group_id")
             .agg(F.sum("acquired").alias("total"), F.count(F.lit(1)).alias("members"),
                  F.array_sort(F.collect_list(F.concat("client_id", F.lit("="), F.col("acquired").cast("string"))))
                  .alias("by_client")))
    caps = (derived.share_acquisitions(inp.exchanges, inp.partitions).groupBy("group_id", "client_id")
            .agg(F.min_by("capture", "ts").alias("capture")))
    m = (per.join(group, "group_id").join(caps, ["group_id", "client_id"], "left")
         .withColumn("others_mean", (F.col("total") - F.col("acquired")) / (F.col("members") - 1)))
    hits = m.where((F.col("members") >= 2) & (F.col("acquired") >= th["min_records"])
                   & (F.col("acquired") >= th["min_ratio"] * F.col("others_mean")))
    return emit(hits, "share.unbalanced", "info", "client", F.col("client_id"),
                {"group_id": F.col("group_id"), "acquired": F.col("acquired"),
                 "others_mean": rounded(F.col("others_mean"), 1), "by_client": F.col("by_client")},
                fmt("%s acquired %s record(s) of share group %s, %s times the mean of its %s other member(s) "
                    "(%s): the work is not spread.", F.col("client_id"), F.col("acquired"), F.col("group_id"),
                    rounded(F.col("acquired") / F.greatest(F.col("others_mean"), F.lit(1e-9)), 1),
                    F.col("members") - 1, F.array_join("by_client", ", ")),
                "Check the partition assignment (share_groups: a member with more partitions, or alone on the "
                "busy ones), the other members' max.poll.records and fetch sizes, and members that stall or "
                "leave (their records go to whoever stays).",
                show_line(F.col("capture"), ["ShareFetch"], client_id=F.col("client_id")))


_APPLIES = uses(frames.SHARE_FETCH, frames.SHARE_ACKNOWLEDGE)

RULES = (
    Rule("share.poison_records", "share group records rejected, or delivered again and again (delivery count "
         "at a threshold)", "rejected_offsets, rejected_records, redelivered_offsets, max_delivery_count, clients",
         "group.share.delivery.count.limit, the consumer's processing of those records", poison_records,
         {"min_delivery_count": 3}, applies=_APPLIES),
    Rule("share.lock_expired", "records a share consumer acquired and never acknowledged, delivered again after "
         "their acquisition lock ran out", "records, offsets, lock_ms, delivered_to",
         "group.share.record.lock.duration.ms, max.poll.records", lock_expired, {"min_records": 1},
         applies=_APPLIES),
    Rule("share.session_churn", "share session errors (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, "
         "SHARE_SESSION_LIMIT_REACHED) per client", "errors, error_names, brokers, apis",
         "connections.max.idle.ms, group.share.max.share.sessions", session_churn, {"min_errors": 5},
         applies=_APPLIES),
    Rule("share.unbalanced", "a share group member acquiring far more records than the others' mean",
         "acquired, others_mean, by_client", "partition assignment, max.poll.records", unbalanced,
         {"min_ratio": 3.0, "min_records": 20}, severity="info", applies=_APPLIES),
)
