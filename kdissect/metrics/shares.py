"""Share groups (KIP-932) in the metric fold: records acquired and acknowledged, and members.

The rules of ``analysis/derived.py`` (``share_acquisitions``, ``share_acknowledgements``,
``share_members``), in streaming form, so that the counters add up to the ``share_deliveries``
table and the gauge to the ``share_groups`` members not seen leaving:

* acquired: the ``acquired_records`` ranges of ShareFetch responses (``last_offset`` at or above
  ``first_offset``), ``last_offset - first_offset + 1`` records each; redelivered: those of ranges
  with a delivery count above 1;
* acknowledged: the ``acknowledgement_batches`` of ShareFetch and ShareAcknowledge requests, as
  sent, whatever the answer: a batch with one type covers its range, a batch with several has one
  type per offset from its first; type 0 (a gap: offsets without a record) counts nothing;
* the topic: the name the exchange's own partition rows give its topic id (what the decoder's
  topic registry knew), else the id;
* members: per group, the member ids of ShareGroupHeartbeat requests (the answer's when the request
  had none) that have not sent a leave (member epoch -1).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from kdissect.dataset.tables import COLUMNS
from kdissect.metrics import catalog as C

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
SHARE_APIS = frozenset({SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE})
ACK_TYPES = {1: "accept", 2: "release", 3: "reject"}
LEAVE = -1
MAX_OFFSET, MAX_RANGE = 1 << 62, 1 << 31    # analysis.derived's MAX_SHARE_OFFSET, MAX_SHARE_RANGE

_P_TOPIC = COLUMNS["partitions"].index("topic")
_P_TOPIC_ID = COLUMNS["partitions"].index("topic_id")


class Series(Protocol):
    """What bounds the series (:class:`~kdissect.metrics.fold.MetricsFold`, which owns this fold)."""

    def _admit(self, d: dict, key: tuple, metric: C.Metric) -> tuple: ...

    def _add(self, d: dict, key: tuple, n: Any, metric: C.Metric) -> None: ...


class ShareFold:
    """The share counters and members of one metric fold: ``fold`` bounds their series (``_admit``),
    ``max_state`` the members kept."""

    def __init__(self, fold: Series, max_state: int) -> None:
        self.fold = fold
        self.max_state = max_state
        self.acquired: dict[tuple, list] = {}         # (group, topic, client id) -> [acquired, redelivered]
        self.acknowledged: dict[tuple, int] = {}      # (group, topic, client id, type) -> records
        self.members: dict[str, dict[str, bool]] = {}  # group -> member id -> left

    def exchange(self, api_key: int, client: str, request: Any, response: Any, pa: Sequence[list], p0: int,
                 p1: int) -> None:
        if not isinstance(request, dict):
            request = {}                # an answer without its request: acquired, in no group
        group = request.get("group_id")
        group = group if isinstance(group, str) else ""
        if api_key == SHARE_GROUP_HEARTBEAT:
            self._heartbeat(group, request, response)
            return
        names: dict | None = None
        for tid, b in _entries(request.get("topics"), "acknowledgement_batches"):
            first, last, types = b.get("first_offset"), b.get("last_offset"), b.get("acknowledge_types")
            if type(first) is not int or type(last) is not int or type(types) is not list or not types \
                    or not _credible(first, last):
                continue
            if names is None:
                names = _names(pa, p0, p1)
            topic = _topic(names, tid)
            if len(types) == 1:
                kind = ACK_TYPES.get(types[0])
                if kind is not None:
                    self._ack((group, topic, client, kind), last - first + 1)
                continue
            per_type: dict[str, int] = {}     # one type per offset: summed before they are counted
            for k in types:
                kind = ACK_TYPES.get(k)
                if kind is not None:
                    per_type[kind] = per_type.get(kind, 0) + 1
            for kind, n in per_type.items():
                self._ack((group, topic, client, kind), n)
        if api_key != SHARE_FETCH or type(response) is not dict:
            return
        for tid, a in _entries(response.get("responses"), "acquired_records"):
            first, last = a.get("first_offset"), a.get("last_offset")
            if type(first) is not int or type(last) is not int or not _credible(first, last):
                continue
            if names is None:
                names = _names(pa, p0, p1)
            count = a.get("delivery_count")
            again = type(count) is int and count > 1
            self._acquire((group, _topic(names, tid), client), last - first + 1, again)

    def _acquire(self, key: tuple, records: int, again: bool) -> None:
        d = self.acquired
        v = d.get(key)
        if v is None:
            admitted = self.fold._admit(d, key, C.SHARE_ACQUIRED)
            if admitted is not key:
                self.fold._admit(d, key, C.SHARE_REDELIVERED)    # counted as folded for both metrics
            v = d.get(admitted)
            if v is None:
                v = d[admitted] = [0, 0]
        v[0] += records
        if again:
            v[1] += records

    def _ack(self, key: tuple, records: int) -> None:
        self.fold._add(self.acknowledged, key, records, C.SHARE_ACKNOWLEDGED)

    def _heartbeat(self, group: str, request: dict, response: Any) -> None:
        member = request.get("member_id")
        if not member and isinstance(response, dict):
            member = response.get("member_id")
        if not isinstance(member, str) or not member:
            return
        members = self.members.get(group)
        if members is None:
            if len(self.members) >= self.max_state:
                return
            members = self.members[group] = {}
        left = request.get("member_epoch") == LEAVE
        if member in members:
            if left:
                members[member] = True          # once left, left (as the members table's left_ts)
        elif len(members) < self.max_state:
            members[member] = left

    # -- exporters' threads --------------------------------------------------------------------

    def acquired_records(self) -> dict[tuple, int]:
        return {k: v[0] for k, v in list(self.acquired.items())}

    def redelivered_records(self) -> dict[tuple, int]:
        return {k: v[1] for k, v in list(self.acquired.items())}

    def group_members(self) -> dict[tuple, int]:
        """(group,) -> members seen heartbeating and not leaving."""
        return {(g,): sum(not left for left in list(m.values())) for g, m in list(self.members.items())}


def _credible(first: int, last: int) -> bool:
    """A range the share tables count (analysis.derived's rule): 0 <= first <= last < 2^62, fewer than
    2^31 offsets; beyond that no Kafka offsets, only forged ones."""
    return 0 <= first <= last < MAX_OFFSET and last - first < MAX_RANGE


def _entries(topics: Any, field: str) -> Iterator[tuple[Any, dict]]:
    """(topic id, entry) of each entry of ``field`` of each partition of each topic of a body.

    Bodies decoded by schema hold lists of objects there; anything else (hostile JSON) yields nothing."""
    for t in _items(topics):
        for p in _items(t.get("partitions")):
            entries = p.get(field)
            if entries:
                tid = t.get("topic_id")
                for e in _items(entries):
                    yield tid, e


def _items(v: Any) -> Any:
    """The objects of a body's array (anything else: nothing); a list as it is when all are objects."""
    if type(v) is not list:
        return ()
    for x in v:
        if type(x) is not dict:
            return [x for x in v if type(x) is dict]
    return v


def _names(pa: Sequence[list], p0: int, p1: int) -> dict:
    """topic id -> topic name, as the exchange's partition rows give them."""
    topic, topic_id = pa[_P_TOPIC], pa[_P_TOPIC_ID]
    return {topic_id[j]: topic[j] for j in range(p0, p1) if topic[j] is not None and topic_id[j] is not None}


def _topic(names: dict, topic_id: Any) -> str:
    name = names.get(topic_id)
    if name is not None:
        return name
    return topic_id if isinstance(topic_id, str) else ""
