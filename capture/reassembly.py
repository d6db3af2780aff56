"""One direction of a TCP connection: sequence numbers in, ordered byte stream out.

Sequence numbers are mapped to unbounded stream offsets (signed 32-bit distance
from the next expected sequence number), so wraparound is handled in one place
and everything else compares plain ints. Out-of-order segments wait in a
bounded buffer, kept non-overlapping: where copies overlap, the first one to
arrive wins and a differing later copy is reported as a conflict.

:meth:`HalfStream.add` returns a list of operations for the consumer, tuples
tagged with an int for cheapness:

* ``(DATA, offset, payload, ts)``
* ``(GAP, offset, nbytes, ts, reason)`` - bytes that will never be delivered;
  ``nbytes`` is None when unknown (a stream joined mid-way); reason is one of
  ``midstream``, ``lost``, ``truncated`` (cut by the capture's snaplen), ``reorder_limit``
  (still missing when the out-of-order buffer reached its cap)
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

    :func:`capture.pipeline._established` inlines :meth:`add` for its commonest
    case (the next bytes, nothing buffered): it updates ``next_seq``, ``offset``,
    ``_last`` and ``_last_off`` itself, exactly as :meth:`_deliver` would.
    """

    __slots__ = (
        "_last",
        "_last_off",
        "_offs",
        "_pend",
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
                 max_hole_age: int = 10_000_000_000) -> None:
        self.next_seq: int | None = None   # absolute sequence number at `offset`; None until known
        self.offset = 0                    # stream offset reached: delivered or declared lost
        self.isn: int | None = None
        self.started = False               # has the stream's origin been settled (SYN or first segment)
        self.fin_off: int | None = None
        self.peer_ack: int | None = None   # latest ACK the other direction sent (absolute)
        self._offs: list[int] = []         # sorted starts of pending (out-of-order) segments
        self._pend: dict[int, tuple[int, bytes, int]] = {}   # start -> (end, captured bytes, ts)
        self.pending_bytes = 0
        self._last = b""                   # the most recently delivered payload, to vet retransmissions
        self._last_off = 0
        self.max_bytes = max_bytes
        self.max_segments = max_segments
        self.max_hole_age = max_hole_age   # ns: a retransmission later than this is not waited for
        self.dup_segments = 0
        self.ooo_segments = 0
        self.gaps = 0
        self.gap_bytes = 0
        self.conflicts = 0

    @property
    def has_pending(self) -> bool:
        return bool(self._offs)

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

    def add(self, seq: int, payload: bytes, missing: int, ts: int) -> list[Op]:
        """A segment's payload (``missing`` bytes of it not captured)."""
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
        self._insert(off, payload, off + n, ts, ops)
        if self._offs:
            if self.peer_ack is not None and self.position(self.peer_ack) >= self._offs[0]:
                self._skip_holes(self.position(self.peer_ack), ts, ops)
            while self._offs and (len(self._offs) > self.max_segments or self.pending_bytes > self.max_bytes):
                self._skip_hole(ts, ops, "reorder_limit")    # the buffer's cap bit: its own reason
            while self._offs and ts - self._pend[self._offs[0]][2] > self.max_hole_age:
                self._skip_hole(ts, ops)
        return ops

    def expire(self, now: int) -> list[Op]:
        """Holes whose following data has waited longer than ``max_hole_age``: declared lost."""
        ops: list[Op] = []
        while self._offs and now - self._pend[self._offs[0]][2] > self.max_hole_age:
            self._skip_hole(now, ops)
        return ops

    def fin(self, seq: int, payload_len: int) -> None:
        if self.fin_off is None and self.started:
            self.fin_off = self.position(seq) + payload_len

    def acked(self, ts: int) -> list[Op]:
        """The peer acknowledged bytes beyond a hole: whatever the hole held was lost by the capture."""
        ops: list[Op] = []
        if self._offs and self.peer_ack is not None and self.started:
            self._skip_holes(self.position(self.peer_ack), ts, ops)
        return ops

    def close(self, ts: int) -> list[Op]:
        """End of stream: holes before buffered data, and data the FIN or peer ACK vouches for, are gaps."""
        ops: list[Op] = []
        while self._offs:
            self._skip_hole(ts, ops)
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

    def _deliver(self, off: int, end: int, payload: bytes, ts: int, ops: list[Op]) -> None:
        if payload:
            ops.append((DATA, off, payload, ts))
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

    def _skip_holes(self, upto: int, ts: int, ops: list[Op]) -> None:
        while self._offs and self._offs[0] <= upto:
            self._skip_hole(ts, ops)

    def _flush(self, ops: list[Op]) -> None:
        offs, pend = self._offs, self._pend
        while offs and offs[0] == self.offset:
            start = offs.pop(0)
            end, payload, ts = pend.pop(start)
            self.pending_bytes -= len(payload)
            self._deliver(start, end, payload, ts, ops)

    def _vet(self, off: int, end: int, payload: bytes, ts: int, ops: list[Op],
             other_off: int, other: bytes) -> None:
        """Compare the captured overlap of a second copy with the first; report a difference."""
        lo = max(off, other_off)
        hi = min(off + len(payload), other_off + len(other), end)
        if hi > lo and payload[lo - off:hi - off] != other[lo - other_off:hi - other_off]:
            ops.append((CONFLICT, lo, hi - lo, ts))
            self.conflicts += 1

    def _insert(self, off: int, payload: bytes, end: int, ts: int, ops: list[Op]) -> None:
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
            self._deliver(off, end, payload, ts, ops)    # in order: the common case
            if self._offs:
                self._flush(ops)
            return
        # Out of order, or overlapping buffered segments: keep the parts no earlier copy holds.
        offs, pend = self._offs, self._pend
        j = bisect_left(offs, off)
        pos = off
        if j and pend[offs[j - 1]][0] > off:
            s = offs[j - 1]
            e, p, _ = pend[s]
            self._vet(off, end, payload, ts, ops, s, p)
            pos = min(e, end)
        pieces: list[tuple[int, int]] = []
        while pos < end and j < len(offs) and offs[j] < end:
            s = offs[j]
            e, p, _ = pend[s]
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
                self._deliver(a, b, part, ts, ops)
            else:
                insort(offs, a)
                pend[a] = (b, part, ts)
                self.pending_bytes += len(part)
        if offs and offs[0] == self.offset:
            self._flush(ops)
