"""TCP's control segments: a connection's first packet, SYN (and a port reused for a new connection),
FIN and RST; and the end of a connection, whatever ends it (FIN, RST, idle, eviction, end of input).

The data and ACK segments in between are capture/fastpath.py's; a segment of a connection at rest wakes
it (capture/tracker.py) and, if it is one of those, goes the fast path's way.
"""

from __future__ import annotations

from capture.delivery import Delivery
from capture.events import CaptureEvent
from capture.fastpath import established
from capture.flows import KAFKA, TLS, UNDECIDED, Flow
from capture.packet import ACK, FIN, RST, SYN
from capture.reassembly import MASK, HalfStream
from capture.release import CausalRelease
from capture.stats import CaptureStats
from capture.tracker import FlowTracker


class TcpControl:
    """SYN/FIN/RST and new flows, and connections' ends. ``tracker`` is set once the tracker, which ends
    connections through :meth:`end`, is made."""

    def __init__(self, stats: CaptureStats, release: CausalRelease, delivery: Delivery) -> None:
        self.stats = stats
        self.release = release
        self.delivery = delivery
        self.tracker: FlowTracker = None  # type: ignore[assignment]

    def segment(self, ent: tuple[Flow, int, HalfStream, HalfStream] | None, seg: tuple,
                ts: int) -> list[CaptureEvent]:
        """New flows and SYN/FIN/RST: the general per-segment path."""
        key, sport, dport, seq, ack, flags, payload, missing = seg
        out: list[CaptureEvent] = []
        if ent is None and self.tracker.table.dormant:
            ent = self.tracker.wake(key)
            if ent is not None and not flags & 7:   # at rest until now: an ordinary segment of it
                flow, h, hs, peer = ent
                return established(self.release, self.delivery, flow, h, hs, peer, seg, seq, ack, flags, payload,
                                   missing, ts) or out
        if ent is not None and ent[0].gate is not None:
            # What may go now goes first; the rest waits on (ending the flow lets everything go).
            out += self.release.release(ent[0], ts)
        if ent is None:
            if flags & RST and not payload:
                return out                           # reset of a connection never seen
            flow = self.tracker.new_flow(key, sport, dport, ts, out)
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
                out += self.release.emit(flow, h, hs.add(seq, payload, missing, ts, ack_of), ts)
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
                out += self.release.emit(flow, 1 - h, peer.acked(ts), ts)
        if payload or missing or (flags & FIN and not hs.started):
            out += self.release.emit(flow, h, hs.add((seq + 1) & MASK if flags & SYN else seq,
                                              payload, missing, ts, ack_of), ts)
        if flags & FIN:
            hs.fin(seq, len(payload) + missing)
            if flow.gate is not None:
                out += self.release.release(flow, ts)       # what waited for the bytes this FIN ends
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
            self.tracker.table.remove(flow)
            flow = self.tracker.new_flow(key, sport, dport, ts, out)
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

    def _close(self, flow: Flow, ts: int, reason: str, out: list[CaptureEvent]) -> None:
        out.extend(self.end(flow, ts, reason))

    def end(self, flow: Flow, ts: int, reason: str) -> list[CaptureEvent]:
        """Flush both halves, close the dissector connection, mark the flow ended."""
        out: list[CaptureEvent] = []
        if flow.closed:
            return out
        release = self.release
        if flow.state <= KAFKA:
            # Holes are lost now; what waited for them, in either direction, goes in causal order.
            out += release.emit(flow, 0, flow.h0.close(ts), ts)
            out += release.emit(flow, 1, flow.h1.close(ts), ts)
        if flow.gate is not None:
            out += release.release(flow, ts, everything=True)
        if flow.state == UNDECIDED:
            out += self.delivery.conclude(flow, ts)
        if flow.state == KAFKA:
            out += self.delivery.close(flow, ts)
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

    def _count_end(self, flow: Flow) -> None:
        s = self.stats
        for hs in (flow.h0, flow.h1):
            s.duplicate_segments += hs.dup_segments
            s.out_of_order_segments += hs.ooo_segments
