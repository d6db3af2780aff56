from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import lag
from tests.analysis.conftest import at, exchange, part, table

pytestmark = pytest.mark.slow


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
    assertDataFrameEqual(lag.consumer_lag(ex, parts), spark.createDataFrame([
        ("g", "a", "t", 0, 5, at(7), 9, at(8), 12, at(8.001), 7, "committed"),
        ("g", "a", "t", 1, None, None, 2, at(8), 10, at(9.001), 8, "fetch_position"),
        (None, "z", "u", 0, None, None, 4, at(9), 4, at(9.001), 0, "fetch_position"),
        (None, "y", "v", 0, None, None, 3, at(9), None, None, None, "fetch_position"),
    ], "group_id string, client_id string, topic string, partition int, committed_offset long, "
       "committed_ts timestamp, fetch_position long, fetch_ts timestamp, high_watermark long, "
       "high_watermark_ts timestamp, lag long, lag_from string"))


def test_produce_to_first_fetch(spark):
    ex = table(spark, "exchanges", [exchange(60, "Produce", api_key=0, t=0, client="p"),
                                    exchange(61, "Fetch", api_key=1, t=0.4, client="a"),
                                    exchange(62, "Fetch", api_key=1, t=0.9, client="a")])
    parts = table(spark, "partitions", [
        part(60, "Produce", 0, "request", "t", 0, t=0, record_count=2),
        part(60, "Produce", 0, "response", "t", 0, t=0.001, base_offset=10, error_code=0),
        part(61, "Fetch", 1, "response", "t", 0, t=0.5, record_count=2, base_offset=10, last_offset=11,
             client_id="a"),
        part(62, "Fetch", 1, "response", "t", 0, t=1.0, record_count=1, base_offset=11, last_offset=11,
             client_id="a"),  # again
    ])
    assertDataFrameEqual(lag.produce_to_fetch(ex, parts), spark.createDataFrame(
        [("t", 0, "a", 2, 499.0, 499.0, 499.0)],
        "topic string, partition int, client_id string, count long, p50_ms double, p99_ms double, max_ms double"))
