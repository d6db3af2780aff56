from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import errors
from analysis._retriable import RETRIABLE
from tests.analysis.conftest import at, exchange, part, table

pytestmark = pytest.mark.slow


def test_errors_per_partition_entry_else_per_exchange_with_share_and_retriable(spark):
    ex = table(spark, "exchanges", [
        # Produce answered per partition: NOT_LEADER_OR_FOLLOWER (6, retriable) on two partitions of "orders"
        exchange(1, "Produce", api_key=0, t=1, error=6, error_name="NOT_LEADER_OR_FOLLOWER"),
        exchange(2, "Produce", api_key=0, t=2),
        exchange(3, "Produce", api_key=0, t=3),
        exchange(4, "Produce", api_key=0, t=4),
        # CreateTopics answered per request: TOPIC_ALREADY_EXISTS (36, not retriable)
        exchange(5, "CreateTopics", api_key=19, t=5, client="admin", error=36, error_name="TOPIC_ALREADY_EXISTS"),
        # a code the retriable table does not know
        exchange(6, "CreateTopics", api_key=19, t=6, client="admin", error=9999,
                 error_name="UNKNOWN_ERROR_CODE(9999)"),
    ])
    parts = table(spark, "partitions", [
        part(1, "Produce", 0, "response", "orders", 0, t=1.001, error_code=6, error_name="NOT_LEADER_OR_FOLLOWER"),
        part(1, "Produce", 0, "response", "orders", 1, t=1.001, error_code=6, error_name="NOT_LEADER_OR_FOLLOWER"),
        part(1, "Produce", 0, "response", "orders", 2, t=1.001, error_code=0, error_name="NONE"),
    ])
    assert RETRIABLE[6] is True and RETRIABLE[36] is False and 9999 not in RETRIABLE
    got = errors.errors(ex, parts).select("api_name", "error_name", "client_id", "topic", "partition", "count",
                                          "share", "retriable", "first_ts")
    assertDataFrameEqual(got, spark.createDataFrame([
        ("Produce", "NOT_LEADER_OR_FOLLOWER", "c1", "orders", 0, 1, 0.25, True, at(1.001)),
        ("Produce", "NOT_LEADER_OR_FOLLOWER", "c1", "orders", 1, 1, 0.25, True, at(1.001)),
        ("CreateTopics", "TOPIC_ALREADY_EXISTS", "admin", None, None, 1, 0.5, False, at(5.001)),
        ("CreateTopics", "UNKNOWN_ERROR_CODE(9999)", "admin", None, None, 1, 0.5, None, at(6.001)),
    ], "api_name string, error_name string, client_id string, topic string, partition int, count long, "
       "share double, retriable boolean, first_ts timestamp"))
    assertDataFrameEqual(errors.over_time(ex, parts, "1 minute").select("api_name", "error_name", "count"),
                         spark.createDataFrame([("Produce", "NOT_LEADER_OR_FOLLOWER", 2),
                                                ("CreateTopics", "TOPIC_ALREADY_EXISTS", 1),
                                                ("CreateTopics", "UNKNOWN_ERROR_CODE(9999)", 1)],
                                               "api_name string, error_name string, count long"))


def test_generated_retriable_table_is_up_to_date():
    import json

    from analysis import generate_retriable
    errors = json.loads(generate_retriable.FACTS.read_text())["errors"]
    assert generate_retriable.render(errors) == generate_retriable.OUTPUT.read_text(), \
        "analysis/_retriable.py is stale: run `python -m analysis.generate_retriable`"
