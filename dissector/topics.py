"""Topic id → name, learnt from the responses a capture carries.

Fetch v13+, Produce v13 and others name topics by uuid only. Metadata and
CreateTopics responses say which name each uuid stands for; one registry is
shared by all connections of a capture, because a client usually asks for
metadata on one connection and fetches on another.
"""

from __future__ import annotations

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

# (api key, list field holding topics, name field, id field) of responses that teach names.
_TEACHERS = {
    3: ("topics", "name", "topic_id"),      # Metadata
    19: ("topics", "name", "topic_id"),     # CreateTopics
    75: ("topics", "topic_name", "topic_id"),  # DescribeTopicPartitions
}
TEACHING_APIS = frozenset(_TEACHERS)    # the api keys whose responses name topic ids


class TopicRegistry:
    """Bounded: past ``max_entries`` the entry learnt or confirmed longest ago is forgotten
    (``dropped`` counts them; the capture reports it), so a capture creating topics
    without end cannot grow it without bound."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._names: dict[str, str] = {}
        self.max_entries = max_entries
        self.dropped = 0

    def learn(self, topic_id: str | None, name: str | None) -> None:
        if topic_id and name and topic_id != ZERO_UUID:
            names = self._names
            names.pop(topic_id, None)          # re-learnt: now the most recent
            names[topic_id] = name
            if len(names) > self.max_entries:
                del names[next(iter(names))]
                self.dropped += 1

    def name(self, topic_id: str | None) -> str | None:
        return self._names.get(topic_id) if topic_id else None

    def learn_from_response(self, api_key: int, body: dict) -> None:
        spec = _TEACHERS.get(api_key)
        if spec is None:
            return
        list_field, name_field, id_field = spec
        for topic in body.get(list_field) or ():
            if isinstance(topic, dict):
                self.learn(topic.get(id_field), topic.get(name_field))

    def __len__(self) -> int:
        return len(self._names)
