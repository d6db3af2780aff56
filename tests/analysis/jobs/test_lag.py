from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import lag
from tests.analysis.conftest import exchange, part, table

pytestmark = pytest.mark.slow


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
