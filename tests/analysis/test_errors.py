from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import errors
from tests.analysis.conftest import at, table

pytestmark = pytest.mark.slow


def ex(cid, api, code, name=None, *, client="c1", status="ok", responded=True):
    return {"capture": "cap", "connection": "k1", "correlation_id": cid, "api_name": api, "client_id": client,
            "request_ts": at(cid), "response_ts": at(cid + 0.01) if responded else None,
            "error_code": code, "error_name": name, "status": status}


@pytest.fixture(scope="module")
def exchanges(spark):
    return table(spark, "exchanges", [
        ex(1, "Produce", 0, "NONE"),
        ex(2, "Produce", 6, "NOT_LEADER_OR_FOLLOWER"),
        ex(3, "Produce", 6, "NOT_LEADER_OR_FOLLOWER", client="c2"),
        ex(4, "JoinGroup", -1, "UNKNOWN_SERVER_ERROR", client="c2"),
        ex(5, "Fetch", 5120, None),                   # not a Kafka error code: no name
        ex(6, "Fetch", None, None),                   # response carries no top-level code
        ex(7, "Produce", None, status="no_response", responded=False),
        ex(8, "Metadata", None, status="malformed"),
    ])


def test_by_api_counts_non_zero_codes_including_unknown_ones(spark, exchanges):
    expected = spark.createDataFrame(
        [("Produce", 6, "NOT_LEADER_OR_FOLLOWER", 2), ("JoinGroup", -1, "UNKNOWN_SERVER_ERROR", 1),
         ("Fetch", 5120, None, 1)],
        "api_name string, error_code int, error_name string, count long")
    assertDataFrameEqual(errors.by_api(exchanges), expected)


def test_by_client(spark, exchanges):
    expected = spark.createDataFrame(
        [("c1", "Produce", 6, "NOT_LEADER_OR_FOLLOWER", 1), ("c2", "Produce", 6, "NOT_LEADER_OR_FOLLOWER", 1),
         ("c2", "JoinGroup", -1, "UNKNOWN_SERVER_ERROR", 1), ("c1", "Fetch", 5120, None, 1)],
        "client_id string, api_name string, error_code int, error_name string, count long")
    assertDataFrameEqual(errors.by_client(exchanges), expected)


def test_error_rate_counts_only_exchanges_with_a_response(spark, exchanges):
    expected = spark.createDataFrame(
        [("Produce", 3, 2, 2 / 3), ("JoinGroup", 1, 1, 1.0), ("Fetch", 2, 1, 0.5), ("Metadata", 1, 0, 0.0)],
        "api_name string, responses long, errors long, error_rate double")
    assertDataFrameEqual(errors.error_rate_by_api(exchanges), expected)


def test_status_counts(spark, exchanges):
    expected = spark.createDataFrame(
        [("Produce", "ok", 3), ("Produce", "no_response", 1), ("JoinGroup", "ok", 1), ("Fetch", "ok", 2),
         ("Metadata", "malformed", 1)],
        "api_name string, status string, count long")
    assertDataFrameEqual(errors.status_counts(exchanges), expected)


def test_by_topic_uses_partition_responses_only(spark):
    def part(cid, topic, partition, code, name, direction="response", api="Produce", topic_id=None):
        return {"capture": "cap", "connection": "k1", "correlation_id": cid, "api_name": api,
                "direction": direction, "topic": topic, "topic_id": topic_id, "partition": partition,
                "error_code": code, "error_name": name}
    parts = table(spark, "partitions", [
        part(1, "orders", 0, 6, "NOT_LEADER_OR_FOLLOWER"),
        part(2, "orders", 0, 6, "NOT_LEADER_OR_FOLLOWER"),
        part(2, "orders", 1, 6, "NOT_LEADER_OR_FOLLOWER"),
        part(2, "orders", 2, 0, "NONE"),
        part(3, "orders", 0, None, None, direction="request"),
        part(4, None, 3, 100, "UNKNOWN_TOPIC_ID", api="Fetch", topic_id="9f2c"),
    ])
    expected = spark.createDataFrame(
        [("Produce", "orders", 6, "NOT_LEADER_OR_FOLLOWER", 3, 2), ("Fetch", "9f2c", 100, "UNKNOWN_TOPIC_ID", 1, 1)],
        "api_name string, topic string, error_code int, error_name string, count long, partitions long")
    assertDataFrameEqual(errors.by_topic(parts), expected)
