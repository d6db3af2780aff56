"""Consumer rules on hand-made rows."""

from __future__ import annotations

import json

import pytest

from tests.analysis.findings.rows import ex, part, run, subjects

pytestmark = pytest.mark.slow


def _commits(group: str, client: str, n: int, step: int, span: float, topic: str = "t"):
    rows, parts = [], []
    for i in range(n):
        e = ex("OffsetCommit", i * span / max(n - 1, 1), client=client, request={"group_id": group})
        rows.append(e)
        parts.append(part(e, "request", topic=topic, offset=i * step))
    return rows, parts


def test_commit_per_message(spark):
    rows, parts = [], []
    for args in (("per-message", "c1", 10, 1, 5.0),     # 10 commits, 2/s, 1 record apart
                 ("too-few", "c2", 9, 1, 5.0),          # 9 commits
                 ("batched", "c3", 10, 100, 5.0)):      # 100 records apart and many fetches: fine
        r, p = _commits(*args)
        rows += r
        parts += p
    for i in range(30):   # c3 fetched records 30 times: 10 commits are fewer than half of that
        e = ex("Fetch", i * 0.1, client="c3")
        rows.append(e)
        parts.append(part(e, "response", topic="t", record_count=30))
    found = run(spark, "consumer.commit_per_message", rows, parts)
    assert subjects(found) == {"per-message t-0": "warning"}
    ev = json.loads(found[0].evidence)
    assert (ev["commits"], ev["median_offset_step"], ev["commits_per_s"]) == (10, 1, 2.0)


def test_busy_polling(spark):
    rows = []
    for client, n, wait, min_bytes in (("tiny-wait", 50, 10, 1), ("wait-11", 50, 11, 1), ("few", 49, 1, 1)):
        rows += [ex("Fetch", i * 0.2, client=client,
                    request={"max_wait_ms": wait, "min_bytes": min_bytes}) for i in range(n)]
    found = run(spark, "consumer.busy_polling", rows)
    assert subjects(found) == {"tiny-wait": "warning"}
    # min_bytes 1 at a high rate fires whatever the wait
    spin = [ex("Fetch", i * 0.02, client="spin", request={"max_wait_ms": 500, "min_bytes": 1}) for i in range(60)]
    assert subjects(run(spark, "consumer.busy_polling", spin)) == {"spin": "warning"}


def test_lag_growing(spark):
    rows, parts = [], []
    for client, growth in (("behind", 1000), ("keeping-up", 999)):
        for i in range(10):
            e = ex("Fetch", i, client=client, conn=client)
            rows.append(e)
            parts += [part(e, "request", topic=client, offset=0),
                      part(e, "response", topic=client, high_watermark=round(growth * i / 9))]
    found = run(spark, "consumer.lag_growing", rows, parts)
    assert subjects(found) == {"behind-0": "warning"}
    ev = json.loads(found[0].evidence)
    assert (ev["first_lag"], ev["last_lag"]) == (0, 1000)
    # The lag it quotes is the consumer_lag table's: a client without a group, from its fetch position.
    assert (ev.get("group_id"), ev["lag"], ev["lag_from"]) == (None, 1000, "fetch_position")


def test_the_lag_a_group_members_finding_quotes_is_its_groups_consumer_lag(spark):
    from analysis import derived
    from tests.analysis.conftest import table

    rows = [ex("JoinGroup", 0, client="slow", conn="slow", request={"group_id": "g"})]
    parts = []
    for i in range(10):
        e = ex("Fetch", 1 + i, client="slow", conn="slow")
        rows.append(e)
        parts += [part(e, "request", topic="t", offset=100 * i),
                  part(e, "response", topic="t", high_watermark=300 * i)]
    commit = ex("OffsetCommit", 12, client="slow", conn="slow", request={"group_id": "g"})
    rows.append(commit)
    parts += [part(commit, "request", topic="t", offset=700), part(commit, "response", topic="t", error_code=0)]
    found = run(spark, "consumer.lag_growing", rows, parts)
    ev = json.loads(found[0].evidence)
    table_row = derived.consumer_lag(table(spark, "exchanges", rows), table(spark, "partitions", parts)).first()
    assert (ev["group_id"], ev["lag"], ev["lag_from"]) == ("g", table_row.lag, table_row.lag_from) \
        == ("g", 2700 - 700, "committed")


def test_a_followers_fetches_are_not_consumer_lag(spark):
    rows, parts = [], []
    for i in range(10):
        e = ex("Fetch", i, client="broker-2", conn="replica", request={"replica_id": 2})
        rows.append(e)
        parts += [part(e, "request", topic="t", offset=0), part(e, "response", topic="t", high_watermark=1000 * i)]
    assert run(spark, "consumer.lag_growing", rows, parts) == []


def test_lag_samples_at_one_instant_have_no_slope(spark):
    rows, parts = [], []
    for i in range(10):  # ten fetches answered at the same instant: no time span, no division by zero
        e = ex("Fetch", 0, client="burst", conn=f"b{i}")
        rows.append(e)
        parts += [part(e, "request", topic="t", offset=0), part(e, "response", topic="t", high_watermark=5000)]
    assert run(spark, "consumer.lag_growing", rows, parts) == []
