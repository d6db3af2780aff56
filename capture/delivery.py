"""Ordered bytes handed on: to a connection's dissector once it is known to be Kafka, to its detection
buffers while it is undecided; the verdict that ends detection; the dissector's own failures contained.

Every operation reaches this room in its stream's order and, across the two directions, in causal order
(capture/release.py). Here it becomes dissector calls, and their events become :class:`CaptureEvent` s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capture.detect import Decision, Detector, Verdict
from capture.events import CaptureEvent, anomaly
from capture.flows import IGNORED, KAFKA, UNDECIDED, Flow
from capture.options import CaptureOptions
from capture.reassembly import CONFLICT, DATA, GAP
from capture.release import cap_report
from capture.stats import CaptureStats
from capture.tls.keylog import KeyLog
from dissector.events import Anomaly, Direction, Event

_GAP_WHY: dict[str, Callable[[int | None], str]] = {
    "midstream": lambda n: "the capture began after this direction's first bytes",
    "lost": lambda n: f"{n} bytes missing from the capture",
    "truncated": lambda n: f"{n} bytes cut by the capture's snaplen",
    "reorder_limit": lambda n: f"{n} bytes still missing when the out-of-order buffer reached its cap "
                               "(max_pending_bytes / max_pending_segments); declared lost",
    "acked": lambda n: f"{n} bytes the peer acknowledged never reached the capture (waited for past "
                       "max_causal_wait); declared lost",
}


def carried_data(flow: Flow) -> bool:
    """Whether an undecided connection saw bytes of data (or lost some): what a verdict is about."""
    return bool(flow.bufs[0] or flow.bufs[1]) or any(
        op[0] == DATA or (op[0] == GAP and op[4] != "midstream") for _, op in flow.ops)


def known_client(flow: Flow) -> int | None:
    """The client half, if its stream is known from its first byte (else detect as mid-stream)."""
    c = flow.client_half
    if c is None or flow.lost_start[c]:
        return None
    hs = flow.half(c)
    if not flow.bufs[c] and hs.started and hs.peer_ack is not None and hs.position(hs.peer_ack) > hs.offset:
        return None      # the broker acknowledged client bytes the capture never saw
    return c


class _DeadConnection:
    """Stands in for a dissector Connection that raised: takes bytes, says nothing."""

    def feed(self, direction: Direction, data: bytes, ts: int) -> list[Event]:
        return []

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        return []

    def close(self, ts: int) -> list[Event]:
        return []


_DEAD = _DeadConnection()


class Delivery:
    """Hands a connection's ordered operations on, and decides what the connection is."""

    def __init__(self, options: CaptureOptions, stats: CaptureStats, detector: Detector, keylog: KeyLog,
                 new_connection: Callable[..., Any]) -> None:
        self.options = options
        self.stats = stats
        self.detector = detector
        self.keylog = keylog
        self.new_connection = new_connection      # a dissector connection: (mid_stream[, broker_port])

    def deliver(self, flow: Flow, h: int, ops: list[tuple]) -> list[CaptureEvent]:
        """Apply reassembly operations of half ``h``: to the dissector, or to the detection buffer."""
        if not ops:
            return []
        if flow.state == KAFKA:
            return self.apply(flow, h, ops)
        if flow.state == UNDECIDED:
            return self.undecided(flow, h, ops)
        return []

    def apply(self, flow: Flow, h: int, ops: list[tuple]) -> list[CaptureEvent]:
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
                except Exception as exc:  # noqa: BLE001  (contained: see dissector_failed)
                    evs = self.dissector_failed(flow, exc, op[3])
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
                except Exception as exc:  # noqa: BLE001  (contained: see dissector_failed)
                    evs = self.dissector_failed(flow, exc, ts)
                    conn = flow.conn
                # The dissector reports the gap itself; add what only capture knows, or report it.
                for ev in evs:
                    if isinstance(ev, Anomaly) and ev.kind == "gap":
                        ev.extra["reason"] = reason
                        ev.extra["tcp_offset"] = off
                        break
                else:
                    out.append(CaptureEvent(info, anomaly("gap", direction, ts, _GAP_WHY[reason](nbytes),
                                                          off, bytes=nbytes, reason=reason)))
            elif kind == CONFLICT:
                _, off, nbytes, ts = op
                s.conflicts += 1
                out.append(CaptureEvent(info, anomaly(
                    "tcp_conflict", direction, ts,
                    f"a retransmitted copy of {nbytes} bytes differs from the first copy (first kept)",
                    off, nbytes=nbytes)))
                continue
            else:
                _, off, nbytes, ts = op
                out.append(CaptureEvent(info, anomaly(
                    "tcp_out_of_window", direction, ts,
                    f"a {nbytes}-byte segment lies {off - flow.half(h).offset:+d} bytes from the stream "
                    "position; dropped", off, nbytes=nbytes)))
                continue
            if evs:
                info.last_ts = op[3]  # type: ignore[union-attr]
                for ev in evs:
                    out.append(CaptureEvent(info, ev))
        return out

    def close(self, flow: Flow, ts: int) -> list[CaptureEvent]:
        """The connection ends: what its dissector still had to say."""
        info = flow.info
        try:
            evs = flow.conn.close(ts)
        except Exception as exc:  # noqa: BLE001  (contained: see dissector_failed)
            evs = self.dissector_failed(flow, exc, ts)
        return [CaptureEvent(info, ev) for ev in evs]

    def dissector_failed(self, flow: Flow, exc: Exception, ts: int) -> list[Event]:
        """The dissector raised (a bug: it must not): report it, stop decoding this connection."""
        flow.conn = _DEAD
        self.stats.dissector_errors += 1
        where = exc.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        at = f" at {where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where is not None else ""
        return [anomaly("dissector_error", None, ts,
                        f"the dissector raised {type(exc).__name__}: {exc}{at}; "
                        "the rest of this connection is not decoded", error=type(exc).__name__)]

    # -- detection -----------------------------------------------------------------------------

    def undecided(self, flow: Flow, h: int, ops: list[tuple]) -> list[CaptureEvent]:
        """Operations of a connection not known yet: buffered (up to ``detect_limit``) and sniffed."""
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
            known_client(flow), flow.src_ports, final=False)
        if decision is None:
            return []
        return self.decided(flow, decision, ops[-1][3])

    def conclude(self, flow: Flow, ts: int) -> list[CaptureEvent]:
        """An undecided connection ends: the final verdict, if it carried data (only then is one counted)."""
        d = None
        if carried_data(flow):
            d = self.detector.decide((bytes(flow.bufs[0]), bytes(flow.bufs[1])),
                                     (flow.full[0], flow.full[1]), known_client(flow),
                                     flow.src_ports, final=True)
        if d is not None:
            return self.decided(flow, d, ts)
        flow.state = IGNORED                     # nothing but handshakes and ACKs
        flow.skip = True
        return []

    def decided(self, flow: Flow, d: Decision, ts: int) -> list[CaptureEvent]:
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
            flow.conn = TlsConnection(self.keylog, lambda: self.make_connection(flow, False),
                                      flow.make_info("tls", d.reason),
                                      probe=self.detector.probe if o.ports is None else None, quiet=quiet,
                                      detect_limit=o.detect_limit,
                                      # Off Kafka ports (HTTPS...) little is held waiting for keys.
                                      max_held=o.detect_limit if quiet else o.max_pending_bytes)
        else:
            conns["kafka"] = conns.get("kafka", 0) + 1
            flow.make_info("kafka", d.reason)
            flow.conn = self.make_connection(flow, not flow.syn_seen)
        if flow.causal_cap:
            out.append(cap_report(flow, self.options))    # the cap bit while it was undecided
        for h, op in ops:
            if op[0] == GAP and op[4] == "undecided":
                op = (GAP, op[1], op[2], op[3], "lost")
            out += self.apply(flow, h, [op])
        return out

    def make_connection(self, flow: Flow, mid_stream: bool) -> Any:
        if self.options.protocol is not None and self.options.protocol.forced:
            return self.new_connection(mid_stream, flow.info.broker_port)  # type: ignore[union-attr]
        return self.new_connection(mid_stream)
