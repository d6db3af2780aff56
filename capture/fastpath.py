"""The reassembly fast path: a data/ACK segment of a connection already tracked, what nearly every packet
is. The next bytes in order, with nothing buffered, go straight to the dissector; any other such segment
goes the general way (:func:`segment`): ordered by its direction's stream, handed on in causal order.
SYN, FIN, RST and new connections never come here (capture/pipeline.py's control path).

Compiled build (``fastpath.pxd``): :func:`established` is a C function the pipeline's loop cimports,
with its flow and streams typed, so their fields are read from C structs (a generator's locals, the
loop's, cannot be typed), and a Kafka connection's ``feed`` called in C (a method call through Python
was ~350 instructions a segment).
"""

from __future__ import annotations

from capture.delivery import Delivery
from capture.events import CaptureEvent
from capture.flows import KAFKA, Flow
from capture.packet import ACK
from capture.reassembly import DATA, HALF, MASK, HalfStream
from capture.release import CausalRelease
from dissector.connection import Connection
from dissector.protocols import AutoConnection


def established(release: CausalRelease, delivery: Delivery, flow: Flow, h: int, hs: HalfStream,
                peer: HalfStream, seg: tuple, seq: int, ack: int, flags: int, payload: bytes, missing: int,
                ts: int) -> list[CaptureEvent] | None:
    """A segment (no SYN/FIN/RST) of ``flow``'s half ``h`` (``hs``; ``peer`` the other half), and the
    events it completes; None when none."""
    flow.last_ts = ts
    if flow.skip:                                # TLS / not Kafka / ended: nothing to order
        return None
    if flow.gate is not None or (flags & ACK and peer.next_seq is not None
                                 and 0 < (ack - peer.next_seq) & MASK < HALF):
        return segment(release, flow, h, seg, ts)   # it acknowledges bytes not seen yet, or others wait
    released = None
    if flags & ACK:
        peer.peer_ack = ack
        if peer.has_pending():
            released = release.emit(flow, 1 - h, peer.acked(ts), ts)
    if not payload and not missing:
        return released
    # The next bytes in order, nothing buffered, all captured.
    if seq == hs.next_seq and not missing and not hs.has_pending():
        off = hs.take_next(payload)
        if flow.state == KAFKA:
            conn = flow.conn
            if type(conn) is AutoConnection:
                inner = conn.inner      # once decided, its feed is the inner connection's (AutoConnection._commit)
                if inner is not None:
                    conn = inner
            try:
                if type(conn) is Connection:
                    kafka = conn        # compiled: typed, its feed a C call rather than a method lookup
                    dev = kafka.feed(flow.dirs[h], payload, ts)
                else:                   # TLS, v0.7, a dead flow's stand-in
                    dev = conn.feed(flow.dirs[h], payload, ts)
            except Exception as exc:  # noqa: BLE001  (a dissector bug must not end the capture)
                dev = delivery.dissector_failed(flow, exc, ts)
            if dev:
                info = flow.info
                info.last_ts = ts  # type: ignore[union-attr]
                evs = [CaptureEvent(info, ev) for ev in dev]
            else:
                evs = None
        else:
            evs = delivery.undecided(flow, h, [(DATA, off, payload, ts, ack if flags & ACK else None)])
    else:
        evs = release.emit(flow, h, hs.add(seq, payload, missing, ts, ack if flags & ACK else None), ts)
    if released and evs:
        return released + evs
    return evs or released


def segment(release: CausalRelease, flow: Flow, h: int, seg: tuple, ts: int) -> list[CaptureEvent]:
    """One data/ACK segment of an established flow, the general way: ordered by its half at once, its
    operations handed on in causal order (what :func:`established` does inline for the commonest case)."""
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
            out += release.emit(flow, 1 - h, peer.acked(ts), ts)
    if payload or missing:
        out += release.emit(flow, h, hs.add(seq, payload, missing, ts, ack_of), ts)
    gate = flow.gate
    if gate is not None:
        gate.segments += 1
        out += release.release(flow, ts)      # a segment later: a wait may be over
    return out
