"""Records in, tagged dissector events out: the one loop shared by file reading and live capture.

Per packet: parse headers, find the flow, order the bytes, then either buffer
them while deciding what the connection is, or feed them to its dissector
``Connection``. The in-order case is handled inline in :meth:`Pipeline.run`;
everything else (new flows, SYN/FIN/RST, holes, retransmissions) takes the
slower general path. Memory is bounded by the per-direction reassembly caps,
the detection limit and the flow-table caps, never by the capture's size.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from capture import linktypes
from capture.causal import CausalGate, CausalLimits, first_waiting
from capture.detect import Decision, Detector, KafkaProbe, Verdict
from capture.dormant import is_kafka, wake
from capture.flows import (
    IGNORED,
    KAFKA,
    TLS,
    UNDECIDED,
    ConnectionEnd,
    ConnectionInfo,
    Flow,
)
from capture.flowtable import FlowTable
from capture.packet import ACK, FIN, RST, SYN, PacketIssue, Parser, parser_for
from capture.reassembly import CONFLICT, DATA, GAP, HALF, MASK, HalfStream
from capture.shard import Share, ShareFilter
from capture.records import RawRecord, RecordSource, problem
from capture.tls.keylog import KeyLog
from dissector.connection import Connection
from dissector.connection import Options as DissectorOptions
from dissector.held import HeldBytes
from dissector.infer import InferenceBudget
from dissector.protocols import connection_factory as connection_factory_for
from dissector.events import Anomaly, Direction, Event
from dissector.topics import TopicRegistry

NS = 1_000_000_000

UNSUPPORTED = PacketIssue("unsupported_linktype", "")


def _unsupported(data: bytes, wirelen: int) -> PacketIssue:
    return UNSUPPORTED


def _carried_data(flow: Flow) -> bool:
    """Whether an undecided connection saw bytes of data (or lost some): what a verdict is about."""
    return bool(flow.bufs[0] or flow.bufs[1]) or any(
        op[0] == DATA or (op[0] == GAP and op[4] != "midstream") for _, op in flow.ops)


_GAP_WHY: dict[str, Callable[[int | None], str]] = {
    "midstream": lambda n: "the capture began after this direction's first bytes",
    "lost": lambda n: f"{n} bytes missing from the capture",
    "truncated": lambda n: f"{n} bytes cut by the capture's snaplen",
    "reorder_limit": lambda n: f"{n} bytes still missing when the out-of-order buffer reached its cap "
                               "(max_pending_bytes / max_pending_segments); declared lost",
    "acked": lambda n: f"{n} bytes the peer acknowledged never reached the capture (waited for past "
                       "max_causal_wait); declared lost",
}


@dataclass
class CaptureOptions:
    ports: frozenset[int] | None = None      # explicit Kafka ports; None: detect on every TCP port
    dissector: Any = None                    # dissector.connection.Options; None: its defaults
    protocol: Any = None                     # dissector.protocols.ProtocolChoice; None: detect per connection
    detect_limit: int = 16 * 1024            # bytes buffered per direction while undecided
    max_pending_bytes: int = 4 << 20         # out-of-order bytes held per direction
    max_pending_segments: int = 2048
    max_hole_age: float = 10.0               # seconds a hole may wait for its retransmission
    # Bytes the peer acknowledged, or that data of the peer waits for (causal order), are waited for
    # this many more segments of their connection (capture order, not time: reordering is counted in
    # packets), then declared lost; max_hole_age / max_causal_wait bound the wait in capture time.
    max_reorder_segments: int = 64
    max_flows: int = 500_000                 # hard cap, live and resting: least recently active are ended
    soft_flows: int = 10_000                 # above this, flows idle longer than idle_timeout go
    idle_timeout: float = 600.0              # seconds of capture time
    linger: float = 120.0                    # closed / ignored / undecided flows are dropped after this idle
    report_limit: int = 100                  # per kind, for per-packet capture anomalies
    # Causal order across directions (capture/causal.py): how long / how much may wait.
    max_causal_wait: float = 10.0            # seconds of capture time (see max_reorder_segments)
    max_causal_segments: int = 1024          # per connection
    max_causal_bytes: int = 4 << 20          # per connection
    max_held_frame_bytes: int = 1 << 30      # bytes of frames still arriving, all connections (dissector/held.py)
    share: Share | None = None               # decode only this share's connections (see capture.shard)
    tls_keylog: tuple[str, ...] = ()         # NSS key log files (pcapng secrets blocks are used anyway)
    tls_keylog_live: bool = False            # the key logs grow while the capture runs: re-read them


@dataclass
class CaptureEvent:
    """A dissector event (or capture anomaly / connection end) and the connection it belongs to."""

    conn: ConnectionInfo | None              # None for capture-level problems (file damage, fragments)
    event: Event | ConnectionEnd


@dataclass
class CaptureStats:
    bytes_read: int = 0                      # of the file on disk (compressed if gzip)
    size: int | None = None                  # total to read, when known
    packets: int = 0
    tcp_segments: int = 0
    non_tcp: int = 0                         # not TCP over IPv4/IPv6 (skipped)
    ip_fragments: int = 0
    truncated_headers: int = 0
    malformed_packets: int = 0
    unsupported_linktype: int = 0
    caplen_exceeds_wirelen: int = 0
    capture_problems: int = 0                # damaged/cut file, drops reported by the writer
    connections: dict[str, int] = field(default_factory=dict)   # by kind: kafka, tls, not_kafka
    gaps: int = 0
    gap_bytes: int = 0
    truncated_segments: int = 0
    duplicate_segments: int = 0
    out_of_order_segments: int = 0
    conflicts: int = 0
    evicted: int = 0
    causal_held: int = 0                     # segments held back until what they acknowledge was delivered
    causal_forced: int = 0                   # ... let go by the per-connection cap instead
    dissector_errors: int = 0                # exceptions from the dissector (bugs), contained
    rested: int = 0                          # connections put to rest as compact records (capture.dormant)
    woken: int = 0                           # ... and woken again by a packet
    kernel_drops: int | None = None          # live capture only, when the OS tells


def _anomaly(kind: str, direction: Direction | None, ts: int, detail: str,
             offset: int | None = None, **extra: Any) -> Anomaly:
    return Anomaly(kind=kind, direction=direction, ts=ts, detail=detail, stream_offset=offset, extra=extra)


class _DeadConnection:
    """Stands in for a dissector Connection that raised: takes bytes, says nothing."""

    def feed(self, direction: Direction, data: bytes, ts: int) -> list[Event]:
        return []

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        return []

    def close(self, ts: int) -> list[Event]:
        return []


_DEAD = _DeadConnection()


def _established(pipe: Pipeline, flow: Flow, h: int, hs: HalfStream, peer: HalfStream, seg: tuple, seq: int,
                 ack: int, flags: int, payload: bytes, missing: int, ts: int) -> list[CaptureEvent] | None:
    """A segment of a flow already in the table: what :meth:`Pipeline.run` does for nearly every
    packet, and the events it completes. A function of its own because compiled, pipeline.pxd
    types its flow and streams, and their fields are then read from C structs (a generator's
    locals cannot be typed)."""
    flow.last_ts = ts
    if flow.skip:                                # TLS / not Kafka / ended: nothing to order
        return None
    if flow.gate is not None or (flags & ACK and peer.next_seq is not None
                                 and 0 < (ack - peer.next_seq) & MASK < HALF):
        return pipe._segment(flow, h, seg, ts)   # it acknowledges bytes not seen yet, or others wait
    released = None
    if flags & ACK:
        peer.peer_ack = ack
        if peer.has_pending():
            released = pipe._emit(flow, 1 - h, peer.acked(ts), ts)
    if not payload and not missing:
        return released
    # Fast path: the next bytes in order, nothing buffered, all captured.
    if seq == hs.next_seq and not missing and not hs.has_pending():
        off = hs.take_next(payload)
        if flow.state == KAFKA:
            try:
                dev = flow.conn.feed(flow.dirs[h], payload, ts)
            except Exception as exc:  # noqa: BLE001  (a dissector bug must not end the capture)
                dev = pipe._dissector_failed(flow, exc, ts)
            if dev:
                info = flow.info
                info.last_ts = ts  # type: ignore[union-attr]
                evs = [CaptureEvent(info, ev) for ev in dev]
            else:
                evs = None
        else:
            evs = pipe._deliver_undecided(flow, h, [(DATA, off, payload, ts, ack if flags & ACK else None)])
    else:
        evs = pipe._emit(flow, h, hs.add(seq, payload, missing, ts, ack if flags & ACK else None), ts)
    if released and evs:
        return released + evs
    return evs or released


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
        # The options connections are made with, to wake resting ones alike (capture.dormant); None when
        # the caller makes the connections, which then never rest.
        self._dissector_options: DissectorOptions | None = None
        if connection_factory is None:
            # One budget for the bytes of unfinished frames, shared by this capture's connections.
            dissector_options = replace(o.dissector or DissectorOptions(), held=HeldBytes(o.max_held_frame_bytes),
                                        inference=InferenceBudget())
            connection_factory = connection_factory_for(dissector_options, self.topics, o.protocol)
            self._dissector_options = dissector_options
        if probe is None and o.ports is None:
            probe = KafkaProbe.from_dissector()
        self._new_connection = connection_factory
        self.detector = Detector(probe, o.ports)
        self.keylog = KeyLog(o.tls_keylog, live=o.tls_keylog_live)     # KeyLogError: unreadable file
        self.detector.tls_anywhere = lambda: self.keylog.configured
        self.table = FlowTable()
        self.stats = CaptureStats()
        self._reported: dict[str, int] = {}
        self._linktypes_reported: set[int] = set()
        self._topics_reported = False
        self._sweep_at = 0
        self._rest_at = o.soft_flows             # live connections past which the quietest are put to rest
        self._causal_limits = CausalLimits(o.max_reorder_segments, int(o.max_causal_wait * NS), o.max_causal_segments,
                                           o.max_causal_bytes)
        self._source: RecordSource | None = None
        # Called with the stats every 4096 packets, so a progress display moves
        # even through stretches of traffic that yield no Kafka event.
        self.on_progress: Callable[[CaptureStats], None] | None = None

    # -- the loop ------------------------------------------------------------------------------

    def run(self, source: RecordSource | Iterable[RawRecord],
            final: bool = True) -> Generator[CaptureEvent, None, None]:
        """Process every record; with ``final``, close all connections at the end."""
        stats = self.stats
        problems: list[Anomaly] = getattr(source, "problems", [])
        self._source = source if hasattr(source, "bytes_read") else None  # type: ignore[assignment]
        blocks = getattr(source, "tls_secrets", None)      # pcapng Decryption Secrets Blocks, as read
        if blocks is not None:
            self.keylog.blocks = blocks
        stats.size = getattr(source, "size", None)
        index_get = self.table.index.get
        ports = self.options.ports
        control = self._control
        foreign = self._foreign
        last_lt = -1
        parse: Parser = _unsupported
        npk = nseg = 0
        ts = 0
        dropped = False
        if foreign is not None and ports is None:
            # The reader may drop other shares' TCP/IPv4 packets itself, before they are Python objects.
            drop = getattr(source, "drop_foreign", None)
            if drop is not None:
                drop(self.options.share)
        try:
            for rec in source:
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
                    if self._source is not None:
                        stats.bytes_read = self._source.bytes_read
                    if self.on_progress is not None:
                        self.on_progress(stats)
                    if ts >= self._sweep_at:
                        yield from self._sweep(ts)
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
                evs = _established(self, flow, h, hs, peer, seg, seq, ack, flags, payload, missing, ts)
                if evs:
                    yield from evs
            if dropped:
                ts = source.last_ts  # type: ignore[union-attr]  # the last record's, as without dropping
            if problems:
                yield from self._source_problems(problems)
            if final:
                yield from self.finish(ts)
            if self.topics.dropped and not self._topics_reported:
                yield self._topics_full(ts)
        finally:
            stats.packets, stats.tcp_segments = npk, nseg
            if self._source is not None:
                stats.bytes_read = self._source.bytes_read
                stats.caplen_exceeds_wirelen = getattr(self._source, "caplen_over_wirelen", 0)

    def finish(self, ts: int) -> Iterator[CaptureEvent]:
        """End of input: every connection is closed, undecided ones get a final verdict."""
        dormant = self.table.dormant
        while dormant:
            canon, record = dormant.popitem()
            if is_kafka(record):
                flow = wake(record, canon, self)
                yield from self._end(flow, max(ts, flow.last_ts), "end_of_capture")
        for flow in list(self.table.flows.values()):
            yield from self._end(flow, max(ts, flow.last_ts), "end_of_capture")
            self.table.remove(flow)

    def resume_connection(self, state: tuple) -> Any:
        """A dissector connection again from what :meth:`dissector.connection.Connection.at_rest` kept."""
        return Connection.resume(state, self._dissector_options, topics=self.topics)

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

    # -- flows ---------------------------------------------------------------------------------

    def _new_flow(self, key: bytes, sport: int, dport: int, ts: int, out: list[CaptureEvent]) -> Flow:
        o = self.options
        if len(self.table) >= o.max_flows:
            self._evict_oldest(ts, out)
        if len(self.table.flows) >= self._rest_at and self._dissector_options is not None:
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

    def _wake(self, key: bytes) -> tuple[Flow, int, HalfStream, HalfStream] | None:
        """The index entry of a resting connection a packet belongs to, woken; None if none rests."""
        ent = self.table.wake(key, self)
        if ent is not None:
            self.stats.woken += 1
        return ent

    def _control(self, ent: tuple[Flow, int, HalfStream, HalfStream] | None, seg: tuple,
                 ts: int) -> list[CaptureEvent]:
        """New flows and SYN/FIN/RST: the general per-segment path."""
        key, sport, dport, seq, ack, flags, payload, missing = seg
        out: list[CaptureEvent] = []
        if ent is None and self.table.dormant:
            ent = self._wake(key)
            if ent is not None and not flags & 7:   # at rest until now: an ordinary segment of it
                flow, h, hs, peer = ent
                return _established(self, flow, h, hs, peer, seg, seq, ack, flags, payload, missing, ts) or out
        if ent is not None and ent[0].gate is not None:
            # What may go now goes first; the rest waits on (ending the flow lets everything go).
            out += self._release(ent[0], ts)
        if ent is None:
            if flags & RST and not payload:
                return out                           # reset of a connection never seen
            flow = self._new_flow(key, sport, dport, ts, out)
            h = 0
        else:
            flow, h = ent[0], ent[1]
        if flags & SYN:
            flow, h = self._syn(flow, h, key, sport, dport, seq, ack, flags, ts, out)
        hs, peer = (flow.h1, flow.h0) if h else (flow.h0, flow.h1)
        flow.last_ts = ts
        if flow.closed:
            return out                               # stragglers after FIN/RST
        ack_of = ack if flags & ACK else None
        if flags & RST:
            if flow.state <= KAFKA and (payload or missing):
                out += self._emit(flow, h, hs.add(seq, payload, missing, ts, ack_of), ts)
            self._close(flow, ts, "rst", out)
            return out
        if flow.state > KAFKA:
            if flags & FIN:
                hs.fin_off = 0                       # not reassembled: only "said goodbye" matters
                if peer.fin_off is not None:
                    self._close(flow, ts, "fin", out)
            return out
        if flags & ACK:
            peer.peer_ack = ack
            if peer.has_pending():
                out += self._emit(flow, 1 - h, peer.acked(ts), ts)
        if payload or missing or (flags & FIN and not hs.started):
            out += self._emit(flow, h, hs.add((seq + 1) & MASK if flags & SYN else seq,
                                              payload, missing, ts, ack_of), ts)
        if flags & FIN:
            hs.fin(seq, len(payload) + missing)
            if flow.gate is not None:
                out += self._release(flow, ts)       # what waited for the bytes this FIN ends
            if peer.fin_off is not None:
                if hs.finished and peer.finished:
                    self._close(flow, ts, "fin", out)
                else:
                    flow.closing = True
        elif flow.closing and hs.finished and peer.finished:
            self._close(flow, ts, "fin", out)
        return out

    def _syn(self, flow: Flow, h: int, key: bytes, sport: int, dport: int, seq: int, ack: int,
             flags: int, ts: int, out: list[CaptureEvent]) -> tuple[Flow, int]:
        hs = flow.half(h)
        is_synack = bool(flags & ACK)
        if flow.closed:
            reuse = True
        elif hs.isn is not None:
            reuse = hs.isn != seq                    # same ISN: a retransmitted SYN
        elif is_synack:
            reuse = hs.started
        else:
            reuse = flow.h0.started or flow.h1.started
        if reuse:
            # Port reuse: a SYN after FIN/RST, with another ISN, or on a stream already carrying data.
            if not flow.closed:
                self._close(flow, ts, "reused", out)
            self.table.remove(flow)
            flow = self._new_flow(key, sport, dport, ts, out)
            h = 0
            hs = flow.h0
        hs.syn(seq)
        flow.syn_seen = True
        peer = flow.half(1 - h)
        if is_synack:
            peer.expect(ack)
            if flow.client_half is None:
                flow.set_roles(1 - h)
        elif flow.client_half is None:
            flow.set_roles(h)
        return flow, h

    def _general(self, flow: Flow, h: int, ops: list[tuple]) -> list[CaptureEvent]:
        """Apply reassembly operations of half ``h``: to the dissector, or to the detection buffer."""
        if not ops:
            return []
        if flow.state == KAFKA:
            return self._apply(flow, h, ops)
        if flow.state == UNDECIDED:
            return self._deliver_undecided(flow, h, ops)
        return []

    def _apply(self, flow: Flow, h: int, ops: list[tuple]) -> list[CaptureEvent]:
        out: list[CaptureEvent] = []
        info = flow.info
        conn = flow.conn
        direction = flow.dirs[h]
        s = self.stats
        for op in ops:
            kind = op[0]
            if kind == DATA:
                try:
                    evs = conn.feed(direction, op[2], op[3])
                except Exception as exc:  # noqa: BLE001  (contained: see _dissector_failed)
                    evs = self._dissector_failed(flow, exc, op[3])
                    conn = flow.conn
            elif kind == GAP:
                _, off, nbytes, ts, reason = op
                if reason == "midstream" and not flow.syn_seen:
                    continue                         # the Connection was made mid_stream already
                s.gaps += 1
                if nbytes is not None:
                    s.gap_bytes += nbytes
                if reason == "truncated":
                    s.truncated_segments += 1
                try:
                    evs = conn.gap(direction, ts, nbytes)
                except Exception as exc:  # noqa: BLE001  (contained: see _dissector_failed)
                    evs = self._dissector_failed(flow, exc, ts)
                    conn = flow.conn
                # The dissector reports the gap itself; add what only capture knows, or report it.
                for ev in evs:
                    if isinstance(ev, Anomaly) and ev.kind == "gap":
                        ev.extra["reason"] = reason
                        ev.extra["tcp_offset"] = off
                        break
                else:
                    out.append(CaptureEvent(info, _anomaly("gap", direction, ts, _GAP_WHY[reason](nbytes),
                                                           off, bytes=nbytes, reason=reason)))
            elif kind == CONFLICT:
                _, off, nbytes, ts = op
                s.conflicts += 1
                out.append(CaptureEvent(info, _anomaly(
                    "tcp_conflict", direction, ts,
                    f"a retransmitted copy of {nbytes} bytes differs from the first copy (first kept)",
                    off, nbytes=nbytes)))
                continue
            else:
                _, off, nbytes, ts = op
                out.append(CaptureEvent(info, _anomaly(
                    "tcp_out_of_window", direction, ts,
                    f"a {nbytes}-byte segment lies {off - flow.half(h).offset:+d} bytes from the stream "
                    "position; dropped", off, nbytes=nbytes)))
                continue
            if evs:
                info.last_ts = op[3]  # type: ignore[union-attr]
                for ev in evs:
                    out.append(CaptureEvent(info, ev))
        return out

    # -- causal order across directions (capture/causal.py) ------------------------------------

    def _segment(self, flow: Flow, h: int, seg: tuple, ts: int) -> list[CaptureEvent]:
        """One data/ACK segment (no SYN/FIN/RST) of an established flow, the general way: ordered by its
        half at once, its operations handed on in causal order (what :func:`_established` does inline
        for the commonest case)."""
        if flow.skip:
            return []
        _, _, _, seq, ack, flags, payload, missing = seg
        hs, peer = (flow.h1, flow.h0) if h else (flow.h0, flow.h1)
        out: list[CaptureEvent] = []
        ack_of = None
        if flags & ACK:
            ack_of = ack
            peer.peer_ack = ack
            if peer.has_pending():
                out += self._emit(flow, 1 - h, peer.acked(ts), ts)
        if payload or missing:
            out += self._emit(flow, h, hs.add(seq, payload, missing, ts, ack_of), ts)
        gate = flow.gate
        if gate is not None:
            gate.segments += 1
            out += self._release(flow, ts)      # a segment later: a wait may be over
        return out

    def _emit(self, flow: Flow, h: int, ops: list[tuple], now: int) -> list[CaptureEvent]:
        """Operations of half ``h``, in its order, handed on at once or held until the bytes of the other
        half their segment acknowledged have been (see capture/causal.py)."""
        if not ops:
            return []
        gate = flow.gate
        if gate is None:
            i = first_waiting(flow.half(1 - h), ops)
            if i is None:
                return self._general(flow, h, ops)
            gate = flow.gate = CausalGate()
            out = self._general(flow, h, ops[:i])
            return out + self._hold(flow, gate, h, ops[i:], now)
        return self._hold(flow, gate, h, ops, now)

    def _hold(self, flow: Flow, gate: CausalGate, h: int, ops: list[tuple], now: int) -> list[CaptureEvent]:
        out: list[CaptureEvent] = []
        for op in ops:
            if op[0] == DATA:
                gate.hold(h, op, op[4])
            elif op[0] == GAP:
                gate.hold(h, op, None)
            else:
                out += self._general(flow, h, [op])     # a report (conflict, out of window): no order to keep
        last = gate.held[h][-1] if gate.held[h] else None
        out += self._release(flow, now)
        if flow.gate is not None and last is not None and gate.held[h] and gate.held[h][-1] is last:
            self.stats.causal_held += 1
        return out

    def _release(self, flow: Flow, now: int, everything: bool = False) -> list[CaptureEvent]:
        """Hand on what the gate lets go now (``everything``: all, the connection ends); the cap biting
        is counted and reported once."""
        gate = flow.gate
        out: list[CaptureEvent] = []
        if gate is not None:
            for h, op, forced in gate.ready((flow.h0, flow.h1), now, self._causal_limits, everything):
                if forced:
                    self.stats.causal_forced += 1
                    if flow.causal_cap is None:
                        flow.causal_cap = (op[3], h)
                        if flow.info is not None:
                            out.append(self._causal_cap_report(flow))
                out += self._general(flow, h, [op])
        if not gate:
            flow.gate = None
        return out

    def _causal_cap_report(self, flow: Flow) -> CaptureEvent:
        """The causal-order cap bit on this connection: reported once, as soon as it is known to be Kafka."""
        o = self.options
        (ts, h), flow.causal_cap = flow.causal_cap, ()  # type: ignore[misc]
        return CaptureEvent(flow.info, _anomaly(  # type: ignore[arg-type]
            "causal_order_limit", flow.dirs[h], ts,
            f"more than {o.max_causal_segments} segments or {o.max_causal_bytes} bytes waited for bytes "
            "of the other direction they acknowledge; the oldest went on without them (reported once)"))

    # -- detection -----------------------------------------------------------------------------

    def _deliver_undecided(self, flow: Flow, h: int, ops: list[tuple]) -> list[CaptureEvent]:
        limit = self.options.detect_limit
        buf = flow.bufs[h]
        for op in ops:
            if op[0] == DATA:
                payload = op[2]
                if not flow.full[h]:
                    room = limit - len(buf)
                    buf += payload[:room]
                    if len(payload) >= room:
                        flow.full[h] = True
                if flow.held[h] < limit:
                    flow.held[h] += len(payload)
                    flow.ops.append((h, op))
                else:
                    # Over the cap while still undecided: remember only how much was skipped.
                    flow.ops.append((h, (GAP, op[1], len(payload), op[3], "undecided")))
            else:
                if op[0] == GAP and op[4] != "midstream":
                    if buf:
                        flow.full[h] = True          # no sniffing across a hole
                    else:
                        flow.lost_start[h] = True    # its first bytes are lost: sniff as if mid-stream
                flow.ops.append((h, op))
        decision = self.detector.decide(
            (bytes(flow.bufs[0]), bytes(flow.bufs[1])), (flow.full[0], flow.full[1]),
            self._known_client(flow), flow.src_ports, final=False)
        if decision is None:
            return []
        return self._decided(flow, decision, ops[-1][3])

    @staticmethod
    def _known_client(flow: Flow) -> int | None:
        """The client half, if its stream is known from its first byte (else detect as mid-stream)."""
        c = flow.client_half
        if c is None or flow.lost_start[c]:
            return None
        hs = flow.half(c)
        if not flow.bufs[c] and hs.started and hs.peer_ack is not None and hs.position(hs.peer_ack) > hs.offset:
            return None      # the broker acknowledged client bytes the capture never saw
        return c

    def _decided(self, flow: Flow, d: Decision, ts: int) -> list[CaptureEvent]:
        out: list[CaptureEvent] = []
        ops, flow.ops = flow.ops, None
        # Detection is over: its buffers go (a connection's memory, multiplied by the connections).
        flow.bufs = flow.full = flow.held = flow.lost_start = None
        conns = self.stats.connections
        if d.verdict is Verdict.NOT_KAFKA:
            flow.state = IGNORED
            flow.skip = True
            conns["not_kafka"] = conns.get("not_kafka", 0) + 1
            return out
        if flow.client_half is None:
            flow.set_roles(d.client_half if d.client_half is not None else 0)
        flow.state = KAFKA
        if d.verdict is Verdict.TLS:
            # Decrypted (given keys) by the TLS layer, which then detects and dissects like plaintext.
            o = self.options
            quiet = not any(p in self.detector.kafka_ports for p in flow.src_ports)
            if not quiet:
                conns["tls"] = conns.get("tls", 0) + 1
            # Loaded with the first TLS connection: plaintext captures skip the TLS layer's start-up.
            from capture.tlsflow import TlsConnection
            flow.conn = TlsConnection(self.keylog, lambda: self._make_connection(flow, False),
                                      flow.make_info("tls", d.reason),
                                      probe=self.detector.probe if o.ports is None else None, quiet=quiet,
                                      detect_limit=o.detect_limit,
                                      # Off Kafka ports (HTTPS...) little is held waiting for keys.
                                      max_held=o.detect_limit if quiet else o.max_pending_bytes)
        else:
            conns["kafka"] = conns.get("kafka", 0) + 1
            flow.make_info("kafka", d.reason)
            flow.conn = self._make_connection(flow, not flow.syn_seen)
        if flow.causal_cap:
            out.append(self._causal_cap_report(flow))      # the cap bit while it was undecided
        for h, op in ops:
            if op[0] == GAP and op[4] == "undecided":
                op = (GAP, op[1], op[2], op[3], "lost")
            out += self._apply(flow, h, [op])
        return out

    def _make_connection(self, flow: Flow, mid_stream: bool) -> Any:
        if self.options.protocol is not None and self.options.protocol.forced:
            return self._new_connection(mid_stream, flow.info.broker_port)  # type: ignore[union-attr]
        return self._new_connection(mid_stream)

    # -- ends ----------------------------------------------------------------------------------

    def _close(self, flow: Flow, ts: int, reason: str, out: list[CaptureEvent]) -> None:
        out.extend(self._end(flow, ts, reason))

    def _end(self, flow: Flow, ts: int, reason: str) -> list[CaptureEvent]:
        """Flush both halves, close the dissector connection, mark the flow ended."""
        out: list[CaptureEvent] = []
        if flow.closed:
            return out
        if flow.state <= KAFKA:
            # Holes are lost now; what waited for them, in either direction, goes in causal order.
            out += self._emit(flow, 0, flow.h0.close(ts), ts)
            out += self._emit(flow, 1, flow.h1.close(ts), ts)
        if flow.gate is not None:
            out += self._release(flow, ts, everything=True)
        if flow.state == UNDECIDED:
            d = None
            if _carried_data(flow):              # (a verdict is counted: only for a connection with data)
                d = self.detector.decide((bytes(flow.bufs[0]), bytes(flow.bufs[1])),
                                         (flow.full[0], flow.full[1]), self._known_client(flow),
                                         flow.src_ports, final=True)
            if d is not None:
                out += self._decided(flow, d, ts)
            else:
                flow.state = IGNORED             # nothing but handshakes and ACKs
                flow.skip = True
        if flow.state == KAFKA:
            info = flow.info
            assert info is not None
            try:
                evs = flow.conn.close(ts)
            except Exception as exc:  # noqa: BLE001  (contained: see _dissector_failed)
                evs = self._dissector_failed(flow, exc, ts)
            for ev in evs:
                out.append(CaptureEvent(info, ev))
            self._count_end(flow)
        if flow.state in (KAFKA, TLS) and not getattr(flow.conn, "hidden", False):
            info = flow.info
            assert info is not None
            info.last_ts = max(info.last_ts, flow.last_ts)
            out.append(CaptureEvent(info, flow.end_event(ts, reason)))
        flow.closed = True
        flow.skip = True
        flow.conn = None
        return out

    def _dissector_failed(self, flow: Flow, exc: Exception, ts: int) -> list[Event]:
        """The dissector raised (a bug: it must not): report it, stop decoding this connection."""
        flow.conn = _DEAD
        self.stats.dissector_errors += 1
        where = exc.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        at = f" at {where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where is not None else ""
        return [_anomaly("dissector_error", None, ts,
                         f"the dissector raised {type(exc).__name__}: {exc}{at}; "
                         "the rest of this connection is not decoded", error=type(exc).__name__)]

    def _count_end(self, flow: Flow) -> None:
        s = self.stats
        for hs in (flow.h0, flow.h1):
            s.duplicate_segments += hs.dup_segments
            s.out_of_order_segments += hs.ooo_segments

    def _sweep(self, ts: int) -> Iterator[CaptureEvent]:
        o = self.options
        self._sweep_at = ts + 10 * NS
        linger, idle = int(o.linger * NS), int(o.idle_timeout * NS)
        crowded = len(self.table) > o.soft_flows
        for flow in self.table.expire(ts, linger, idle, crowded, self):
            yield from self._end(flow, ts, "idle")
        for flow in list(self.table.flows.values()):
            quiet = ts - flow.last_ts
            if flow.gate is not None:
                yield from self._release(flow, ts)
            if flow.state <= KAFKA and not flow.closed:
                for h in (0, 1):
                    hs = flow.half(h)
                    if hs.has_pending():
                        yield from self._emit(flow, h, hs.expire(ts), ts)
            if quiet <= linger:
                continue
            if flow.closed or flow.state == IGNORED:
                self.table.remove(flow)
            elif flow.closing or flow.state == UNDECIDED or (crowded and quiet > idle):
                yield from self._end(flow, ts, "fin" if flow.closing else "idle")
                self.table.remove(flow)

    def _evict_oldest(self, ts: int, out: list[CaptureEvent]) -> None:
        # At the hard cap: a tenth go in one go (an amortised sort); ending live ones early is reported.
        tracked = len(self.table)
        ending = self.table.evict(max(1, tracked // 10), self)
        for flow in ending:
            out += self._end(flow, ts, "evicted")
        live = len(ending)
        self.stats.evicted += live
        if live:
            n = self._reported.get("flow_table_full", 0) + 1
            self._reported["flow_table_full"] = n
            if n <= self.options.report_limit:
                out.append(CaptureEvent(None, problem(
                    "flow_table_full", ts,
                    f"{tracked} connections tracked (max_flows): the {live} least recently active were ended "
                    "early; their pending requests have no response", evicted=live)))


class CaptureRun:
    """An iterator of :class:`CaptureEvent` over one capture file, with live ``stats``.

    Here rather than in the package's ``__init__`` so that it is compiled: ``__next__``
    runs once per event.

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
