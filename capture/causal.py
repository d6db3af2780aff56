"""Causal order across the two directions of one TCP connection.

A capture's packet order is not always the order things happened: two taps
merged by timestamp, ``-i any`` over a multi-queue NIC or a mirror port can
show a reply a few microseconds before the request it answers. TCP itself
says what came first: a segment's ACK number tells which bytes of the other
direction its sender had already received. So a segment whose ACK covers
bytes of the other direction that have not reached the dissector yet waits
(with every later segment of its direction, to keep their order) until those
bytes have been delivered, or declared lost by a gap.

The wait is bounded, so a real loss still resolves and memory stays bounded:
a held segment goes on anyway once it has waited ``max_wait`` of capture time,
or when the connection holds more than ``max_segments`` segments or
``max_bytes`` bytes (the oldest first; that cap biting is reported once per
connection). Timestamps are not touched: latency stays what the capture
measured, negative when the clocks of two taps disagree.
"""

from __future__ import annotations

from collections import deque

from capture.packet import ACK
from capture.reassembly import HALF, MASK, MAX_JUMP, HalfStream

Segment = tuple  # capture.packet's (key, sport, dport, seq, ack, flags, payload, missing)


def acked_ahead(peer: HalfStream, ack: int) -> bool:
    """Does ``ack`` acknowledge bytes of ``peer`` that have not been delivered (nor declared lost)?"""
    nxt = peer.next_seq
    if nxt is None:
        return False                     # the other direction has not started: nothing to wait for
    d = (ack - nxt) & MASK
    if not 0 < d < HALF:
        return False
    if peer.fin_off is not None and peer.position(ack) > peer.fin_off:
        # The ACK of a FIN counts one sequence number that is not a byte.
        return peer.fin_off > peer.offset
    return d < MAX_JUMP


class CausalGate:
    """Segments of one connection held back for causal order, per direction (half 0 / half 1)."""

    __slots__ = ("bytes", "held")

    def __init__(self) -> None:
        # Per half: (segment, capture ts) in arrival order.
        self.held: tuple[deque[tuple[Segment, int]], deque[tuple[Segment, int]]] = (deque(), deque())
        self.bytes = 0

    def __bool__(self) -> bool:
        return bool(self.held[0] or self.held[1])

    def hold(self, h: int, seg: Segment, ts: int) -> None:
        self.held[h].append((seg, ts))
        self.bytes += len(seg[6])

    def pop(self, h: int) -> tuple[Segment, int]:
        seg, ts = self.held[h].popleft()
        self.bytes -= len(seg[6])
        return seg, ts

    def oldest_half(self) -> int:
        a, b = self.held
        if not b:
            return 0
        if not a:
            return 1
        return 0 if a[0][1] <= b[0][1] else 1

    def over(self, max_segments: int, max_bytes: int) -> bool:
        return len(self.held[0]) + len(self.held[1]) > max_segments or self.bytes > max_bytes

    def due(self, h: int, halves: tuple[HalfStream, HalfStream], now: int, max_wait: int) -> bool:
        """May the first held segment of half ``h`` go on: what it acknowledges is delivered, or it waited long enough."""
        seg, ts = self.held[h][0]
        return now - ts > max_wait or not (seg[5] & ACK and acked_ahead(halves[1 - h], seg[4]))
