"""Which connections a capture keeps, and for how long: new flows made (room made first, at the hard
cap), the quietest put to rest and woken by their next packet (capture.dormant), idle ones swept, all of
them finished at the end of the input. The table itself is capture/flowtable.py; ending a connection,
an event, is the pipeline's (``end``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from capture.dormant import is_kafka, wake
from capture.events import CaptureEvent
from capture.flows import IGNORED, KAFKA, UNDECIDED, Flow
from capture.flowtable import FlowTable
from capture.options import NS, CaptureOptions
from capture.reassembly import HalfStream
from capture.records import problem
from capture.release import CausalRelease
from capture.stats import CaptureStats
from dissector.connection import Connection
from dissector.connection import Options as DissectorOptions
from dissector.topics import TopicRegistry

End = Callable[[Flow, int, str], list[CaptureEvent]]
SWEEP_EVERY = 10 * NS                        # capture time between sweeps


class FlowTracker:
    """The flow table's policy: caps, rest, sweeps, eviction and the end of the input."""

    def __init__(self, options: CaptureOptions, stats: CaptureStats, release: CausalRelease, end: End,
                 dissector_options: DissectorOptions | None, topics: TopicRegistry) -> None:
        self.options = options
        self.stats = stats
        self.table = FlowTable()
        self.release = release
        self.end = end
        # The options connections are made with, to wake resting ones alike; None when the caller makes
        # the connections, which then never rest.
        self.dissector_options = dissector_options
        self.topics = topics
        self.sweep_at = 0                        # capture time of the next sweep
        self._rest_at = options.soft_flows       # live connections past which the quietest are put to rest
        self._full_reports = 0

    def new_flow(self, key: bytes, sport: int, dport: int, ts: int, out: list[CaptureEvent]) -> Flow:
        o = self.options
        if len(self.table) >= o.max_flows:
            self._evict_oldest(ts, out)
        if len(self.table.flows) >= self._rest_at and self.dissector_options is not None:
            self._rest_quietest()
        return self.table.create(key, sport, dport, ts, o.max_pending_bytes, o.max_pending_segments,
                                 int(o.max_hole_age * NS), o.max_reorder_segments)

    def _rest_quietest(self) -> None:
        """Past ``soft_flows`` live connections, the quietest that can rest go to rest, down to three
        quarters of it; woken by their next packet."""
        table = self.table
        soft = self.options.soft_flows
        self.stats.rested += table.rest_quietest(soft * 3 // 4)
        # Too few at rest to get below the mark: look again once a quarter more have come.
        self._rest_at = max(soft, len(table.flows) + max(soft, len(table.flows)) // 4)

    def wake(self, key: bytes) -> tuple[Flow, int, HalfStream, HalfStream] | None:
        """The index entry of a resting connection a packet belongs to, woken; None if none rests."""
        ent = self.table.wake(key, self)
        if ent is not None:
            self.stats.woken += 1
        return ent

    def resume_connection(self, state: tuple) -> Any:
        """A dissector connection again from what :meth:`dissector.connection.Connection.at_rest` kept
        (capture.dormant asks, waking a connection)."""
        return Connection.resume(state, self.dissector_options, topics=self.topics)

    def sweep(self, ts: int) -> Iterator[CaptureEvent]:
        """Every ``SWEEP_EVERY``: waits past their time end, idle and lingering connections go."""
        o = self.options
        self.sweep_at = ts + SWEEP_EVERY
        linger, idle = int(o.linger * NS), int(o.idle_timeout * NS)
        crowded = len(self.table) > o.soft_flows
        for flow in self.table.expire(ts, linger, idle, crowded, self):
            yield from self.end(flow, ts, "idle")
        for flow in list(self.table.flows.values()):
            quiet = ts - flow.last_ts
            if flow.gate is not None:
                yield from self.release.release(flow, ts)
            if flow.state <= KAFKA and not flow.closed:
                for h in (0, 1):
                    hs = flow.half(h)
                    if hs.has_pending():
                        yield from self.release.emit(flow, h, hs.expire(ts), ts)
            if quiet <= linger:
                continue
            if flow.closed or flow.state == IGNORED:
                self.table.remove(flow)
            elif flow.closing or flow.state == UNDECIDED or (crowded and quiet > idle):
                yield from self.end(flow, ts, "fin" if flow.closing else "idle")
                self.table.remove(flow)

    def _evict_oldest(self, ts: int, out: list[CaptureEvent]) -> None:
        # At the hard cap: a tenth go in one go (an amortised sort); ending live ones early is reported.
        tracked = len(self.table)
        ending = self.table.evict(max(1, tracked // 10), self)
        for flow in ending:
            out += self.end(flow, ts, "evicted")
        live = len(ending)
        self.stats.evicted += live
        if live:
            self._full_reports += 1
            if self._full_reports <= self.options.report_limit:
                out.append(CaptureEvent(None, problem(
                    "flow_table_full", ts,
                    f"{tracked} connections tracked (max_flows): the {live} least recently active were ended "
                    "early; their pending requests have no response", evicted=live)))

    def finish(self, ts: int) -> Iterator[CaptureEvent]:
        """End of input: every connection is ended, those at rest woken for it."""
        dormant = self.table.dormant
        while dormant:
            canon, record = dormant.popitem()
            if is_kafka(record):
                flow = wake(record, canon, self)
                yield from self.end(flow, max(ts, flow.last_ts), "end_of_capture")
        for flow in list(self.table.flows.values()):
            yield from self.end(flow, max(ts, flow.last_ts), "end_of_capture")
            self.table.remove(flow)
