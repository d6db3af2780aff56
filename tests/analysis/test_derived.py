"""The facts jobs and rules share, each derived by its one rule: generations, fetch positions and lag,
brokers, api filters."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import derived, frames
from tests.analysis.conftest import at, exchange, part, table

pytestmark = pytest.mark.slow


def join(cid, t, lat, client, *, gen=None, member="", error=0, capture="cap"):
    request = {"group_id": "g", "member_id": member, "protocol_type": "consumer"}
    response = {"error_code": error, "generation_id": -1 if gen is None else gen, "protocol_name": "range",
                "member_id": member or f"{client}-m", "members": []}
    return exchange(cid, "JoinGroup", api_key=11, t=t, latency=lat, client=client, error=error, capture=capture,
                    error_name={79: "MEMBER_ID_REQUIRED", 27: "REBALANCE_IN_PROGRESS"}.get(error),
                    request=request, response=response)


def sync(cid, t, lat, client, gen, capture="cap"):
    return exchange(cid, "SyncGroup", api_key=14, t=t, latency=lat, client=client, capture=capture,
                    request={"group_id": "g", "generation_id": gen, "member_id": f"{client}-m"},
                    response={"error_code": 0})


GENERATIONS = ("group_id string, generation_id int, capture string, start_ts timestamp, end_ts timestamp, "
               "duration_ms double, protocol string, members long, member_client_ids array<string>, "
               "join_reason string")


def test_a_generation_starts_at_its_first_join_retried_ones_included_and_is_the_groups_not_a_captures(spark):
    ex = table(spark, "exchanges", [
        # a is bounced for a member id, then told the group is rebalancing, then joins generation 1
        join(1, 0.0, 1.0, "a", error=79),
        join(2, 0.5, 1.0, "a", member="a-m", error=27),
        join(3, 1.0, 2000.0, "a", gen=1, member="a-m"),
        # b's join into the same generation seen by another capture (the consumer's own host)
        join(4, 1.5, 1500.0, "b", gen=1, member="b-m", capture="other"),
        sync(5, 3.0, 1.0, "a", 1),
        sync(6, 3.0, 4.0, "b", 1, capture="other"),
        exchange(7, "ConsumerGroupHeartbeat", api_key=68, t=5.0, latency=2.0, client="x",
                 request={"group_id": "n", "member_id": "", "member_epoch": 0},
                 response={"error_code": 0, "member_id": "mx", "member_epoch": 3,
                           "assignment": {"topic_partitions": []}}),
    ])
    assertDataFrameEqual(derived.generations(derived.group_exchanges(ex)), spark.createDataFrame([
        ("g", 1, "cap", at(0.0), at(3.004), 3004.0, "consumer range", 2, ["a", "b"], None),
        ("n", 3, "cap", at(5.0), at(5.002), 2.0, "consumer (KIP-848)", 1, ["x"], None),
    ], GENERATIONS))


def test_api_filters_by_key_not_name(spark):
    ex = table(spark, "exchanges", [exchange(1, "Fetch", api_key=1), exchange(2, None, api_key=1),
                                    exchange(3, "Fetch", api_key=0)])
    assert sorted(r.correlation_id for r in ex.where(derived.api(frames.FETCH)).collect()) == [1, 2]


def test_a_broker_is_its_ip_and_port(spark):
    ex = table(spark, "exchanges", [exchange(1, "Fetch", api_key=1, broker=("10.0.0.9", 9093))])
    assert ex.select(derived.broker().alias("b")).first().b == "10.0.0.9:9093"


def test_lag_samples_are_consumers_fetches_only_from_the_offset_they_asked_for(spark):
    ex = table(spark, "exchanges", [
        exchange(1, "Fetch", api_key=1, t=1, client="c", request={"replica_id": -1}),
        exchange(2, "Fetch", api_key=1, t=1, client="broker-1", request={"replica_id": 1}),   # a follower
        exchange(3, "Fetch", api_key=1, t=2, client="c", request={"replica_state": {"replica_id": -1}}),
        exchange(4, "Fetch", api_key=1, t=3, client="c", latency=None),                      # unanswered
    ])
    parts = table(spark, "partitions", [
        part(1, "Fetch", 1, "request", "t", 0, t=1, offset=10, base_offset=10),
        part(1, "Fetch", 1, "response", "t", 0, t=1.001, high_watermark=25),
        part(2, "Fetch", 1, "request", "t", 0, t=1, offset=24, base_offset=24),
        part(2, "Fetch", 1, "response", "t", 0, t=1.001, high_watermark=25),
        part(3, "Fetch", 1, "request", "t", 0, t=2, offset=30, base_offset=30),
        part(3, "Fetch", 1, "response", "t", 0, t=2.001, high_watermark=28),   # ahead of a stale watermark: 0
        part(4, "Fetch", 1, "request", "t", 0, t=3, offset=31, base_offset=31),
    ])
    assertDataFrameEqual(derived.lag_samples(ex, parts).select("client_id", "ts", "position", "high_watermark", "lag"),
                         spark.createDataFrame([("c", at(1), 10, 25, 15), ("c", at(2), 30, 28, 0)],
                                               "client_id string, ts timestamp, position long, high_watermark long, "
                                               "lag long"))
    # The follower's position is nobody's; the unanswered fetch still moves the client's position.
    assert [(r.client_id, r.fetch_position) for r in derived.positions(ex, parts).collect()] == [("c", 31)]


def test_consumer_lag_from_commits_fetch_positions_and_high_watermarks(spark):
    ex = table(spark, "exchanges", [
        exchange(1, "JoinGroup", api_key=11, t=0, client="a", request={"group_id": "g"}),
        exchange(20, "OffsetCommit", api_key=8, t=7, client="a", request={"group_id": "g"}),
        exchange(30, "Fetch", api_key=1, t=8, client="a", request={"replica_id": -1, "max_wait_ms": 500}),
        exchange(40, "ListOffsets", api_key=2, t=9, client="a",
                 request={"topics": [{"name": "t", "partitions": [{"partition_index": 1, "timestamp": -1}]}]}),
        exchange(50, "Fetch", api_key=1, t=9, client="z", request={"replica_id": -1}),
        exchange(51, "Fetch", api_key=1, t=9, client="broker-1", request={"replica_id": 1}),  # a follower
        exchange(52, "Fetch", api_key=1, t=9, client="y", request={"replica_id": -1}),
    ])
    parts = table(spark, "partitions", [
        part(20, "OffsetCommit", 8, "request", "t", 0, t=7, offset=5),
        part(20, "OffsetCommit", 8, "response", "t", 0, t=7.001, error_code=0),
        part(20, "OffsetCommit", 8, "request", "t", 1, t=7, offset=3),
        part(20, "OffsetCommit", 8, "response", "t", 1, t=7.001, error_code=22),   # refused: not a commit
        part(30, "Fetch", 1, "request", "t", 0, t=8, offset=9),
        part(30, "Fetch", 1, "request", "t", 1, t=8, offset=2),
        part(30, "Fetch", 1, "response", "t", 0, t=8.001, high_watermark=12, error_code=0),
        part(40, "ListOffsets", 2, "response", "t", 1, t=9.001, offset=10, error_code=0),
        part(50, "Fetch", 1, "request", "u", 0, t=9, offset=4),
        part(50, "Fetch", 1, "response", "u", 0, t=9.001, high_watermark=4, error_code=0),
        part(51, "Fetch", 1, "request", "u", 0, t=9, offset=100),
        part(52, "Fetch", 1, "request", "v", 0, t=9, offset=3),    # no high watermark seen: no lag, not 0
    ])
    assertDataFrameEqual(derived.consumer_lag(ex, parts), spark.createDataFrame([
        ("g", "a", "t", 0, 5, at(7), 9, at(8), 12, at(8.001), 7, "committed"),
        ("g", "a", "t", 1, None, None, 2, at(8), 10, at(9.001), 8, "fetch_position"),
        (None, "z", "u", 0, None, None, 4, at(9), 4, at(9.001), 0, "fetch_position"),
        (None, "y", "v", 0, None, None, 3, at(9), None, None, None, "fetch_position"),
    ], "group_id string, client_id string, topic string, partition int, committed_offset long, "
       "committed_ts timestamp, fetch_position long, fetch_ts timestamp, high_watermark long, "
       "high_watermark_ts timestamp, lag long, lag_from string"))


def test_a_clients_lag_is_its_groups_row_or_its_own(spark):
    ex = table(spark, "exchanges", [
        exchange(1, "JoinGroup", api_key=11, t=0, client="a", request={"group_id": "g"}),
        exchange(2, "Fetch", api_key=1, t=1, client="a", request={"replica_id": -1}),
        exchange(3, "Fetch", api_key=1, t=1, client="z", request={"replica_id": -1}),
    ])
    parts = table(spark, "partitions", [
        part(2, "Fetch", 1, "request", "t", 0, t=1, offset=5),
        part(2, "Fetch", 1, "response", "t", 0, t=1.001, high_watermark=9),
        part(3, "Fetch", 1, "request", "t", 0, t=1, offset=7),
    ])
    assertDataFrameEqual(derived.lag_of_client(ex, parts), spark.createDataFrame(
        [("a", "g", "t", 0, 4, "fetch_position"), ("z", None, "t", 0, 2, "fetch_position")],
        "client_id string, group_id string, topic string, partition int, lag long, lag_from string"))
