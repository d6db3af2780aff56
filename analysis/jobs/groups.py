"""Consumer groups: the rebalance timeline, who was in each generation with what, and committed offsets.

Read from the ``request``/``response`` JSON of JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and OffsetCommit (classic protocol) and
ConsumerGroupHeartbeat (KIP-848).

A **rebalance** is one generation of a group, classic or KIP-848, as
:func:`analysis.derived.generations` defines it (the findings' group rules read the
same rows). ``reason`` is the first JoinGroup ``reason`` (v8+), else the first
LeaveGroup member reason (v5+) seen since the previous generation; ``errors`` are
the error names the group's requests met between the previous generation's end
and this one's (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ...).
``members_joined``/``members_left`` compare client ids with the previous
generation: a member killed without LeaveGroup shows as left after its session
timed out.

Tables: ``rebalances``, ``group_members``, ``offset_commits``.

Usage::

    python -m analysis groups DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/groups.py DATASET [--out DIR]
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

REBALANCE = ["group_id", "generation_id", "protocol", "members", "member_client_ids", "start_ts", "end_ts",
             "duration_ms", "reason", "errors", "members_joined", "members_left"]


def generation_spans(gx: DataFrame) -> DataFrame:
    """Every generation (:func:`analysis.derived.generations`) of the group exchanges ``gx``
    (:func:`analysis.derived.group_exchanges`), with the end and the member client ids of the group's
    generation before it."""
    gens = derived.generations(gx)
    order = Window.partitionBy("group_id").orderBy("start_ts", "generation_id")
    return (gens.withColumn("prev_end", F.lag("end_ts").over(order))
            .withColumn("prev_clients", F.lag("member_client_ids").over(order)))


def rebalances(exchanges: DataFrame, gx: DataFrame | None = None, gens: DataFrame | None = None) -> DataFrame:
    """The rebalance timeline: one row per group generation, with reason, errors and membership change.

    ``gx`` (:func:`analysis.derived.group_exchanges`) and ``gens`` (:func:`generation_spans`) are derived
    unless given:
    :func:`tables` keeps them, as the query reads the generations three times."""
    gx = derived.group_exchanges(exchanges) if gx is None else gx
    gens = generation_spans(gx) if gens is None else gens
    ts = F.coalesce("response_ts", "request_ts")
    errs = (gx.where(frames.failed()).select("group_id", ts.alias("ts"), "error_name"))
    leaves = (gx.where(derived.api(frames.LEAVE_GROUP))
              .select("group_id", F.col("request_ts").alias("ts"),
                      F.coalesce(F.col("req_reason"), F.col("req_members")[0]["reason"]).alias("reason"))
              .where(F.col("reason").isNotNull()))
    in_span = ((F.col("e.group_id") == F.col("g.group_id"))
               & (F.col("e.ts") <= F.col("g.end_ts"))
               & (F.col("g.prev_end").isNull() | (F.col("e.ts") > F.col("g.prev_end"))))
    keys = [F.col("g.group_id"), F.col("g.generation_id")]
    err_lists = (gens.alias("g").join(errs.alias("e"), in_span)
                 .groupBy(*keys).agg(F.array_sort(F.collect_set("e.error_name")).alias("errors")))
    leave_reasons = (gens.alias("g").join(leaves.alias("e"), in_span)
                     .groupBy(*keys).agg(F.min_by("e.reason", "e.ts").alias("leave_reason")))
    empty = F.array().cast("array<string>")
    return (gens.join(err_lists, ["group_id", "generation_id"], "left")
            .join(leave_reasons, ["group_id", "generation_id"], "left")
            .select("group_id", "generation_id", "protocol", "members", "member_client_ids", "start_ts", "end_ts",
                    "duration_ms",
                    F.coalesce("join_reason", "leave_reason").alias("reason"),
                    F.coalesce("errors", empty).alias("errors"),
                    F.when(F.col("prev_clients").isNull(), empty)
                     .otherwise(F.array_except("member_client_ids", "prev_clients")).alias("members_joined"),
                    F.when(F.col("prev_clients").isNull(), empty)
                     .otherwise(F.array_except("prev_clients", "member_client_ids")).alias("members_left")))


def _partition_names(parts: Column) -> Column:
    """[{topic, partitions:[0,1]}] -> ["topic-0", "topic-1"], sorted; null when not decoded."""
    named = F.transform(parts, lambda t: F.transform(
        t["partitions"], lambda p: F.concat(F.coalesce(t["topic"], t["topic_id"]), F.lit("-"), p.cast("string"))))
    return F.array_sort(F.flatten(named))


def topic_names(partitions: DataFrame) -> DataFrame:
    """One row, ``topic_names``: topic id -> the name the capture's Metadata responses gave it."""
    names = (partitions.where(F.col("topic").isNotNull() & F.col("topic_id").isNotNull())
             .groupBy("topic_id").agg(F.max("topic").alias("topic")))
    return names.agg(F.map_from_entries(F.collect_list(F.struct("topic_id", "topic"))).alias("topic_names"))


