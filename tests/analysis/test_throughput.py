from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import throughput
from tests.analysis.conftest import at, table

pytestmark = pytest.mark.slow


def test_requests_over_time_rates_per_window(spark):
    def ex(t, api, req, resp, request_seen=True):
        return {"api_name": api, "request_ts": at(t) if request_seen else None, "response_ts": at(t + 0.002),
                "request_bytes": req, "response_bytes": resp}
    exchanges = table(spark, "exchanges", [
        ex(0.1, "Produce", 1000, 50), ex(0.5, "Produce", 3000, 50), ex(0.9, "Fetch", 60, 9000),
        ex(1.2, "Produce", 500, None),
        ex(1.5, "Fetch", None, 100, request_seen=False),   # orphan response: counted at the response
    ])
    expected = spark.createDataFrame(
        [(at(0), at(1), "Produce", 2, 4000, 100, 2.0, 4000.0, 100.0),
         (at(0), at(1), "Fetch", 1, 60, 9000, 1.0, 60.0, 9000.0),
         (at(1), at(2), "Produce", 1, 500, 0, 1.0, 500.0, 0.0),
         (at(1), at(2), "Fetch", 1, 0, 100, 1.0, 0.0, 100.0)],
        "window_start timestamp, window_end timestamp, api_name string, requests long, request_bytes long, "
        "response_bytes long, requests_per_s double, request_bytes_per_s double, response_bytes_per_s double")
    assertDataFrameEqual(throughput.requests_over_time(exchanges, "1 second"), expected)


@pytest.fixture(scope="module")
def partitions(spark):
    def part(t, api_key, api, direction, topic, partition, records, batches, nbytes, topic_id=None):
        return {"api_key": api_key, "api_name": api, "direction": direction, "ts": at(t), "topic": topic,
                "topic_id": topic_id, "partition": partition, "record_count": records,
                "batch_count": batches, "bytes": nbytes}
    return table(spark, "partitions", [
        part(1, 0, "Produce", "request", "orders", 0, 10, 1, 1000),
        part(5, 0, "Produce", "request", "orders", 0, 30, 2, 3000),
        part(5, 0, "Produce", "request", "orders", 1, 4, 1, 400),
        part(5, 0, "Produce", "response", "orders", 0, None, None, None),  # acks: no records
        part(6, 1, "Fetch", "request", "orders", 0, None, None, None),     # asks: no records
        part(6, 1, "Fetch", "response", None, 0, 40, 3, 4000, topic_id="9f2c"),
        part(12, 0, "Produce", "request", "orders", 0, 20, 1, 2000),
        part(12, 3, "Metadata", "response", "orders", 0, None, None, None),
    ])


def test_topic_over_time_counts_produce_requests_and_fetch_responses(spark, partitions):
    expected = spark.createDataFrame(
        [(at(0), at(10), "Produce", "orders", 0, 40, 3, 4000, 4.0, 400.0),
         (at(0), at(10), "Produce", "orders", 1, 4, 1, 400, 0.4, 40.0),
         (at(0), at(10), "Fetch", "9f2c", 0, 40, 3, 4000, 4.0, 400.0),
         (at(10), at(20), "Produce", "orders", 0, 20, 1, 2000, 2.0, 200.0)],
        "window_start timestamp, window_end timestamp, api_name string, topic string, partition int, "
        "records long, batches long, bytes long, records_per_s double, bytes_per_s double")
    assertDataFrameEqual(throughput.topic_over_time(partitions, "10 seconds"), expected)


def test_topic_totals_keep_the_peak_window(spark, partitions):
    windows = throughput.topic_over_time(partitions, "10 seconds")
    expected = spark.createDataFrame(
        [("Produce", "orders", 0, 60, 6000, 2, 4.0, 400.0),
         ("Produce", "orders", 1, 4, 400, 1, 0.4, 40.0),
         ("Fetch", "9f2c", 0, 40, 4000, 1, 4.0, 400.0)],
        "api_name string, topic string, partition int, records long, bytes long, active_windows long, "
        "peak_records_per_s double, peak_bytes_per_s double")
    assertDataFrameEqual(throughput.topic_totals(windows), expected)
