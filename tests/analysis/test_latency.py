from __future__ import annotations

import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType
from pyspark.testing import assertDataFrameEqual

from analysis import latency
from tests.analysis.conftest import at, table

pytestmark = pytest.mark.slow

STATS = [StructField("count", LongType(), False), StructField("p50_ms", DoubleType()),
         StructField("p95_ms", DoubleType()), StructField("p99_ms", DoubleType()),
         StructField("max_ms", DoubleType())]


def ex(cid, api, lat, *, client="c1", broker=("10.0.0.9", 9092), t=0.0, status="ok", conn="k1"):
    return {"capture": "cap", "connection": conn, "correlation_id": cid, "api_key": {"Produce": 0, "Fetch": 1}[api],
            "api_name": api, "client_id": client, "broker_ip": broker[0], "broker_port": broker[1],
            "request_ts": at(t), "response_ts": None if lat is None else at(t + lat / 1000),
            "latency_ms": lat, "status": status}


@pytest.fixture(scope="module")
def exchanges(spark):
    rows = [ex(i + 1, "Produce", lat, t=i) for i, lat in enumerate([4.0, 1.0, 100.0, 3.0, 2.0])]
    rows += [ex(10, "Fetch", 10.0, client="c2", broker=("10.0.0.8", 9093), t=70),
             ex(11, "Fetch", 20.0, client="c2", t=71),
             ex(12, "Fetch", None, client="c2", t=72, status="no_response")]
    return table(spark, "exchanges", rows)


def stats_schema(*keys):
    return StructType([StructField(k, StringType()) for k in keys] + STATS)


def test_by_api_takes_observed_percentiles_and_skips_unanswered(spark, exchanges):
    expected = spark.createDataFrame(
        [("Produce", 5, 3.0, 100.0, 100.0, 100.0), ("Fetch", 2, 10.0, 20.0, 20.0, 20.0)],
        stats_schema("api_name"))
    assertDataFrameEqual(latency.by_api(exchanges), expected)


def test_by_client_and_by_broker(spark, exchanges):
    assertDataFrameEqual(latency.by_client(exchanges), spark.createDataFrame(
        [("c1", 5, 3.0, 100.0, 100.0, 100.0), ("c2", 2, 10.0, 20.0, 20.0, 20.0)], stats_schema("client_id")))
    assertDataFrameEqual(latency.by_broker(exchanges), spark.createDataFrame(
        [("10.0.0.9:9092", 6, 3.0, 100.0, 100.0, 100.0), ("10.0.0.8:9093", 1, 10.0, 10.0, 10.0, 10.0)],
        stats_schema("broker")))


def test_by_topic_counts_an_exchange_once_per_topic(spark, exchanges):
    def part(cid, topic, direction, partition=0, topic_id=None):
        return {"capture": "cap", "connection": "k1", "correlation_id": cid, "direction": direction,
                "topic": topic, "topic_id": topic_id, "partition": partition}
    parts = table(spark, "partitions", [
        # correlation 3 (100 ms) writes two partitions of "a" and one of "b": once each topic.
        part(3, "a", "request"), part(3, "a", "request", 1), part(3, "b", "request"),
        part(3, "a", "response"), part(3, "a", "response", 1), part(3, "b", "response"),
        part(1, "a", "request"),
        # Fetch v13 without a Metadata response: topic known by id only.
        part(11, None, "response", topic_id="9f2c"),
        # same correlation id on another connection must not join
        {**part(2, "a", "request"), "connection": "k2"},
    ])
    expected = spark.createDataFrame(
        [("Produce", "a", 2, 4.0, 100.0, 100.0, 100.0), ("Produce", "b", 1, 100.0, 100.0, 100.0, 100.0),
         ("Fetch", "9f2c", 1, 20.0, 20.0, 20.0, 20.0)],
        stats_schema("api_name", "topic"))
    assertDataFrameEqual(latency.by_topic(exchanges, parts), expected)


def test_over_time_buckets_by_request_time(spark, exchanges):
    schema = StructType([StructField("window_start", TimestampType()), StructField("window_end", TimestampType())]
                        + STATS)
    expected = spark.createDataFrame(
        [(at(0), at(60), 5, 3.0, 100.0, 100.0, 100.0), (at(60), at(120), 2, 10.0, 20.0, 20.0, 20.0)], schema)
    assertDataFrameEqual(latency.over_time(exchanges, "1 minute"), expected)


def test_p99_spikes_flags_the_window_far_above_the_median(spark):
    # One request a second for 10 s; second 7 holds a 50 ms request among 1 ms ones.
    rows = [ex(i, "Produce", 50.0 if i == 70 else 1.0, t=i / 10) for i in range(100)]
    windows = latency.over_time(table(spark, "exchanges", rows), "1 second")
    spikes = latency.p99_spikes(windows, factor=3.0, min_count=5)
    assertDataFrameEqual(spikes.select("window_start", "count", "p99_ms", "baseline_p99_ms", "ratio"),
                         spark.createDataFrame([(at(7), 10, 50.0, 1.0, 50.0)],
                                               "window_start timestamp, count long, p99_ms double, "
                                               "baseline_p99_ms double, ratio double"))
    # Too few requests in the window: not a spike.
    assert latency.p99_spikes(windows, factor=3.0, min_count=11).count() == 0