def group_members(exchanges: DataFrame, partitions: DataFrame | None = None, gx: DataFrame | None = None) -> DataFrame:
    """Per group, generation and member: its client id and, where the consumer protocol was decoded,
    the partitions its SyncGroup (or KIP-848 heartbeat) response assigned it (KIP-848 topic ids are
    named from ``partitions`` when given; ``gx`` is :func:`analysis.derived.group_exchanges`, derived
    unless given)."""
    gx = derived.group_exchanges(exchanges) if gx is None else gx
    members = (derived.joins(gx).where(F.col("generation_id").isNotNull())
               .groupBy("group_id", "generation_id", "member_id").agg(F.max("client_id").alias("client_id")))
    sync = (gx.where(derived.api(frames.SYNC_GROUP) & (F.col("error_code") == 0))
            .select("group_id", F.col("req_generation_id").alias("generation_id"),
                    F.col("req_member_id").alias("member_id"), "response_ts",
                    _partition_names(F.col("resp_assignment")["assigned_partitions"]).alias("assigned_partitions")))
    latest = (sync.groupBy("group_id", "generation_id", "member_id")
              .agg(F.max_by("assigned_partitions", "response_ts").alias("assigned_partitions")))
    classic = members.join(latest, ["group_id", "generation_id", "member_id"], "left")
    hb = (derived.kip848_heartbeats(gx)
          .select("group_id", "generation_id", "member_id", "client_id", "response_ts",
                  F.col("assignment")["topic_partitions"].alias("parts")))
    if partitions is not None:  # KIP-848 assignments name topics by id
        named = F.transform("parts", lambda t: t.withField(
            "topic", F.coalesce(t["topic"], F.col("topic_names")[t["topic_id"]])))
        hb = hb.crossJoin(topic_names(partitions)).withColumn("parts", named).drop("topic_names")
    hb = (hb.withColumn("assigned_partitions", _partition_names(F.col("parts")))
          .groupBy("group_id", "generation_id", "member_id")
          .agg(F.max("client_id").alias("client_id"),
               F.max_by("assigned_partitions", F.when(F.col("assigned_partitions").isNotNull(),
                                                      F.col("response_ts"))).alias("assigned_partitions")))
    cols = ["group_id", "generation_id", "member_id", "client_id", "assigned_partitions"]
    return classic.select(*cols).unionByName(hb.select(*cols))


def offset_commits(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Every committed offset (OffsetCommit, TxnOffsetCommit) per group and partition, with the broker's answer."""
    commit = derived.api(frames.OFFSET_COMMIT, frames.TXN_OFFSET_COMMIT)
    req = (partitions.where(commit & (F.col("direction") == "request"))
           .select(*frames.KEYS, "api_name", frames.topic().alias("topic"), "partition",
                   F.col("offset").alias("committed_offset"), "ts"))
    resp = (partitions.where(commit & (F.col("direction") == "response"))
            .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "error_name"))
    who = (facts.typed(exchanges).where(commit)
           .select(*frames.KEYS, F.col("req_group_id").alias("group_id"), "client_id"))
    return (req.join(resp, [*frames.KEYS, "topic", "partition"], "left").join(who, frames.KEYS, "left")
            .select("group_id", "topic", "partition", "committed_offset", "ts", "client_id", "api_name",
                    "error_name", (F.col("error_name") == "NONE").alias("accepted")))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    gx = ds.keep(derived.group_exchanges(ds.exchanges))
    gens = ds.keep(generation_spans(gx))
    commits = (frames.OFFSET_COMMIT, frames.TXN_OFFSET_COMMIT)
    return {
        "rebalances": needs(opts, frames.ordered(rebalances(ds.exchanges, gx, gens), "group_id", "start_ts",
                                                        "generation_id"), *derived.GROUP_APIS),
        "group_members": needs(opts, frames.ordered(group_members(ds.exchanges, ds.partitions, gx),
                                                           "group_id", "generation_id", "client_id", "member_id"),
                                      *derived.GROUP_APIS),
        "offset_commits": needs(opts, frames.ordered(offset_commits(ds.exchanges, ds.partitions), "group_id",
                                                            "topic", "partition", "ts", "client_id",
                                                            "committed_offset"), *commits),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("groups", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
