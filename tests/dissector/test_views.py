"""Topic-partition rows and topic names come from the schema, for any api."""

from __future__ import annotations

from dissector.topics import TopicRegistry
from dissector.views import partition_rows, topic_names, topic_paths


def test_delete_topics_names_are_found_through_entity_types():
    body = {"topic_names": ["a", "b"], "timeout_ms": 1000}
    assert topic_names(20, "request", 4, body) == {"a", "b"}
    response = {"throttle_time_ms": 0, "responses": [{"name": "a", "error_code": 0}, {"name": "b", "error_code": 3}]}
    assert topic_names(20, "response", 4, response) == {"a", "b"}


def test_topic_ids_are_named_when_the_registry_knows_them():
    registry = TopicRegistry()
    registry.learn("xKTA33FfQbecpJXGJ0TVbA", "orders")
    body = {"topics": [{"topic_id": "xKTA33FfQbecpJXGJ0TVbA"}, {"topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}]}
    assert topic_names(1, "request", 13, {"topics": body["topics"], "forgotten_topics_data": []}, registry) == {
        "orders", "AAAAAAAAAAAAAAAAAAAAAQ"}


def test_offset_fetch_groups_flatten_to_one_row_per_partition():
    body = {"groups": [
        {"group_id": "g1", "topics": [{"name": "t", "partition_indexes": [0, 2]}]},
        {"group_id": "g2", "topics": [{"name": "u", "partition_indexes": [1]}]},
    ], "require_stable": False}
    rows = list(partition_rows(9, "request", 8, body))
    assert [(r.topic, r.partition) for r in rows] == [("t", 0), ("t", 2), ("u", 1)]


def test_every_api_with_topic_partitions_is_found_without_a_hand_list():
    apis = {key for key in range(95) for kind in ("request", "response")
            for version in (0, 3, 8, 13) if topic_paths(key, kind, version)}
    # Produce, Fetch, ListOffsets, OffsetCommit, OffsetFetch, TxnOffsetCommit, AddPartitionsToTxn,
    # DeleteRecords, OffsetForLeaderEpoch and the share-group fetches are all derived from the schema.
    assert {0, 1, 2, 8, 9, 21, 23, 24, 28, 78, 79} <= apis
