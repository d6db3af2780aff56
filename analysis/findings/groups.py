"""Consumer group rules: rebalance storms, long rebalances, members evicted by session or poll timeouts.

Members are read from the group apis themselves (JoinGroup, SyncGroup, Heartbeat,
OffsetCommit, LeaveGroup); the generations are :func:`analysis.derived.generations`,
the very rows of the ``rebalances`` table.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis import derived, facts, frames
from analysis.findings.core import Inputs, Rule, Thresholds, emit, fmt, requests_of, rounded, show_line, uses

# The classic protocol's member requests, which the member rules follow.
GROUP_APIS = (frames.JOIN_GROUP, frames.SYNC_GROUP, frames.HEARTBEAT, frames.OFFSET_COMMIT, frames.LEAVE_GROUP)
# What a generation is formed from (analysis.derived.generations).
GENERATION_APIS = (frames.JOIN_GROUP, frames.SYNC_GROUP, frames.CONSUMER_GROUP_HEARTBEAT)
EVICTED = ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION")
_SHOW_APIS = ["JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"]
KIP848 = "consumer (KIP-848)"   # a KIP-848 generation's protocol (analysis.derived.kip848_generations)


def _show_generations(classic: list[str]) -> Column:
    """The show line of a group's generations: its ConsumerGroupHeartbeats for a KIP-848 group, else ``classic``."""
    return F.when(F.col("protocol") == KIP848, show_line(F.col("capture"), ["ConsumerGroupHeartbeat"]))\
        .otherwise(show_line(F.col("capture"), classic))


def group_requests(exchanges: DataFrame) -> DataFrame:
    """Group api exchanges with group id, member id (a JoinGroup's from its answer), generation and timeouts."""
    req = requests_of(facts.typed(exchanges), *GROUP_APIS)
    member = F.when(derived.api(frames.JOIN_GROUP),
                    F.coalesce(F.nullif(F.col("resp_member_id"), F.lit("")), F.col("req_member_id")))\
        .when(derived.api(frames.LEAVE_GROUP),
              F.coalesce(F.col("req_member_id"), F.col("req_members")[0]["member_id"]))\
        .otherwise(F.col("req_member_id"))
    generation = F.when(derived.api(frames.JOIN_GROUP), F.col("resp_generation_id"))\
        .otherwise(F.col("req_generation_id"))
    return req.select(
        "capture", "connection", "correlation_id", "client_id", "api_key", "api_name", "api_version", "request_ts",
        "response_ts",
        "error_name", F.col("status"),
        F.col("req_group_id").alias("group_id"),
        member.alias("member_id"),
        generation.alias("generation_id"),
        F.col("req_session_timeout_ms").alias("session_timeout_ms"),
        F.col("req_rebalance_timeout_ms").alias("rebalance_timeout_ms"))


def requests(inp: Inputs) -> DataFrame:
    """:func:`group_requests` of the inputs: kept once for every group rule (``findings.prepared``), else derived."""
    return inp.group_requests if inp.group_requests is not None else group_requests(inp.exchanges)


def generations_of(inp: Inputs) -> DataFrame:
    """The groups' generations (:func:`analysis.derived.generations`, the ``rebalances`` table's rows): kept
    once (``findings.prepared``), else derived."""
    if inp.generations is not None:
        return inp.generations
    return derived.generations(derived.group_exchanges(inp.exchanges))


def rebalance_storm(inp: Inputs, th: Thresholds) -> DataFrame:
    gens = generations_of(inp)
    # A group's generations are the group's, whichever captures saw them: shown from the first one's capture.
    agg = (gens.groupBy("group_id")
           .agg(F.count(F.lit(1)).alias("rebalances"), F.min("start_ts").alias("first_ts"),
                F.max("end_ts").alias("last_ts"), F.sort_array(F.collect_set("generation_id")).alias("generations"),
                F.min_by("capture", F.struct("start_ts", "generation_id")).alias("capture"),
                F.max("protocol").alias("protocol")))
    span_h = F.greatest(frames.seconds_between("first_ts", "last_ts"), F.lit(60.0)) / 3600
    agg = agg.withColumn("per_hour", F.col("rebalances") / span_h)
    hits = agg.where((F.col("rebalances") >= th["min_rebalances"]) & (F.col("per_hour") > th["max_per_hour"]))
    return emit(hits, "group.rebalance_storm", "warning", "group", F.col("group_id"),
                {"rebalances": F.col("rebalances"), "per_hour": rounded(F.col("per_hour"), 1),
                 "generations": F.col("generations")},
                fmt("Group %s rebalanced %s times (%s per hour): each rebalance stops consumption.",
                    F.col("group_id"), F.col("rebalances"), rounded(F.col("per_hour"), 0)),
                "Find why members leave and rejoin (see group.session_timeout / group.poll_timeout); consider "
                "static membership (group.instance.id) and the cooperative-sticky assignor.",
                _show_generations(_SHOW_APIS))


