"""The capture-wide topic id registry stays bounded."""

from __future__ import annotations

from dissector.topics import ZERO_UUID, TopicRegistry


def test_the_registry_forgets_the_least_recently_learnt_past_its_cap() -> None:
    reg = TopicRegistry(max_entries=3)
    for i in range(3):
        reg.learn(f"id{i}", f"t{i}")
    reg.learn("id0", "t0")                    # confirmed again: now the most recent
    reg.learn("id3", "t3")
    assert len(reg) == 3 and reg.dropped == 1
    assert [reg.name(f"id{i}") for i in range(4)] == ["t0", None, "t2", "t3"]
    reg.learn(ZERO_UUID, "x")
    reg.learn("id4", None)
    assert len(reg) == 3 and reg.dropped == 1


def test_metadata_responses_teach_names() -> None:
    reg = TopicRegistry()
    reg.learn_from_response(3, {"topics": [{"name": "a", "topic_id": "U1"}, {"name": None, "topic_id": "U2"}, 7]})
    assert reg.name("U1") == "a" and reg.name("U2") is None and len(reg) == 1
