"""The connections a capture is tracking: live ones by either direction's flow key, and those at rest
as compact records (capture.dormant); which of them rest, wake, expire or are evicted to make room.
"""

from __future__ import annotations

from typing import Any

from capture.dormant import Words, is_kafka, last_ts, rest, wake
from capture.flows import IGNORED, Flow
from capture.packet import reverse_key
from capture.reassembly import HalfStream


def _last_ts(flow: Flow) -> int:
    return flow.last_ts


def _finished(flow: Flow) -> bool:
    return flow.closed or flow.state == IGNORED


def _finished_then_quietest(flow: Flow) -> tuple[bool, int]:
    return not _finished(flow), flow.last_ts


class FlowTable:
    """Both directions' keys -> the flow, plus per-4-tuple connection counters for ``#n``, and the
    connections at rest, each a compact record (capture.dormant) by its canonical key."""

    def __init__(self, max_serials: int = 200_000) -> None:
        self.index: dict[bytes, tuple[Flow, int, HalfStream, HalfStream]] = {}
        self.flows: dict[bytes, Flow] = {}     # by the flow's own first key: each flow once
        self.dormant: dict[bytes, bytes] = {}  # at rest, oldest first (roughly: in the order they came to rest)
        self.words = Words()                   # texts the records share
        self._serials: dict[bytes, int] = {}
        self._max_serials = max_serials

    def __len__(self) -> int:
        """Connections tracked, live or at rest."""
        return len(self.flows) + len(self.dormant)

    def rest_quietest(self, target: int) -> int:
        """Put live connections to rest (compact records, capture.dormant), the least recently active
        first, down to ``target`` live ones; those in the middle of something stay. How many rested."""
        rested = 0
        for flow in sorted(self.flows.values(), key=_last_ts):
            if len(self.flows) <= target:
                break
            record = rest(flow, self.words)
            if record is not None:
                self.remove(flow)
                self.dormant[min(flow.key, flow.rkey)] = record
                rested += 1
        return rested

    def wake(self, key: bytes, pipeline: Any) -> tuple[Flow, int, HalfStream, HalfStream] | None:
        """The index entry of the resting connection a packet with flow key ``key`` belongs to, woken
        (``pipeline`` makes its dissector connection); None if none rests."""
        canon = min(key, reverse_key(key))
        record = self.dormant.pop(canon, None)
        if record is None:
            return None
        self.adopt(wake(record, canon, pipeline))
        return self.index[key]

    def evict(self, quota: int, pipeline: Any) -> list[Flow]:
        """Forget ``quota`` connections to make room: first those ended, ignored or not Kafka (at rest or
        not), then the least recently active, those at rest before the live ones. The Kafka connections
        among them are returned (woken, if they rested), for the caller to end: their end is an event."""
        dormant = self.dormant
        for canon, record in list(dormant.items()):
            if quota and not is_kafka(record):
                del dormant[canon]
                quota -= 1
        flows = sorted(self.flows.values(), key=_finished_then_quietest)
        done = 0
        while quota and done < len(flows) and _finished(flows[done]):
            self.remove(flows[done])
            done += 1
            quota -= 1
        ending: list[Flow] = []
        for canon, record in list(dormant.items()):
            if not quota:
                break
            del dormant[canon]
            quota -= 1
            ending.append(wake(record, canon, pipeline))
        for flow in flows[done:done + quota]:
            self.remove(flow)
            if not _finished(flow):
                ending.append(flow)
        return ending

    def expire(self, now: int, linger: int, idle: int, crowded: bool, pipeline: Any) -> list[Flow]:
        """Forget the connections at rest that have been quiet longer than ``linger`` (kept that long for
        stragglers) and were not Kafka, or, when ``crowded``, have been quiet longer than ``idle``. The
        Kafka ones among them are returned, woken, for the caller to end."""
        gone: list[bytes] = []
        for canon, record in self.dormant.items():      # oldest first, roughly: the first recent one ends it
            quiet = now - last_ts(record)
            if quiet <= linger:
                break
            if not is_kafka(record) or (crowded and quiet > idle):
                gone.append(canon)
        ending: list[Flow] = []
        for canon in gone:
            record = self.dormant.pop(canon)
            if is_kafka(record):
                ending.append(wake(record, canon, pipeline))
        return ending

    def adopt(self, flow: Flow) -> None:
        """A flow woken from rest: back in the index, under the serial it had."""
        self.index[flow.key] = flow.entries[0]
        self.index[flow.rkey] = flow.entries[1]
        self.flows[flow.key] = flow

    def create(self, key: bytes, sport: int, dport: int, ts: int, max_bytes: int, max_segments: int,
               max_hole_age: int, ack_wait: int = 64) -> Flow:
        rkey = reverse_key(key)
        canon = min(key, rkey)
        serial = self._serials.get(canon, 0) + 1
        if len(self._serials) >= self._max_serials:
            # Bounded memory: forget the oldest half; a forgotten 4-tuple restarts at #1.
            for k in list(self._serials)[: self._max_serials // 2]:
                del self._serials[k]
        self._serials[canon] = serial
        flow = Flow(key, sport, dport, ts, serial, max_bytes, max_segments, max_hole_age, ack_wait)
        self.index[key] = flow.entries[0]
        self.index[rkey] = flow.entries[1]
        self.flows[key] = flow
        return flow

    def remove(self, flow: Flow) -> None:
        if self.flows.get(flow.key) is flow:
            del self.flows[flow.key]
            if self.index.get(flow.key, (None,))[0] is flow:
                del self.index[flow.key]
            if self.index.get(flow.rkey, (None,))[0] is flow:
                del self.index[flow.rkey]
            flow.entries = ()                  # break the flow <-> entries cycle: freed at once, no GC
