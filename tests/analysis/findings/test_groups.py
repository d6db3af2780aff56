"""Consumer group rules on hand-made JoinGroup/SyncGroup/Heartbeat/OffsetCommit rows."""

from __future__ import annotations

import json

import pytest

from tests.analysis.findings.rows import ex, run, subjects

pytestmark = pytest.mark.slow


def join(t, group, member, gen, *, client="c1", session=6000, rebalance=8000, latency_ms=1.0, error="NONE"):
    return ex("JoinGroup", t, client=client, latency_ms=latency_ms, error=error,
              request={"group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
                       "member_id": ""},
              response={"generation_id": gen, "member_id": member, "error_code": 0})


def sync(t, group, member, gen, *, client="c1", latency_ms=1.0):
    return ex("SyncGroup", t, client=client, latency_ms=latency_ms,
              request={"group_id": group, "generation_id": gen, "member_id": member})


def beat(t, group, member, gen, *, client="c1", error="NONE"):
    return ex("Heartbeat", t, client=client, error=error,
              request={"group_id": group, "generation_id": gen, "member_id": member})


def test_rebalance_storm(spark):
    rows = []
    for group, n in (("storm", 5), ("calm", 4)):
        for g in range(n):
            rows += [join(g * 12, group, "m1", g + 1), sync(g * 12 + 1, group, "m1", g + 1)]
    found = run(spark, "group.rebalance_storm", rows)
    assert subjects(found) == {"storm": "warning"}
    assert json.loads(found[0].evidence)["rebalances"] == 5


def test_long_rebalance(spark):
    rows = [join(0, "slow", "m1", 1, latency_ms=29000.0), sync(29.5, "slow", "m1", 1, latency_ms=500.0),
            join(0, "quick", "m2", 1, latency_ms=29000.0), sync(29.5, "quick", "m2", 1, latency_ms=499.0)]
    found = run(spark, "group.long_rebalance", rows)
    assert subjects(found) == {"slow": "warning"}
    assert json.loads(found[0].evidence)["duration_ms"] == 30000.0


def test_session_timeout(spark):
    rows = [join(0, "g", "stalled", 1, client="a"), beat(1, "g", "stalled", 1, client="a"),
            # silent 6 s after its heartbeat's answer (1.001 -> 7.001), then told it is unknown
            beat(7.001, "g", "stalled", 1, client="a", error="UNKNOWN_MEMBER_ID"),
            join(0, "h", "short", 1, client="b"), beat(1, "h", "short", 1, client="b"),
            beat(6.999, "h", "short", 1, client="b", error="UNKNOWN_MEMBER_ID"),   # 5.998 s: under
            join(0, "k", "rebalancing", 1, client="c"), beat(1, "k", "rebalancing", 1, client="c"),
            beat(9, "k", "rebalancing", 1, client="c", error="REBALANCE_IN_PROGRESS")]   # still a member
    found = run(spark, "group.session_timeout", rows)
    assert subjects(found) == {"g": "warning"}
    ev = json.loads(found[0].evidence)
    assert (ev["client_id"], ev["session_timeout_ms"], ev["silent_ms"]) == ("a", 6000, 6000.0)


def test_poll_timeout(spark):
    commit = lambda t, client, member, error: ex(  # noqa: E731
        "OffsetCommit", t, client=client, error=error,
        request={"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": member})
    rows = [join(0, "g", "slow-poller", 1, client="a"), beat(1, "g", "slow-poller", 1, client="a"),
            beat(2, "g", "slow-poller", 1, client="a"),
            commit(3, "a", "slow-poller", "UNKNOWN_MEMBER_ID"), join(3.5, "g", "slow-poller-2", 2, client="a"),
            join(0, "g", "m-b", 1, client="b"), commit(3, "b", "m-b", "ILLEGAL_GENERATION")]   # never rejoined
    found = run(spark, "group.poll_timeout", rows)
    assert [(r.subject, json.loads(r.evidence)["client_id"]) for r in found] == [("g", "a")]
    assert json.loads(found[0].evidence)["max_poll_interval_ms"] == 8000


def leave(t, group, member, *, client="c1"):
    return ex("LeaveGroup", t, client=client, request={"group_id": group, "member_id": member})


def test_member_vanished(spark):
    rows = [
        # g: a and b form generation 1; b's last heartbeat at 2 s, then nothing; at 8.5 s a rejoins alone
        join(0, "g", "a", 1, client="a"), join(0, "g", "b", 1, client="b"), sync(1, "g", "a", 1, client="a"),
        sync(1, "g", "b", 1, client="b"), beat(4, "g", "a", 1, client="a"), beat(2, "g", "b", 1, client="b"),
        beat(8.5, "g", "a", 1, client="a", error="REBALANCE_IN_PROGRESS"),
        join(8.501, "g", "a", 2, client="a", latency_ms=3000.0), sync(11.502, "g", "a", 2, client="a"),
        # h: b leaves properly before the group rebalances without it
        join(0, "h", "a", 1, client="a"), join(0, "h", "b", 1, client="b"), leave(2, "h", "b", client="b"),
        join(3, "h", "a", 2, client="a"),
        # k: b falls silent but comes back and is told it is no longer a member (group.session_timeout's)
        join(0, "k", "a", 1, client="a"), join(0, "k", "b", 1, client="b"), beat(1, "k", "b", 1, client="b"),
        join(8, "k", "a", 2, client="a"), beat(9, "k", "b", 1, client="b", error="UNKNOWN_MEMBER_ID"),
        # m: b falls silent at the end of the capture: no later generation, nothing to report
        join(0, "m", "a", 1, client="a"), join(0, "m", "b", 1, client="b"), beat(1, "m", "b", 1, client="b"),
    ]
    found = run(spark, "group.member_vanished", rows)
    assert subjects(found) == {"g": "warning"}
    ev = json.loads(found[0].evidence)
    assert (ev["client_id"], ev["member_id"], ev["last_request"]) == ("b", "b", "Heartbeat v9")
    assert (ev["session_timeout_ms"], ev["waited_ms"], ev["next_generation"]) == (6000, 6500.0, 2)
    assert (ev["members_after"], ev["rebalance_ms"], ev["unassigned_ms"]) == (["a"], 3002.0, 9502.0)
    assert "waited 6.5 s (session.timeout.ms 6000)" in found[0].explanation