def long_rebalance(inp: Inputs, th: Thresholds) -> DataFrame:
    gens = generations_of(inp).where(F.col("duration_ms") >= th["min_duration_ms"])
    return emit(gens, "group.long_rebalance", "warning", "group", F.col("group_id"),
                {"generation_id": F.col("generation_id"), "duration_ms": rounded(F.col("duration_ms"), 1),
                 "members": F.col("members"), "clients": F.col("member_client_ids")},
                fmt("Group %s took %s s to form generation %s (%s member(s)): consumption was stopped meanwhile.",
                    F.col("group_id"), rounded(F.col("duration_ms") / 1000, 1), F.col("generation_id"),
                    F.col("members")),
                "Check max.poll.interval.ms (the rebalance timeout: slow members delay everyone), "
                "group.initial.rebalance.delay.ms, and consider the cooperative-sticky assignor.",
                _show_generations(["JoinGroup", "SyncGroup"]),
                first_ts=F.col("start_ts"), last_ts=F.col("end_ts"))


def _member_timeline(g: DataFrame) -> DataFrame:
    g = g.where(F.col("member_id").isNotNull() & (F.col("member_id") != ""))
    w = Window.partitionBy("capture", "group_id", "member_id").orderBy("request_ts", "correlation_id")
    session = F.max("session_timeout_ms").over(Window.partitionBy("capture", "group_id", "member_id"))
    return (g.withColumn("session_ms", session)
            .withColumn("done_ts", F.coalesce("response_ts", "request_ts"))
            .withColumn("next_ts", F.lead("request_ts").over(w))
            .withColumn("next_api", F.lead("api_name").over(w))
            .withColumn("next_error", F.lead("error_name").over(w))
            .withColumn("silent_ms", frames.millis_between("done_ts", "next_ts")))


def session_timeout(inp: Inputs, th: Thresholds) -> DataFrame:
    t = _member_timeline(requests(inp))
    session = F.coalesce(F.col("session_ms"), F.lit(th["default_session_timeout_ms"]))
    # Back after a silence longer than its session, and told it is no longer a member; no LeaveGroup before.
    hits = t.where(~derived.api(frames.LEAVE_GROUP) & (F.col("silent_ms") >= session)
                   & F.col("next_error").isin(*EVICTED))
    return emit(hits, "group.session_timeout", "warning", "group", F.col("group_id"),
                {"member_id": F.col("member_id"), "client_id": F.col("client_id"),
                 "session_timeout_ms": session.cast("long"), "silent_ms": rounded(F.col("silent_ms"), 1),
                 "generation_id": F.col("generation_id"), "answer_on_return": F.col("next_error"),
                 "returned_with": F.col("next_api")},
                fmt("Member %s of group %s went silent for %s s, longer than its session.timeout.ms (%s ms), "
                    "without a LeaveGroup: the coordinator evicted it (%s on its next %s) and the group rebalanced.",
                    F.col("client_id"), F.col("group_id"), rounded(F.col("silent_ms") / 1000, 1),
                    session.cast("long"), F.col("next_error"), F.col("next_api")),
                "Find what stalled the client (GC pause, blocked event loop or heartbeat thread, network); "
                "raise session.timeout.ms if pauses are expected; heartbeat.interval.ms should be ~1/3 of it.",
                show_line(F.col("capture"), _SHOW_APIS, client_id=F.col("client_id")),
                first_ts=F.col("done_ts"), last_ts=F.col("next_ts"))


def generation_members(g: DataFrame) -> DataFrame:
    """(capture, group_id, generation_id, member_id) of :func:`group_requests` ``g``: the members each
    generation was formed with."""
    return (g.where(derived.api(frames.JOIN_GROUP) & (F.col("error_name") == "NONE"))
            .select("capture", "group_id", "generation_id", "member_id").distinct())


