"""Records in, tagged dissector events out: the one loop shared by file reading and live capture.

Per packet: parse headers, find the flow, order the bytes, then either buffer
them while deciding what the connection is, or feed them to its dissector
``Connection``. :class:`Pipeline` wires the rooms that do it together:

- capture/sources.py: what the source offers beyond its records, settled once per run;
- capture/fastpath.py: a data/ACK segment of a tracked connection (nearly every packet);
- capture/release.py: causal order across a connection's two directions;
- capture/delivery.py: ordered bytes to the dissector or to detection, and the verdict;
- capture/control.py: new flows, SYN/FIN/RST, and the end of a connection;
- capture/tracker.py: which connections are tracked, rest, are swept or evicted.

What is left here is the loop itself and the capture-level reports. Memory is bounded by the
per-direction reassembly caps, the detection limit and the flow-table caps, never by the capture's size.

Compiled build (``pipeline.pxd``): the loop calls :func:`capture.fastpath.established` as a C function;
:class:`CaptureRun` is here, not in the package's ``__init__``, so that its ``__next__`` (once per
event) is compiled too.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import replace
from typing import Any

from capture import linktypes
from capture.causal import CausalLimits
from capture.control import TcpControl
from capture.delivery import Delivery
from capture.detect import Detector, KafkaProbe
from capture.events import CaptureEvent
from capture.fastpath import established
from capture.options import NS, CaptureOptions
from capture.packet import PacketIssue, Parser, parser_for
from capture.records import RawRecord, RecordSource, problem
from capture.release import CausalRelease
from capture.shard import ShareFilter
from capture.sources import Reader, SourceAdapter, adapt
from capture.stats import CaptureStats
from capture.tls.keylog import KeyLog
from capture.tracker import FlowTracker
from dissector.connection import Options as DissectorOptions
from dissector.events import Anomaly
from dissector.held import HeldBytes
from dissector.infer import InferenceBudget
from dissector.protocols import connection_factory as connection_factory_for
from dissector.topics import TopicRegistry

__all__ = ["CaptureEvent", "CaptureOptions", "CaptureRun", "CaptureStats", "Pipeline"]

UNSUPPORTED = PacketIssue("unsupported_linktype", "")


def _unsupported(data: bytes, wirelen: int) -> PacketIssue:
    return UNSUPPORTED


class Pipeline:
    """Feed it a record source with :meth:`run`; read ``stats`` during and after."""

    def __init__(self, options: CaptureOptions | None = None, *,
                 connection_factory: Callable[[bool], Any] | None = None,
                 probe: KafkaProbe | None = None, topics: TopicRegistry | None = None) -> None:
        self.options = options or CaptureOptions()
        o = self.options
        # One per capture: a client learns topic ids from Metadata on one connection
        # and fetches by id on another.
        self.topics = topics if topics is not None else TopicRegistry()
        self._foreign = ShareFilter(o.share).foreign if o.share is not None and o.share.count > 1 else None
        # None when the caller makes the connections (see FlowTracker.dissector_options).
        dissector_options: DissectorOptions | None = None
        if connection_factory is None:
            # One budget for the bytes of unfinished frames, shared by this capture's connections.
            dissector_options = replace(o.dissector or DissectorOptions(), held=HeldBytes(o.max_held_frame_bytes),
                                        inference=InferenceBudget())
            connection_factory = connection_factory_for(dissector_options, self.topics, o.protocol)
        if probe is None and o.ports is None:
            probe = KafkaProbe.from_dissector()
        self.detector = Detector(probe, o.ports)
        self.keylog = KeyLog(o.tls_keylog, live=o.tls_keylog_live)     # KeyLogError: unreadable file
        self.detector.tls_anywhere = lambda: self.keylog.configured
        self.stats = CaptureStats()
        self.delivery = Delivery(o, self.stats, self.detector, self.keylog, connection_factory)
        limits = CausalLimits(o.max_reorder_segments, int(o.max_causal_wait * NS), o.max_causal_segments,
                              o.max_causal_bytes)
        self.release = CausalRelease(o, limits, self.stats, self.delivery.deliver)
        self.control = TcpControl(self.stats, self.release, self.delivery)
        self.tracker = FlowTracker(o, self.stats, self.release, self.control.end, dissector_options, self.topics)
        self.control.tracker = self.tracker
        self.table = self.tracker.table
        self._reported: dict[str, int] = {}
        self._linktypes_reported: set[int] = set()
        self._topics_reported = False
        # Called with the stats every 4096 packets, so a progress display moves
        # even through stretches of traffic that yield no Kafka event.
        self.on_progress: Callable[[CaptureStats], None] | None = None

    # -- the loop ------------------------------------------------------------------------------

    def run(self, source: Reader | SourceAdapter | Iterable[RawRecord],
            final: bool = True) -> Generator[CaptureEvent, None, None]:
        """Process every record; with ``final``, close all connections at the end."""
        stats = self.stats
        src = adapt(source)
        problems = src.problems
        bytes_read = src.bytes_read
        if src.tls_secrets is not None:
            self.keylog.blocks = src.tls_secrets
        stats.size = src.size
        index_get = self.table.index.get
        ports = self.options.ports
        control = self.control.segment
        foreign = self._foreign
        tracker = self.tracker
        release, delivery = self.release, self.delivery
        last_lt = -1
        parse: Parser = _unsupported
        npk = nseg = 0
        ts = 0
        dropped = False
        if foreign is not None and ports is None and src.drop_foreign is not None:
            # The reader may drop other shares' TCP/IPv4 packets itself, before they are Python objects.
            src.drop_foreign(self.options.share)  # type: ignore[arg-type]
        try:
            for rec in src.records:
                if type(rec) is int:
                    # That many TCP segments the reader dropped for another share (capture.shard.Dropping).
                    dropped = True
                    npk += rec
                    nseg += rec
                    stats.packets = npk
                    if problems:
                        yield from self._source_problems(problems)
                    continue
                ts, lt, data, wirelen = rec  # type: ignore[misc]
                npk += 1
                # Kept current per packet: it is the clock every share of a capture agrees on.
                stats.packets = npk
                if problems:
                    yield from self._source_problems(problems)
                if not npk & 4095:
                    stats.tcp_segments = nseg
                    if bytes_read is not None:
                        stats.bytes_read = bytes_read()
                    if self.on_progress is not None:
                        self.on_progress(stats)
                    if ts >= tracker.sweep_at:
                        yield from tracker.sweep(ts)
                    if self.topics.dropped and not self._topics_reported:
                        yield self._topics_full(ts)
                if lt != last_lt:
                    last_lt = lt
                    found = parser_for(lt)
                    if found is None:
                        parse = _unsupported
                        if lt not in self._linktypes_reported:
                            yield self._unsupported(lt, ts)
                    else:
                        parse = found
                seg = parse(data, wirelen)
                if type(seg) is not tuple:
                    if seg is None:
                        stats.non_tcp += 1
                    else:
                        yield from self._packet_issue(seg, ts)  # type: ignore[arg-type]
                    continue
                key, sport, dport, seq, ack, flags, payload, missing = seg  # type: ignore[misc]
                if ports is not None and sport not in ports and dport not in ports:
                    stats.non_tcp += 1
                    continue
                nseg += 1
                ent = index_get(key)
                if ent is None or flags & 7:                 # new flow, SYN, FIN or RST
                    if ent is None and foreign is not None and foreign(key):
                        continue                             # another share decodes this connection
                    evs = control(ent, seg, ts)
                    if evs:
                        yield from evs
                    continue
                flow, h, hs, peer = ent
                evs = established(release, delivery, flow, h, hs, peer, seg, seq, ack, flags, payload, missing, ts)
                if evs:
                    yield from evs
            if dropped:
                ts = src.last_ts()                           # the last record's, as without dropping
            if problems:
                yield from self._source_problems(problems)
            if final:
                yield from self.finish(ts)
            if self.topics.dropped and not self._topics_reported:
                yield self._topics_full(ts)
        finally:
            stats.packets, stats.tcp_segments = npk, nseg
            if bytes_read is not None:
                stats.bytes_read = bytes_read()
                stats.caplen_exceeds_wirelen = src.caplen_over_wirelen()

    def finish(self, ts: int) -> Iterator[CaptureEvent]:
        """End of input: every connection is closed, undecided ones get a final verdict."""
        return self.tracker.finish(ts)

    # -- capture-level reports -----------------------------------------------------------------

    def _source_problems(self, problems: list[Anomaly]) -> Iterator[CaptureEvent]:
        while problems:
            p = problems.pop(0)
            self.stats.capture_problems += 1
            yield CaptureEvent(None, p)

    def _topics_full(self, ts: int) -> CaptureEvent:
        self._topics_reported = True
        return CaptureEvent(None, problem(
            "topic_registry_full", ts,
            f"more than {self.topics.max_entries} topic ids learnt: the least recently seen are forgotten, so "
            "later requests naming them by id alone have no topic name (reported once)"))

    def _unsupported(self, lt: int, ts: int) -> CaptureEvent:
        self._linktypes_reported.add(lt)
        return CaptureEvent(None, problem(
            "unsupported_linktype", ts,
            f"link type {linktypes.name(lt)} is not supported; its packets are skipped", linktype=lt))

    def _packet_issue(self, issue: PacketIssue, ts: int) -> Iterator[CaptureEvent]:
        s = self.stats
        if issue is UNSUPPORTED:
            s.unsupported_linktype += 1
            return
        if issue.kind == "ip_fragment":
            s.ip_fragments += 1
        elif issue.kind == "truncated_header":
            s.truncated_headers += 1
        else:
            s.malformed_packets += 1
        n = self._reported.get(issue.kind, 0) + 1
        self._reported[issue.kind] = n
        limit = self.options.report_limit
        if n <= limit:
            detail = issue.detail if n < limit else \
                f"{issue.detail} (further '{issue.kind}' reports suppressed; see the stats)"
            yield CaptureEvent(None, problem(issue.kind, ts, detail))

class CaptureRun:
    """An iterator of :class:`CaptureEvent` over one capture file, with live ``stats``.

    ``stats.bytes_read`` / ``stats.size`` drive a progress bar; the file is
    closed when iteration ends (or on :meth:`close`).
    """

    def __init__(self, source: RecordSource, pipeline: Pipeline) -> None:
        self.source = source
        self.pipeline = pipeline
        self._events: Generator[CaptureEvent, None, None] = pipeline.run(source)

    @property
    def stats(self) -> CaptureStats:
        return self.pipeline.stats

    def __iter__(self) -> Iterator[CaptureEvent]:
        return self

    def __next__(self) -> CaptureEvent:
        try:
            return next(self._events)
        except BaseException:
            self.source.close()
            raise

    def close(self) -> None:
        self._events.close()
        self.source.close()
