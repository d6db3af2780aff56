from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import throughput
from tests.analysis.conftest import at, exchange, part, table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(spark):
    ex = table(spark, "exchanges", [
        exchange(1, "Produce", api_key=0, t=0, client="p"),
        exchange(2, "Produce", api_key=0, t=1, client="p"),
        exchange(3, "Produce", api_key=0, t=2, client="p", latency=None, status="no_response_expected"),  # acks=0
        exchange(4, "Produce", api_key=0, t=3, client="p", latency=None, status="no_response"),  # never answered
        exchange(5, "Fetch", api_key=1, t=10, client="c"),
    ])
    parts = table(spark, "partitions", [
        # accepted: 3 records on o-0; rejected: 2 records on o-1
        part(1, "Produce", 0, "request", "o", 0, record_count=3, bytes=300, client_id="p"),
        part(1, "Produce", 0, "request", "o", 1, record_count=2, bytes=200, client_id="p"),
        part(1, "Produce", 0, "response", "o", 0, error_code=0, client_id="p"),
        part(1, "Produce", 0, "response", "o", 1, error_code=6, client_id="p"),
        part(2, "Produce", 0, "request", "o", 0, t=1, record_count=1, bytes=100, client_id="p"),
        part(2, "Produce", 0, "response", "o", 0, t=1, error_code=0, client_id="p"),
        part(3, "Produce", 0, "request", "o", 1, t=2, record_count=4, bytes=400, client_id="p"),
        part(4, "Produce", 0, "request", "o", 1, t=3, record_count=9, bytes=900, client_id="p"),
        # a consumer fetched 4 records of o-0 (one request, two partitions)
        part(5, "Fetch", 1, "response", "o", 0, t=10, record_count=4, bytes=410, error_code=0, client_id="c"),
        part(5, "Fetch", 1, "response", "o", 1, t=10, record_count=0, bytes=0, error_code=0, client_id="c"),
    ])
    return ex, parts


def test_by_topic_counts_only_what_the_broker_accepted_plus_acks0(spark, data):
    ex, parts = data
    # The capture spans 10 s of exchanges (first request at 0, last at 10).
    assertDataFrameEqual(throughput.by_topic(ex, parts), spark.createDataFrame([
        ("o", 0, 4, 400, 0, 4, 410, 3, 0.3),
        ("o", 1, 4, 400, 4, 0, 0, 2, 0.2),
    ], "topic string, partition int, produced_records long, produced_bytes long, acks0_records long, "
       "fetched_records long, fetched_bytes long, requests long, requests_per_s double"))


def test_over_time_and_top_clients(spark, data):
    ex, parts = data
    assertDataFrameEqual(throughput.over_time(ex, parts, "5 seconds").select(
        "window_start", "topic", "produced_records", "fetched_records", "requests"), spark.createDataFrame(
        [(at(0), "o", 8, 0, 3), (at(10), "o", 0, 4, 1)],
        "window_start timestamp, topic string, produced_records long, fetched_records long, requests long"))
    assertDataFrameEqual(throughput.top_clients(ex, parts), spark.createDataFrame(
        [("p", 800, 0, 8, 0, 4), ("c", 0, 410, 0, 4, 1)],
        "client_id string, produced_bytes long, fetched_bytes long, produced_records long, fetched_records long, "
        "requests long"))
