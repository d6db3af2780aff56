"""Causal order across the two directions of one TCP connection.

A capture's packet order is not always the order things happened: two taps
merged by timestamp, ``-i any`` over a multi-queue NIC or a mirror port can
show a reply a few microseconds before the request it answers, or a segment
after the peer's ACK of it. TCP itself says what came first: a segment's ACK
number tells which bytes of the other direction its sender had already
received.

So each direction is first put in order by sequence number
(:class:`capture.reassembly.HalfStream`, which holds out-of-order segments until
their holes fill), and only then is its in-order data handed on: bytes whose
segment acknowledged bytes of the other direction that have not been handed on
yet wait (with every later operation of their direction, to keep their order)
until those bytes have been, or declared lost by a gap. Reassembly itself never
waits on the gate: a late segment fills its hole as soon as it is captured, even
while data of its own direction waits here for the other one.

The wait is bounded, so a real loss still resolves and memory stays bounded:
a held operation goes on anyway once ``max_reorder_segments`` more segments of
the connection have been captured, or it has waited ``max_wait`` of capture time
(the bytes it waits for, if a hole, are declared lost first), or when the
connection holds more than ``max_segments`` operations or ``max_bytes`` bytes
(the oldest first; that cap biting is reported once per connection). The wait is
counted in segments first because reordering is: a late copy comes a few packets
later, however long the connection then sits idle.
Timestamps are not touched: latency stays what the capture measured, negative
when the clocks of two taps disagree.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from capture.reassembly import DATA, MAX_JUMP, HalfStream

Op = tuple  # capture.reassembly's operations


@dataclass(frozen=True)
class CausalLimits:
    """How long and how much a connection's operations may wait for the other direction."""

    max_reorder_segments: int   # segments of the connection captured since one was held
    max_wait: int               # capture time a held operation has waited, in ns
    max_segments: int           # operations held on the connection
    max_bytes: int              # bytes held on the connection


def needed(peer: HalfStream, ack: int) -> int | None:
    """The stream offset of ``peer`` up to which ``ack`` says bytes were received, if it is a plausible one."""
    if peer.next_seq is None:
        return None
    at = peer.position(ack)
    if peer.fin_off is not None and at > peer.fin_off:
        at = peer.fin_off                # the ACK of a FIN counts one sequence number that is not a byte
    return at if -MAX_JUMP < at - peer.offset < MAX_JUMP else None


def first_waiting(peer: HalfStream, ops: list[Op]) -> int | None:
    """The index of the first operation in ``ops`` (of the half opposite ``peer``) whose segment
    acknowledged bytes of ``peer`` not handed on yet: from there on, they must wait. None if none does."""
    for i, op in enumerate(ops):
        if op[0] == DATA and op[4] is not None:
            at = needed(peer, op[4])
            if at is not None and at > peer.offset:
                return i
    return None


class CausalGate:
    """Operations of one connection held back for causal order, per direction (half 0 / half 1)."""

    __slots__ = ("bytes", "held", "segments")

    def __init__(self) -> None:
        # Per half: (operation, ack, segments counted when it was held) in stream order.
        self.held: tuple[deque[tuple[Op, int | None, int]], deque[tuple[Op, int | None, int]]] = (deque(), deque())
        self.bytes = 0
        self.segments = 0                # segments of the connection captured since the gate was made

    def __bool__(self) -> bool:
        return bool(self.held[0] or self.held[1])

    def hold(self, h: int, op: Op, ack: int | None) -> None:
        self.held[h].append((op, ack, self.segments))
        if op[0] == DATA:
            self.bytes += len(op[2])

    def pop(self, h: int) -> Op:
        op = self.held[h].popleft()[0]
        if op[0] == DATA:
            self.bytes -= len(op[2])
        return op

    def oldest_half(self) -> int:
        a, b = self.held
        if not b:
            return 0
        if not a:
            return 1
        return 0 if a[0][0][3] <= b[0][0][3] else 1

    def over(self, max_segments: int, max_bytes: int) -> bool:
        return len(self.held[0]) + len(self.held[1]) > max_segments or self.bytes > max_bytes

    def delivered(self, h: int, stream: HalfStream) -> int:
        """How far half ``h`` has been handed on: the offset of its first held operation, else all it ordered."""
        q = self.held[h]
        return q[0][0][1] if q else stream.offset

    def waits_for(self, h: int, halves: tuple[HalfStream, HalfStream]) -> int | None:
        """The offset of the other half that the first held operation of half ``h`` waits for, or None if it may go."""
        op, ack, _ = self.held[h][0]
        if ack is None:
            return None
        other = 1 - h
        at = needed(halves[other], ack)
        if at is None or at <= self.delivered(other, halves[other]):
            return None
        return at

    def age(self, h: int, now: int) -> int:
        """Capture time the first held operation of half ``h`` has waited."""
        return now - self.held[h][0][0][3]

    def waited(self, h: int) -> int:
        """Segments of the connection captured since the first held operation of half ``h`` was held."""
        return self.segments - self.held[h][0][2]

    def ready(self, halves: tuple[HalfStream, HalfStream], now: int, limits: CausalLimits,
              everything: bool = False) -> Iterator[tuple[int, Op, bool]]:
        """The held operations that may go now, in the order they must go: (half, operation, forced).

        An operation goes once what it waits for has gone. One that waited past the limits goes anyway,
        after the hole it waits for, if any, is declared lost (its gap then goes first); with
        ``everything`` (the connection ends) all go so. Past the connection's caps the oldest goes without
        what it waits for: ``forced``. Lazy, and reading the gate afresh each time: the caller hands each
        operation on before the next is chosen.
        """
        while self:
            moved = False
            for h in (0, 1):
                q = self.held[h]
                while q and self.waits_for(h, halves) is None:
                    yield h, self.pop(h), False
                    moved = True
            if moved:
                continue
            h = self.oldest_half()
            if everything or self.waited(h) >= limits.max_reorder_segments or self.age(h, now) > limits.max_wait:
                at = self.waits_for(h, halves)
                lost = halves[1 - h].give_up(at, now) if at is not None else []
                if lost:
                    for op in lost:
                        self.hold(1 - h, op, op[4] if op[0] == DATA else None)
                    continue
                yield h, self.pop(h), False
                continue
            if not self.over(limits.max_segments, limits.max_bytes):
                return
            yield h, self.pop(h), True
