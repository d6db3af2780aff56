from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import groups
from tests.analysis.conftest import at, exchange, part, table

pytestmark = pytest.mark.slow


def join(cid, t, lat, client, *, gen=None, member="", error=0, reason=None, version=9):
    request = {"group_id": "g", "member_id": member, "protocol_type": "consumer", "reason": reason}
    response = {"error_code": error, "generation_id": -1 if gen is None else gen, "protocol_name": "range",
                "member_id": member or f"{client}-m", "members": []}
    return exchange(cid, "JoinGroup", api_key=11, t=t, latency=lat, client=client, version=version, error=error,
                    error_name="MEMBER_ID_REQUIRED" if error == 79 else None, request=request, response=response)


def sync(cid, t, lat, client, gen, parts):
    return exchange(cid, "SyncGroup", api_key=14, t=t, latency=lat, client=client, version=5,
                    request={"group_id": "g", "generation_id": gen, "member_id": f"{client}-m"},
                    response={"error_code": 0, "assignment": {"version": 0, "user_data": "",
                                                              "assigned_partitions": [{"topic": "t",
                                                                                       "partitions": parts}]}})


def heartbeat_848(cid, t, client, epoch, assignment):
    return exchange(cid, "ConsumerGroupHeartbeat", api_key=68, t=t, latency=2.0, client=client, version=0,
                    request={"group_id": "n", "member_id": "", "member_epoch": 0},
                    response={"error_code": 0, "member_id": "mx", "member_epoch": epoch,
                              "assignment": assignment})


@pytest.fixture(scope="module")
def exchanges(spark):
    return table(spark, "exchanges", [
        # generation 1: a's first join is bounced for a member id, its second waits 3 s; sync ends it
        join(1, 0.0, 1.0, "a", error=79),
        join(2, 0.01, 3000.0, "a", gen=1, member="a-m"),
        sync(3, 3.02, 1.0, "a", 1, [0, 1]),
        # b joins (no reason given); a's heartbeat hears REBALANCE_IN_PROGRESS and a rejoins, saying why
        join(4, 4.5, 2000.0, "b", gen=2, member="b-m"),
        exchange(5, "Heartbeat", api_key=12, t=5.0, client="a", error=27, error_name="REBALANCE_IN_PROGRESS",
                 request={"group_id": "g", "generation_id": 1, "member_id": "a-m"}, response={"error_code": 27}),
        join(6, 5.1, 1400.0, "a", gen=2, member="a-m", reason="rebalance in progress"),
        sync(7, 6.6, 1.0, "a", 2, [0]),
        sync(8, 6.6, 2.0, "b", 2, [1]),
        # a KIP-848 group: the epoch-1 assignment arrives with the first heartbeat
        heartbeat_848(9, 1.0, "x", 1, {"topic_partitions": [{"topic_id": "U1", "partitions": [0]}]}),
        heartbeat_848(10, 2.0, "x", 1, None),
        # commits: t-0 accepted, t-1 refused
        exchange(20, "OffsetCommit", api_key=8, t=7.0, client="a", request={"group_id": "g"},
                 response={"topics": []}),
    ])


REBALANCES = ("group_id string, generation_id int, protocol string, members long, member_client_ids array<string>, "
              "start_ts timestamp, end_ts timestamp, duration_ms double, reason string, errors array<string>, "
              "members_joined array<string>, members_left array<string>")


def test_rebalance_timeline_from_join_and_sync(spark, exchanges):
    assertDataFrameEqual(groups.rebalances(exchanges), spark.createDataFrame([
        ("g", 1, "consumer range", 1, ["a"], at(0), at(3.021), 3021.0, None, ["MEMBER_ID_REQUIRED"], [], []),
        ("g", 2, "consumer range", 2, ["a", "b"], at(4.5), at(6.602), 2102.0, "rebalance in progress",
         ["REBALANCE_IN_PROGRESS"], ["b"], []),
        ("n", 1, "consumer (KIP-848)", 1, ["x"], at(1.0), at(1.002), 2.0, None, [], [], []),
    ], REBALANCES))


def test_members_and_their_assigned_partitions(spark, exchanges):
    schema = "group_id string, generation_id int, member_id string, client_id string, assigned_partitions array<string>"
    classic = [("g", 1, "a-m", "a", ["t-0", "t-1"]), ("g", 2, "a-m", "a", ["t-0"]), ("g", 2, "b-m", "b", ["t-1"])]
    # KIP-848 names topics by id: named where a Metadata response in the capture named the id, else left as is.
    assertDataFrameEqual(groups.group_members(exchanges),
                         spark.createDataFrame(classic + [("n", 1, "mx", "x", ["U1-0"])], schema))
    metadata = table(spark, "partitions", [part(99, "Metadata", 3, "response", "t", 0, topic_id="U1")])
    assertDataFrameEqual(groups.group_members(exchanges, metadata),
                         spark.createDataFrame(classic + [("n", 1, "mx", "x", ["t-0"])], schema))


def test_offset_commits_with_the_brokers_answer(spark, exchanges):
    parts = table(spark, "partitions", [
        part(20, "OffsetCommit", 8, "request", "t", 0, t=7.0, offset=5),
        part(20, "OffsetCommit", 8, "request", "t", 1, t=7.0, offset=3),
        part(20, "OffsetCommit", 8, "response", "t", 0, t=7.001, error_code=0, error_name="NONE"),
        part(20, "OffsetCommit", 8, "response", "t", 1, t=7.001, error_code=22, error_name="ILLEGAL_GENERATION"),
    ])
    assertDataFrameEqual(groups.offset_commits(exchanges, parts).select(
        "group_id", "topic", "partition", "committed_offset", "ts", "client_id", "accepted"), spark.createDataFrame(
        [("g", "t", 0, 5, at(7.0), "a", True), ("g", "t", 1, 3, at(7.0), "a", False)],
        "group_id string, topic string, partition int, committed_offset long, ts timestamp, client_id string, "
        "accepted boolean"))
