"""One direction of a TCP connection: sequence numbers in, ordered byte stream out.

Sequence numbers are mapped to unbounded stream offsets (signed 32-bit distance
from the next expected sequence number), so wraparound is handled in one place
and everything else compares plain ints. Out-of-order segments wait in a
bounded buffer, kept non-overlapping: where copies overlap, the first one to
arrive wins and a differing later copy is reported as a conflict.

A hole is filled when its bytes arrive, however late in the capture's order, and
declared lost only when waiting longer is no use: the buffer reached its cap
(bytes or segments), the hole has waited ``max_hole_age`` of capture time for a
retransmission, the stream ended, or the peer acknowledged the bytes (so no
retransmission will come) and ``ack_wait`` more segments of the connection have
been captured without them. That last wait is counted in segments, not time: a
copy captured after the peer's ACK of it (taps or queues that reorder) comes a
few packets later, however long the connection then sat idle, where declaring
the hole at the ACK lost whatever the late copy carried.

:meth:`HalfStream.add` returns a list of operations for the consumer, tuples
tagged with an int for cheapness:

* ``(DATA, offset, payload, ts, ack)`` - ``ack`` is the acknowledgement number of the
  segment that carried the bytes (None without the ACK flag), for causal order
* ``(GAP, offset, nbytes, ts, reason)`` - bytes that will never be delivered;
  ``nbytes`` is None when unknown (a stream joined mid-way); reason is one of
  ``midstream``, ``lost``, ``truncated`` (cut by the capture's snaplen), ``reorder_limit``
  (still missing when the out-of-order buffer reached its cap), ``acked`` (acknowledged by
  the peer and still missing ``ack_wait`` segments later)
* ``(CONFLICT, offset, nbytes, ts)`` - a retransmitted copy that differs from the first
* ``(OUT_OF_WINDOW, offset, nbytes, ts)`` - a segment implausibly far away, dropped
"""

from __future__ import annotations

from bisect import bisect_left, insort

MASK = 0xFFFFFFFF
HALF = 0x80000000
MAX_JUMP = 1 << 30           # a segment further than this from the stream position is not ours

DATA, GAP, CONFLICT, OUT_OF_WINDOW = 0, 1, 2, 3

Op = tuple  # one of the shapes in the module docstring