def member_vanished(inp: Inputs, th: Thresholds) -> DataFrame:
    requested = requests(inp)
    g = requested.where(F.col("member_id").isNotNull() & (F.col("member_id") != ""))
    member = ["capture", "group_id", "member_id"]
    # Each member's last request: a member that ends with anything but LeaveGroup and is never heard of again
    # is gone without a word (killed, crashed, cut off). One whose last request was told it is no longer a
    # member came back (group.session_timeout). Its session timeout is the one its JoinGroup gave.
    last = (g.groupBy(*member)
            .agg(F.max_by(F.struct("api_key", "api_name", "api_version", "client_id", "request_ts", "response_ts",
                                   "error_name"), F.struct("request_ts", "correlation_id")).alias("last"),
                 F.max("session_timeout_ms").alias("session_ms"))
            .where((F.col("last.api_key") != frames.LEAVE_GROUP)
                   & ~F.coalesce(F.col("last.error_name").isin(*EVICTED), F.lit(False)))
            .select(*member, "session_ms", F.col("last.api_name").alias("last_api"),
                    F.col("last.api_version").alias("last_version"), F.col("last.client_id").alias("client_id"),
                    F.coalesce("last.response_ts", "last.request_ts").alias("last_ts")))
    held = generation_members(requested)
    joined = held.groupBy(*member).agg(F.max("generation_id").alias("held_generation"))
    gens = generations_of(inp).select(
        "group_id", F.col("generation_id").alias("next_generation"), F.col("start_ts").alias("rebalance_ts"),
        F.col("end_ts").alias("formed_ts"), F.col("duration_ms").alias("rebalance_ms"),
        F.col("member_client_ids").alias("members_after"))
    # The rebalance that followed: the group's first later generation (the group's, whichever capture saw
    # it form), formed without the member.
    formed_with = held.select("group_id", F.col("generation_id").alias("next_generation"), "member_id")
    after = (last.join(joined, member)
             .join(gens, "group_id")
             .where((F.col("next_generation") > F.col("held_generation")) & (F.col("rebalance_ts") >= F.col("last_ts")))
             .join(formed_with, ["group_id", "next_generation", "member_id"], "left_anti"))
    first = Window.partitionBy(*member).orderBy("rebalance_ts", "next_generation")
    hits = after.withColumn("n", F.row_number().over(first)).where(F.col("n") == 1)
    session = F.coalesce(F.col("session_ms"), F.lit(th["default_session_timeout_ms"]))
    waited = frames.millis_between("last_ts", "rebalance_ts")
    unassigned = frames.millis_between("last_ts", "formed_ts")
    last_request = F.concat(F.col("last_api"), F.lit(" v"), F.col("last_version").cast("string"))
    return emit(hits, "group.member_vanished", "warning", "group", F.col("group_id"),
                {"member_id": F.col("member_id"), "client_id": F.col("client_id"), "last_request": last_request,
                 "last_request_ts": F.date_format("last_ts", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"),
                 "session_timeout_ms": session.cast("long"), "waited_ms": rounded(waited, 1),
                 "generation_held": F.col("held_generation"), "next_generation": F.col("next_generation"),
                 "rebalance_ms": rounded(F.col("rebalance_ms"), 1), "members_after": F.col("members_after"),
                 "unassigned_ms": rounded(unassigned, 1)},
                fmt("Member %s of group %s stopped after a %s request, without a LeaveGroup, and never came back: "
                    "the group waited %s s (session.timeout.ms %s) before rebalancing without it into generation %s "
                    "(%s s, members: %s); what it held went unconsumed for %s s.",
                    F.col("client_id"), F.col("group_id"), last_request, rounded(waited / 1000, 1), session.cast("long"),
                    F.col("next_generation"), rounded(F.col("rebalance_ms") / 1000, 1),
                    F.array_join(F.col("members_after"), ", "), rounded(unassigned / 1000, 1)),
                "Find why the client stopped (crash, OOM kill, kill -9, host or network loss); a consumer that "
                "closes sends LeaveGroup and the group rebalances at once. session.timeout.ms bounds the wait "
                "(heartbeat.interval.ms about a third of it).",
                show_line(F.col("capture"), _SHOW_APIS),
                first_ts=F.col("last_ts"), last_ts=F.col("formed_ts"))


def poll_timeout(inp: Inputs, th: Thresholds) -> DataFrame:
    g = requests(inp)
    failed = g.where(derived.api(frames.OFFSET_COMMIT) & F.col("error_name").isin(*EVICTED))
    rejoins = (g.where(derived.api(frames.JOIN_GROUP))
               .select("capture", "group_id", "client_id", F.col("request_ts").alias("rejoin_ts"),
                       F.col("rebalance_timeout_ms")))
    j = (failed.alias("f").join(rejoins.alias("r"), ["capture", "group_id", "client_id"])
         .where(F.col("rejoin_ts") > F.col("f.request_ts")))
    # Heartbeats kept the member's session alive: a silence would be a session timeout instead.
    t = _member_timeline(g)
    silent = (t.where(F.col("silent_ms") >= F.coalesce(F.col("session_ms"), F.lit(th["default_session_timeout_ms"])))
              .select("capture", "group_id", "member_id").distinct())
    j = j.join(silent, ["capture", "group_id", "member_id"], "left_anti")
    agg = (j.groupBy("capture", "group_id", "client_id", "member_id")
           .agg(F.min("f.request_ts").alias("first_ts"), F.min("rejoin_ts").alias("last_ts"),
                F.first("error_name").alias("error"), F.max("r.rebalance_timeout_ms").alias("max_poll_ms")))
    return emit(agg, "group.poll_timeout", "warning", "group", F.col("group_id"),
                {"member_id": F.col("member_id"), "client_id": F.col("client_id"), "commit_error": F.col("error"),
                 "max_poll_interval_ms": F.col("max_poll_ms")},
                fmt("Member %s of group %s kept heartbeating but its commit failed with %s and it had to rejoin: "
                    "it spent longer than max.poll.interval.ms (%s ms) between polls.", F.col("client_id"),
                    F.col("group_id"), F.col("error"), F.col("max_poll_ms")),
                "Process less per poll (max.poll.records) or faster, or raise max.poll.interval.ms.",
                show_line(F.col("capture"), ["OffsetCommit", "JoinGroup", "Heartbeat"], client_id=F.col("client_id")))


RULES = (
    Rule("group.rebalance_storm", "more than a threshold of rebalances (generations) per hour",
         "rebalances, per_hour, generations", "session.timeout.ms, max.poll.interval.ms, group.instance.id",
         rebalance_storm, {"min_rebalances": 5, "max_per_hour": 30},
         applies=uses(*GENERATION_APIS)),
    Rule("group.long_rebalance", "a generation that took long to form (first JoinGroup to last SyncGroup; "
         "KIP-848: first heartbeat given the epoch to the one given its assignment)",
         "generation_id, duration_ms, members", "max.poll.interval.ms, group.initial.rebalance.delay.ms",
         long_rebalance, {"min_duration_ms": 30000},
         applies=uses(*GENERATION_APIS)),
    Rule("group.session_timeout", "a member silent past its session timeout, without LeaveGroup, then told "
         "UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION", "member_id, client_id, session_timeout_ms, silent_ms, "
         "answer_on_return", "session.timeout.ms, heartbeat.interval.ms", session_timeout,
         {"default_session_timeout_ms": 45000},
         applies=uses(*GROUP_APIS)),
    Rule("group.member_vanished", "a member gone without LeaveGroup (killed, crashed, cut off) and never back: "
         "the group waited for its session to time out, then rebalanced without it", "member_id, client_id, "
         "last_request, session_timeout_ms, waited_ms, next_generation, rebalance_ms, members_after, unassigned_ms",
         "session.timeout.ms, heartbeat.interval.ms; closing consumers", member_vanished,
         {"default_session_timeout_ms": 45000},
         applies=uses(*GROUP_APIS)),
    Rule("group.poll_timeout", "a member whose OffsetCommit failed with UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION "
         "while heartbeating, then rejoined: it exceeded max.poll.interval.ms", "member_id, client_id, "
         "commit_error, max_poll_interval_ms", "max.poll.interval.ms, max.poll.records", poll_timeout,
         {"default_session_timeout_ms": 45000},
         applies=uses(*GROUP_APIS)),
)
