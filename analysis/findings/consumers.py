"""Consumer rules: committing per message, busy polling, growing lag."""

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
    parts_with_client,
    per_second,
    requests_of,
    rounded,
    show_line,
    tp,
    uses,
)


def commit_per_message(inp: Inputs, th: Thresholds) -> DataFrame:
    ex = inp.exchanges.select("capture", "connection", "correlation_id", F.col("req_group_id").alias("group_id"))
    commits = (inp.partitions.where(derived.api(frames.OFFSET_COMMIT) & (F.col("direction") == "request"))
               .join(ex, ["capture", "connection", "correlation_id"]))
    step = F.col("offset") - F.lag("offset").over(
        Window.partitionBy("capture", "group_id", "topic", "partition").orderBy("ts"))
    commits = commits.withColumn("step", step)
    per_tp = (commits.groupBy("capture", "group_id", "topic", "partition")
              .agg(F.count(F.lit(1)).alias("commits"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
                   frames.percentile("step", 0.5).alias("median_step"),
                   F.sort_array(F.collect_set("client_id")).alias("clients")))
    # Fetches of the same partition by the committing clients that brought records.
    fetched = (parts_with_client(inp)
               .where(derived.api(frames.FETCH) & (F.col("direction") == "response")
                      & (F.col("record_count") > 0))
               .groupBy("capture", "client_id", "topic", "partition")
               .agg(F.count(F.lit(1)).alias("fetches"), F.sum("record_count").alias("records")))
    members = per_tp.select("capture", "group_id", "topic", "partition", F.explode("clients").alias("client_id"))
    fetch_per_tp = (members.join(fetched, ["capture", "client_id", "topic", "partition"])
                    .groupBy("capture", "group_id", "topic", "partition")
                    .agg(F.sum("fetches").alias("fetches"), F.sum("records").alias("records")))
    agg = (per_tp.join(fetch_per_tp, ["capture", "group_id", "topic", "partition"], "left")
           .withColumn("fetches", F.coalesce("fetches", F.lit(0)))
           .withColumn("rate", per_second(F.col("commits"), F.col("first_ts"), F.col("last_ts"))))
    often = ((F.col("commits") >= th["min_fetch_ratio"] * F.col("fetches"))
             | (F.col("median_step") <= th["max_records_per_commit"]))
    hits = agg.where((F.col("commits") >= th["min_commits"]) & (F.col("rate") >= th["min_commits_per_s"]) & often)
    part = tp(F.col("topic"), F.col("partition"))
    return emit(hits, "consumer.commit_per_message", "warning", "group_partition",
                F.concat_ws(" ", F.col("group_id"), part),
                {"group_id": F.col("group_id"), "topic_partition": part, "commits": F.col("commits"),
                 "commits_per_s": rounded(F.col("rate")), "fetches_with_records": F.col("fetches"),
                 "records_fetched": F.col("records"), "median_offset_step": F.col("median_step"),
                 "clients": F.col("clients")},
                fmt("Group %s committed %s %s times (%s/s), %s record(s) apart (median), against %s fetch(es) "
                    "bringing records: it commits after every message.", F.col("group_id"), part,
                    F.col("commits"), rounded(F.col("rate"), 1), F.col("median_step"), F.col("fetches")),
                "Commit per poll or on a timer: enable.auto.commit with auto.commit.interval.ms, or commit "
                "asynchronously after each batch; every commit is a write to __consumer_offsets.",
                show_line(F.col("capture"), ["OffsetCommit"], client_id=F.element_at("clients", 1),
                          topic=F.col("topic")))


def _fetches(inp: Inputs) -> DataFrame:
    """Fetch exchanges with their wait settings and the records their response carried."""
    got = (inp.partitions.where(derived.api(frames.FETCH) & (F.col("direction") == "response"))
           .groupBy("capture", "connection", "correlation_id")
           .agg(F.sum(F.coalesce("record_count", F.lit(0))).alias("records")))
    ex = (requests_of(inp.exchanges, frames.FETCH).where(F.col("response_ts").isNotNull())
          .select("capture", "connection", "correlation_id", "client_id", "request_ts", "response_ts",
                  derived.broker().alias("broker"),
                  F.col("req_max_wait_ms").cast("int").alias("max_wait_ms"),
                  F.col("req_min_bytes").cast("int").alias("min_bytes")))
    return ex.join(got, ["capture", "connection", "correlation_id"], "left").withColumn(
        "records", F.coalesce("records", F.lit(0)))


def busy_polling(inp: Inputs, th: Thresholds) -> DataFrame:
    empty = _fetches(inp).where(F.col("records") == 0)
    agg = (empty.groupBy("capture", "client_id", "broker")
           .agg(F.count(F.lit(1)).alias("empty"), F.min("request_ts").alias("first_ts"),
                F.max("request_ts").alias("last_ts"),
                frames.percentile("max_wait_ms", 0.5).alias("max_wait_ms"),
                frames.percentile("min_bytes", 0.5).alias("min_bytes")))
    agg = agg.withColumn("rate", per_second(F.col("empty"), F.col("first_ts"), F.col("last_ts")))
    tiny_wait = (F.col("max_wait_ms") <= th["max_wait_ms"]) & (F.col("rate") >= th["min_empty_per_s"])
    spinning = (F.col("min_bytes") <= 1) & (F.col("rate") >= th["high_empty_per_s"])
    hits = agg.where((F.col("empty") >= th["min_empty_fetches"]) & (tiny_wait | spinning))
    return emit(hits, "consumer.busy_polling", "warning", "client", F.col("client_id"),
                {"broker": F.col("broker"), "empty_fetches": F.col("empty"), "empty_per_s": rounded(F.col("rate")),
                 "max_wait_ms": F.col("max_wait_ms"), "min_bytes": F.col("min_bytes")},
                fmt("%s received %s empty Fetch responses from %s (%s/s) asking max_wait_ms=%s, min_bytes=%s: "
                    "it spins instead of letting the broker wait for data.", F.col("client_id"), F.col("empty"),
                    F.col("broker"), rounded(F.col("rate"), 1), F.col("max_wait_ms"), F.col("min_bytes")),
                "Raise fetch.wait.max.ms / fetch.max.wait.ms (default 500) and consider fetch.min.bytes "
                "so idle consumers do not hammer the broker.",
                show_line(F.col("capture"), ["Fetch"], client_id=F.col("client_id")))


def lag_growing(inp: Inputs, th: Thresholds) -> DataFrame:
    # Lag samples by the one rule (analysis.derived.lag_samples): consumers' fetches only, from the offset
    # each asked for to the high watermark its answer gave.
    lag = (derived.lag_samples(inp.exchanges, inp.partitions)
           .withColumn("t", frames.epoch_seconds("ts")))
    agg = (lag.groupBy("capture", "client_id", "topic", "partition")
           .agg(F.count(F.lit(1)).alias("samples"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
                F.min_by("lag", "ts").alias("first_lag"), F.max_by("lag", "ts").alias("last_lag"),
                F.max("lag").alias("max_lag"), F.covar_pop("t", "lag").alias("covar"), F.var_pop("t").alias("var"))
           # Every sample at one instant has no slope (null), not an error.
           .withColumn("slope", F.when(F.col("var") != 0, F.col("covar") / F.col("var"))))
    hits = agg.where((F.col("samples") >= th["min_samples"]) & (F.col("slope") > 0)
                     & (F.col("last_lag") - F.col("first_lag") >= th["min_growth_records"]))
    # The lag it is left with is the consumer_lag table's for the client's group (or the client alone).
    now = derived.lag_of_client(inp.exchanges, inp.partitions).select(
        F.col("client_id").alias("lag_client"), F.col("topic").alias("lag_topic"),
        F.col("partition").alias("lag_partition"), "group_id", "lag", "lag_from")
    same = (F.col("client_id").eqNullSafe(F.col("lag_client")) & F.col("topic").eqNullSafe(F.col("lag_topic"))
            & (F.col("partition") == F.col("lag_partition")))
    hits = hits.join(now, same, "left")
    part = tp(F.col("topic"), F.col("partition"))
    return emit(hits, "consumer.lag_growing", "warning", "topic_partition", part,
                {"client_id": F.col("client_id"), "first_lag": F.col("first_lag"), "last_lag": F.col("last_lag"),
                 "max_lag": F.col("max_lag"), "growth_per_s": rounded(F.col("slope")), "samples": F.col("samples"),
                 "group_id": F.col("group_id"), "lag": F.col("lag"), "lag_from": F.col("lag_from")},
                fmt("%s falls behind on %s: lag grew from %s to %s records (%s/s) over the capture.",
                    F.col("client_id"), part, F.col("first_lag"), F.col("last_lag"), rounded(F.col("slope"), 1)),
                "Add consumers (up to the partition count) or speed up processing; check max.poll.records, "
                "fetch.max.bytes / max.partition.fetch.bytes.",
                show_line(F.col("capture"), ["Fetch"], client_id=F.col("client_id"), topic=F.col("topic")))


RULES = (
    Rule("consumer.commit_per_message", "OffsetCommit per group-partition about as often as fetches "
         "bringing records, or one commit per record or two, at a high rate", "commits, commits_per_s, "
         "fetches_with_records, records_fetched, median_offset_step", "enable.auto.commit, "
         "auto.commit.interval.ms", commit_per_message,
         {"min_commits": 10, "min_commits_per_s": 1.0, "min_fetch_ratio": 0.5, "max_records_per_commit": 2},
         applies=uses(frames.OFFSET_COMMIT)),
    Rule("consumer.busy_polling", "empty Fetch responses with a tiny max_wait_ms, or with min_bytes 1 at a "
         "high rate", "empty_fetches, empty_per_s, max_wait_ms, min_bytes", "fetch.wait.max.ms / "
         "fetch.max.wait.ms, fetch.min.bytes", busy_polling,
         {"min_empty_fetches": 50, "max_wait_ms": 10, "min_empty_per_s": 5, "high_empty_per_s": 50},
         applies=uses(frames.FETCH)),
    Rule("consumer.lag_growing", "lag (high watermark minus fetch position) that grows over the capture",
         "first_lag, last_lag, max_lag, growth_per_s, lag (as consumer_lag has it)", "consumer count, max.poll.records, fetch sizes",
         lag_growing, {"min_samples": 10, "min_growth_records": 1000},
         applies=uses(frames.FETCH)),
)