class HalfStream:
    """Ordering state of one direction.

    :meth:`take_next` is :meth:`add`'s commonest case on its own (the next bytes, nothing
    buffered, all captured), for :func:`capture.fastpath.established`'s fast path.
    """

    __slots__ = (
        "_acked_seen",
        "_last",
        "_last_off",
        "_offs",
        "_pend",
        "ack_wait",
        "conflicts",
        "dup_segments",
        "fin_off",
        "gap_bytes",
        "gaps",
        "isn",
        "max_bytes",
        "max_hole_age",
        "max_segments",
        "next_seq",
        "offset",
        "ooo_segments",
        "peer_ack",
        "pending_bytes",
        "started",
    )

    def __init__(self, max_bytes: int = 4 << 20, max_segments: int = 2048,
                 max_hole_age: int = 10_000_000_000, ack_wait: int = 64) -> None:
        self.next_seq: int | None = None   # absolute sequence number at `offset`; None until known
        self.offset = 0                    # stream offset reached: delivered or declared lost
        self.isn: int | None = None
        self.started = False               # has the stream's origin been settled (SYN or first segment)
        self.fin_off: int | None = None
        self.peer_ack: int | None = None   # latest ACK the other direction sent (absolute)
        self._offs: list[int] = []         # sorted starts of pending (out-of-order) segments
        self._pend: dict[int, tuple[int, bytes, int, int | None]] = {}   # start -> (end, captured bytes, ts, ack)
        self.pending_bytes = 0
        self._last = b""                   # the most recently delivered payload, to vet retransmissions
        self._last_off = 0
        self.max_bytes = max_bytes
        self.max_segments = max_segments
        self.max_hole_age = max_hole_age   # ns: a retransmission later than this is not waited for
        self.ack_wait = ack_wait           # segments of the connection bytes the peer acknowledged are waited for
        self._acked_seen: int | None = None   # segments seen since the first hole is known acknowledged
        self.dup_segments = 0
        self.ooo_segments = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.conflicts = 0

    def has_pending(self) -> bool:
        """Whether out-of-order bytes wait for a hole before them to fill."""
        return bool(self._offs)

    def take_next(self, payload: bytes) -> int:
        """Deliver ``payload``, the next bytes in order, when nothing is pending (as :meth:`add` would,
        without an op); its stream offset."""
        off = self.offset
        self.next_seq = (self.next_seq + len(payload)) & MASK
        self._last_off = off
        self._last = payload
        self.offset = off + len(payload)
        return off

    def snapshot(self) -> tuple:
        """The state of a direction with nothing pending, as plain values (a connection at rest keeps it)."""
        return (self.next_seq, self.offset, self.isn, self.started, self.peer_ack, self.dup_segments,
                self.ooo_segments, self.gaps, self.gap_bytes, self.conflicts)

    def restore(self, state: tuple) -> None:
        """Back to a :meth:`snapshot` (the last payload, kept to vet retransmissions, is not kept at rest)."""
        (self.next_seq, self.offset, self.isn, self.started, self.peer_ack, self.dup_segments,
         self.ooo_segments, self.gaps, self.gap_bytes, self.conflicts) = state
        self._last_off = self.offset

    @property
    def finished(self) -> bool:
        return self.fin_off is not None and self.offset >= self.fin_off and not self._offs

    def syn(self, seq: int) -> bool:
        """A SYN carrying ``seq``; False if it contradicts the ISN already known (a new connection)."""
        if self.isn is not None:
            return seq == self.isn
        if self.started:
            return False
        self.isn = seq
        self.next_seq = (seq + 1) & MASK
        self.started = True
        return True

    def expect(self, seq: int) -> None:
        """Learn where the stream starts from the peer's SYN-ACK acknowledgement."""
        if not self.started:
            self.next_seq = seq
            self.started = True

    def position(self, seq: int) -> int:
        """Stream offset of absolute sequence number ``seq``."""
        return self.offset + ((((seq - self.next_seq) & MASK) ^ HALF) - HALF)  # type: ignore[operator]

    def add(self, seq: int, payload: bytes, missing: int, ts: int, ack: int | None = None) -> list[Op]:
        """A segment's payload (``missing`` bytes of it not captured); ``ack`` its acknowledgement number."""
        ops: list[Op] = []
        if not self.started:
            self.next_seq = seq
            self.started = True
            ops.append((GAP, 0, None, ts, "midstream"))
        n = len(payload) + missing
        if not n:
            return ops
        off = self.position(seq)
        if off - self.offset > MAX_JUMP or self.offset - off > MAX_JUMP:
            ops.append((OUT_OF_WINDOW, off, n, ts))
            return ops
        self._insert(off, payload, off + n, ts, ack, ops)
        if self._offs:
            while self._offs and (len(self._offs) > self.max_segments or self.pending_bytes > self.max_bytes):
                self._skip_hole(ts, ops, "reorder_limit")    # the buffer's cap bit: its own reason
            self._age(ts, ops, True)
        else:
            self._acked_seen = None
        return ops

    def expire(self, now: int) -> list[Op]:
        """Holes that have waited as long as they may (see the module doc): declared lost."""
        ops: list[Op] = []
        self._age(now, ops, False)
        return ops

    def _age(self, now: int, ops: list[Op], segment: bool) -> None:
        """Declare lost the holes that waited ``max_hole_age`` for a retransmission, or ``ack_wait``
        segments (``segment``: this call is for one) since the peer acknowledged them."""
        while self._offs and now - self._pend[self._offs[0]][2] > self.max_hole_age:
            self._skip_hole(now, ops)
        if not self._offs or self.peer_ack is None or self.position(self.peer_ack) < self._offs[0]:
            self._acked_seen = None
            return
        if self._acked_seen is None:
            self._acked_seen = 0
        elif segment:
            self._acked_seen += 1
            if self._acked_seen >= self.ack_wait:
                self._skip_holes(self.position(self.peer_ack), now, ops, "acked")
                self._acked_seen = 0 if self._offs else None     # a later hole gets a wait of its own

    def fin(self, seq: int, payload_len: int) -> None:
        if self.fin_off is None and self.started:
            self.fin_off = self.position(seq) + payload_len

    def acked(self, ts: int) -> list[Op]:
        """The peer acknowledged bytes (``peer_ack``, set by the caller) with a segment: a hole it covers waits
        ``ack_wait`` segments more for its bytes, then is declared lost (they will not be sent again)."""
        ops: list[Op] = []
        if self._offs and self.peer_ack is not None and self.started:
            self._age(ts, ops, True)
        return ops

    def give_up(self, upto: int, ts: int) -> list[Op]:
        """Declare lost now the holes before stream offset ``upto`` (bytes the other direction needs
        delivered, and has waited for as long as causal order allows)."""
        ops: list[Op] = []
        if self._offs and self.started:
            self._skip_holes(upto, ts, ops, "acked")
            if not self._offs:
                self._acked_seen = None
        return ops

    def close(self, ts: int) -> list[Op]:
        """End of stream: holes before buffered data, and data the FIN or peer ACK vouches for, are gaps."""
        ops: list[Op] = []
        while self._offs:
            self._skip_hole(ts, ops)
        self._acked_seen = None
        if self.started:
            end = self.offset
            if self.fin_off is not None:
                end = max(end, self.fin_off)
            if self.peer_ack is not None:
                acked = self.position(self.peer_ack)
                # The ACK of a FIN counts one sequence number that is not a byte.
                if self.fin_off is not None:
                    acked = min(acked, self.fin_off)
                if acked - self.offset < MAX_JUMP:
                    end = max(end, acked)
            if end > self.offset:
                self._gap(end - self.offset, ts, "lost", ops)
        return ops

    # -- internals -----------------------------------------------------------------------------

    def _deliver(self, off: int, end: int, payload: bytes, ts: int, ack: int | None, ops: list[Op]) -> None:
        if payload:
            ops.append((DATA, off, payload, ts, ack))
            self._last = payload
            self._last_off = off
        self.offset = off + len(payload)
        if end > self.offset:
            self._gap(end - self.offset, ts, "truncated", ops)
        self.next_seq = (self.next_seq + (end - off)) & MASK  # type: ignore[operator]

    def _gap(self, nbytes: int, ts: int, reason: str, ops: list[Op]) -> None:
        ops.append((GAP, self.offset, nbytes, ts, reason))
        self.gaps += 1
        self.gap_bytes += nbytes
        self.offset += nbytes

    def _advance_to(self, off: int) -> None:
        self.next_seq = (self.next_seq + (off - self.offset)) & MASK  # type: ignore[operator]

    def _skip_hole(self, ts: int, ops: list[Op], reason: str = "lost") -> None:
        first = self._offs[0]
        if first > self.offset:
            self._advance_to(first)
            self._gap(first - self.offset, ts, reason, ops)
        self._flush(ops)

    def _skip_holes(self, upto: int, ts: int, ops: list[Op], reason: str = "lost") -> None:
        while self._offs and self._offs[0] <= upto:
            self._skip_hole(ts, ops, reason)

    def _flush(self, ops: list[Op]) -> None:
        offs, pend = self._offs, self._pend
        while offs and offs[0] == self.offset:
            start = offs.pop(0)
            end, payload, ts, ack = pend.pop(start)
            self.pending_bytes -= len(payload)
            self._deliver(start, end, payload, ts, ack, ops)

    def _vet(self, off: int, end: int, payload: bytes, ts: int, ops: list[Op],
             other_off: int, other: bytes) -> None:
        """Compare the captured overlap of a second copy with the first; report a difference."""
        lo = max(off, other_off)
        hi = min(off + len(payload), other_off + len(other), end)
        if hi > lo and payload[lo - off:hi - off] != other[lo - other_off:hi - other_off]:
            ops.append((CONFLICT, lo, hi - lo, ts))
            self.conflicts += 1

    def _insert(self, off: int, payload: bytes, end: int, ts: int, ack: int | None, ops: list[Op]) -> None:
        cur = self.offset
        if off < cur:
            # Retransmission of bytes already delivered (or declared lost): vet against the last delivery.
            self._vet(off, end, payload, ts, ops, self._last_off, self._last)
            if end <= cur:
                self.dup_segments += 1
                return
            payload = payload[cur - off:]
            off = cur
        if off == cur and (not self._offs or self._offs[0] >= end):
            self._deliver(off, end, payload, ts, ack, ops)    # in order: the common case
            if self._offs:
                self._flush(ops)
            return
        # Out of order, or overlapping buffered segments: keep the parts no earlier copy holds.
        offs, pend = self._offs, self._pend
        j = bisect_left(offs, off)
        pos = off
        if j and pend[offs[j - 1]][0] > off:
            s = offs[j - 1]
            e, p, _, _ = pend[s]
            self._vet(off, end, payload, ts, ops, s, p)
            pos = min(e, end)
        pieces: list[tuple[int, int]] = []
        while pos < end and j < len(offs) and offs[j] < end:
            s = offs[j]
            e, p, _, _ = pend[s]
            if s > pos:
                pieces.append((pos, s))
            self._vet(off, end, payload, ts, ops, s, p)
            pos = max(pos, e)
            j += 1
        if pos < end:
            pieces.append((pos, end))
        if not pieces:
            self.dup_segments += 1
            return
        if off != cur:
            self.ooo_segments += 1
        captured_end = off + len(payload)
        for a, b in pieces:
            part = payload[a - off:min(b, captured_end) - off] if a < captured_end else b""
            if a == self.offset:
                self._deliver(a, b, part, ts, ack, ops)
            else:
                insort(offs, a)
                pend[a] = (b, part, ts, ack)
                self.pending_bytes += len(part)
        if offs and offs[0] == self.offset:
            self._flush(ops)
