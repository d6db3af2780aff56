"""One Kafka 0.7 TCP connection as a sans-IO state machine (same interface as dissector.connection).

Every rule about a 0.7 connection's state lives in this file:

* Framing is as in later Kafka: each direction is a stream of int32-size-prefixed
  frames; a side is synced when its next byte starts a frame. An unsynced side
  (the capture began mid-stream, or bytes were lost across a frame boundary)
  searches for a frame it can prove: a request that parses completely and
  strictly as 0.7 (exact sizes, a topic name, whole messages), or a response
  whose shape fits a waiting request and that ends where the bytes end or
  where another plausible response begins. A gap inside a frame of known size
  does not lose sync: that frame is reported truncated and its rest skipped.
* There are no correlation ids: responses pair with requests by order. FETCH,
  MULTIFETCH and OFFSETS wait in ``_pending`` (send order); PRODUCE and
  MULTIPRODUCE never get a response.
* Requests the capture does not show (it began mid-connection, or request bytes
  were lost) sit in ``_pending`` as a barrier; lost or skipped response bytes
  set ``_lost_responses`` (``_loss_ts``: when). Either makes pairing uncertain,
  and a response then pairs only by these rules. It never answers a request
  sent after it arrived. A loss that began at a frame boundary held at least
  one answer: the oldest request sent before the loss is closed as
  ``no_response``; requests sent after a loss are not answered by it. A client
  that sends one request at a time (brod, samsa and Kafka's own SimpleConsumer
  all do) is answered for its latest request sent before the response, if the
  response parses as that request's answer; older waiting requests are closed
  as ``no_response``, and a response whose latest possible request is an
  unknown one is an orphan. A client seen pipelining (two answers in a row, or
  a request sent while another's answer was certainly due) gets a pair only
  when exactly one request could be waiting and no unknown request precedes it;
  otherwise the response is an orphan and the oldest waiting request is closed.
  After a search found the response framing, a FETCH-shaped frame is not trusted
  while a MULTIFETCH (or an unknown request) may be waiting: a MULTIFETCH answer
  is a chain of FETCH-shaped frames.
  The one assumption: a client not seen pipelining does not pipeline. A client
  that pipelines before the capture shows it can be mispaired after a loss.

Nothing here raises on bad bytes: failures become ``Anomaly`` events or a
``DecodeFailure`` on the message that kept everything decoded before it.
"""

from __future__ import annotations

import struct
from collections import deque
from dissector.connection import Options
from dissector.held import STEP as HELD_STEP
from dissector.held import HeldBytes
from dissector.events import Anomaly, DecodeFailure, Direction, Event, Exchange, Status
from dissector.resync import RESYNC_KEEP, resync_detail
from dissector.topics import TopicRegistry
from dissector.v07.events import V07Request, V07Response
from dissector.v07.wire import (
    API_KEYS,
    API_NAMES,
    FETCH,
    MULTIFETCH,
    PARSE_ERRORS,
    find_request,
    find_response,
    parse_request_partial,
    parse_response,
    parse_response_partial,
    response_shapes,
    targets,
)

_I32 = struct.Struct(">i").unpack_from
TO_BROKER = Direction.TO_BROKER
TO_CLIENT = Direction.TO_CLIENT
_REQUEST_COST = 1024       # bytes a waiting decoded request costs besides its frame
_GONE_COST = 64            # ... and a placeholder for one given up
_TAIL = 16                 # bytes kept after a fruitless search: a header may straddle segments


class _Barrier:
    """Requests the capture does not show, sent after ``lo`` (capture time); how many, and of what
    type, is unknown."""

    __slots__ = ("lo",)

    def __init__(self, lo: int) -> None:
        self.lo = lo


class _Gone:
    """A request given up for memory (reported ``no_response``); it keeps its place so order pairing holds."""

    __slots__ = ("last_ts", "request_type")

    def __init__(self, last_ts: int, request_type: int) -> None:
        self.last_ts = last_ts
        self.request_type = request_type


class _Side:
    """The bytes of one direction not yet cut into frames."""

    __slots__ = ("budget", "buf", "counted", "start", "marks", "synced", "skip", "wait")

    def __init__(self, synced: bool, budget: HeldBytes | None = None) -> None:
        self.budget = budget                    # the capture's bytes of unfinished frames (dissector/held.py)
        self.counted = 0                        # of buf, the bytes counted in the budget
        self.buf = bytearray()
        self.start = 0                          # stream offset of buf[0]
        self.marks: deque[tuple[int, int]] = deque()   # (stream offset, capture ts) where each chunk began
        self.synced = synced
        self.skip = 0                           # bytes still to drop: the rest of a frame cut by a gap
        self.wait = 0                           # unsynced: bytes a candidate frame needs before a new search

    def append(self, data: bytes, ts: int) -> None:
        self.marks.append((self.start + len(self.buf), ts))
        self.buf += data

    def ts_at(self, off: int) -> int:
        ts = self.marks[0][1] if self.marks else 0
        for o, t in self.marks:
            if o > off:
                break
            ts = t
        return ts

    def consume(self, n: int) -> None:
        del self.buf[:n]
        self.start += n
        if self.counted > len(self.buf):
            self.budget.used -= self.counted - len(self.buf)  # type: ignore[union-attr]
            self.counted = len(self.buf)
        marks = self.marks
        while len(marks) > 1 and marks[1][0] <= self.start:
            marks.popleft()

    def clear(self) -> None:
        self.consume(len(self.buf))
        self.marks.clear()


class V07Connection:
    """Feed bytes of both directions in capture order; get events back."""

    protocol = "0.7"

    def __init__(self, options: Options | None = None, *, topics: TopicRegistry | None = None,
                 mid_stream: bool = False) -> None:
        self.options = options or Options()
        self.topics = topics if topics is not None else TopicRegistry()
        held = self.options.held
        joined = None if mid_stream else True   # None: joined mid-stream, not yet on a frame
        self._sides = (_Side(joined, held), _Side(joined, held))
        self._pending: deque[V07Request | _Barrier | _Gone] = deque()
        if mid_stream:
            self._pending.append(_Barrier(0))
        self._lost_responses = False
        self._lost_min = 0            # responses certainly lost (a loss that began at a frame boundary)
        self._loss_ts = -1            # capture time of the last loss of response bytes
        self._pipelining = False      # seen with two requests waiting for an answer at once
        self._answers = 0             # answers since the latest request that wants one
        self._doubt = False           # response framing found by a search: may be inside a MULTIFETCH answer
        self._ordinal = 0
        self._orphans = 0
        self._client_ts = 0           # capture time of the latest bytes towards the broker
        self._server_ts = -1          # ... and of the latest bytes (or loss) towards the client
        self._pending_bytes = 0       # estimated memory of _pending (Options.max_in_flight_bytes bounds it)
        self._gone = 0
        self._skew_reported = False

    # -- public API -------------------------------------------------------------

    def feed(self, direction: Direction, data: bytes, ts: int) -> list[Event]:
        out: list[Event] = []
        side = self._sides[direction]
        if side.skip:
            n = min(side.skip, len(data))
            side.skip -= n
            side.start += n
            data = data[n:]
        if not data:
            return out
        if direction == TO_BROKER:
            self._client_ts = ts
        else:
            self._server_ts = ts
        side.append(data, ts)
        self._drain(direction, side, ts, out)
        if side.budget is not None and len(side.buf) - side.counted >= HELD_STEP:
            self._count_held(direction, side, ts, out)
        return out

    def _count_held(self, direction: Direction, side: _Side, ts: int, out: list[Event]) -> None:
        """Bytes waiting for their frame's end (or, unsynced, for a frame to be found) grew by a step:
        count them with every other connection's; past the capture's limit, let them go."""
        budget = side.budget
        assert budget is not None
        budget.used += len(side.buf) - side.counted
        side.counted = len(side.buf)
        if budget.used <= budget.limit:
            return
        budget.cuts += 1
        have, offset = len(side.buf), side.start
        if side.synced and have >= 4:
            need = 4 + _I32(side.buf, 0)[0]
            partial = bytes(side.buf)
            first_ts = side.ts_at(side.start)
            side.clear()
            out.append(Anomaly("frame_held_limit", direction, ts,
                               f"a frame of {need} bytes had {have} held while the connections of this capture "
                               f"held more than {budget.limit} bytes of unfinished frames: decoded as "
                               "truncated, the rest skipped", offset, {"frame": need, "held": have}))
            self._truncated(direction, partial, need, first_ts, ts, offset, out, lost_after=False)
            side.skip = need - have
            return
        side.clear()
        side.wait = 0
        out.append(Anomaly("frame_held_limit", direction, ts,
                           f"{have} bytes waiting for a frame boundary were dropped while the connections of this "
                           f"capture held more than {budget.limit} bytes of unfinished frames",
                           offset, {"held": have}))
        if direction == TO_CLIENT:
            self._lost(direction, ts)            # answers may have been among them

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        out: list[Event] = []
        side = self._sides[direction]
        if direction == TO_CLIENT:
            self._server_ts = ts
        lost = "an unknown number of" if nbytes is None else str(nbytes)
        out.append(Anomaly("gap", direction, ts, f"{lost} bytes missing from the capture",
                           side.start + len(side.buf), {"bytes": nbytes}))
        if side.skip and nbytes is not None:
            if nbytes <= side.skip:
                side.skip -= nbytes
                side.start += nbytes
                return out
            nbytes -= side.skip
            side.start += side.skip
            side.skip = 0
        elif side.skip:
            side.skip = 0
        boundary = side.synced and not side.buf     # the lost bytes start a frame: at least one is lost
        if side.synced and side.buf:
            have = len(side.buf)
            need = 4 + _I32(side.buf, 0)[0] if have >= 4 else 0
            inside = need > 0 and nbytes is not None and have + nbytes <= need
            partial = bytes(side.buf)
            first_ts = side.ts_at(side.start)
            offset = side.start
            side.clear()
            self._truncated(direction, partial, need, first_ts, ts, offset, out, lost_after=not inside)
            if inside:
                side.skip = need - have - nbytes  # type: ignore[operator]
                side.start += nbytes  # type: ignore[operator]
                return out
        elif side.buf:
            side.clear()
        side.wait = 0
        if nbytes != 0:
            if side.synced:
                self._lost(direction, ts, boundary)
            elif direction == TO_CLIENT:
                self._lost(direction, ts)        # more answers may be in this loss
            side.synced = False
        side.start += nbytes or 0
        return out

    def close(self, ts: int) -> list[Event]:
        out: list[Event] = []
        for direction in (TO_BROKER, TO_CLIENT):
            side = self._sides[direction]
            if side.synced and side.buf:
                have = len(side.buf)
                need = 4 + _I32(side.buf, 0)[0] if have >= 4 else 0
                partial = bytes(side.buf)
                out.append(Anomaly("truncated", direction, ts,
                                   f"stream ended {have} bytes into a frame of {need or 'unknown size'}", side.start))
                first_ts = side.ts_at(side.start)
                offset = side.start
                side.clear()
                self._truncated(direction, partial, need, first_ts, ts, offset, out, lost_after=False)
            elif side.buf:
                out.append(Anomaly("unsynced_tail", direction, ts,
                                   f"{len(side.buf)} bytes at the end never matched a frame", side.start))
                side.clear()
        for item in self._pending:
            if isinstance(item, V07Request):
                out.append(Exchange(item, None, Status.NO_RESPONSE))
        self._pending.clear()
        return out

    @property
    def in_flight(self) -> int:
        return sum(1 for item in self._pending if isinstance(item, V07Request))

    # -- framing ----------------------------------------------------------------

    def _drain(self, direction: Direction, side: _Side, ts: int, out: list[Event]) -> None:
        max_frame = self.options.max_frame_size
        handle = self._request if direction == TO_BROKER else self._response
        while True:
            if not side.synced and (len(side.buf) < side.wait or not self._resync(direction, side, ts, out)):
                return
            buf = side.buf
            if len(buf) < 4:
                return
            size = _I32(buf, 0)[0]
            if size < 2 or size > max_frame:
                out.append(Anomaly("bad_frame_size", direction, ts,
                                   f"frame size {size} outside 2..{max_frame}; resyncing", side.start))
                since = side.ts_at(side.start)
                side.synced = False
                side.consume(1)
                self._lost(direction, ts, since=since)
                continue
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4:4 + size])
            first_ts = side.ts_at(side.start)
            offset = side.start
            side.consume(4 + size)
            handle(frame, first_ts, ts, offset, out)

    def _resync(self, direction: Direction, side: _Side, ts: int, out: list[Event]) -> bool:
        """Find a frame this side can prove; True once synced on it."""
        buf = bytes(side.buf)
        max_frame = self.options.max_frame_size
        if direction == TO_BROKER:
            at, need = find_request(buf, 0, max_frame, require_complete=True)
            if at is None:
                at, need = find_request(buf, 0, max_frame, require_complete=False)
                if at is not None and need > RESYNC_KEEP:
                    at = None
        else:
            at, need = find_response(buf, 0, max_frame, self._response_kinds())
        side.wait = 0
        if at is None:
            drop = max(0, len(buf) - _TAIL)
            self._skipped(direction, drop, ts)
            side.consume(drop)
            return False
        if need:
            self._skipped(direction, at, ts)
            side.consume(at)             # nothing before a candidate can start a provable frame
            side.wait = need             # search again once it can be whole
            return False
        self._skipped(direction, at, ts)
        if direction == TO_CLIENT:
            self._doubt = True
        out.append(Anomaly("resync", direction, ts, resync_detail(direction, at, side.synced is None, "0.7 "),
                           side.start, {"skipped": at}))
        side.consume(at)
        side.synced = True
        return True

    def _skipped(self, direction: Direction, n: int, ts: int) -> None:
        """Bytes dropped while looking for a frame may have held answers (requests: the barrier covers them)."""
        if n and direction == TO_CLIENT:
            self._loss_ts = ts
            self._lost_responses = True

    def _response_kinds(self) -> frozenset[int] | None:
        """Request types a resynced response may answer: those waiting, unless unknown ones may be."""
        kinds = set()
        for item in self._pending:
            if isinstance(item, _Barrier):
                return None
            kinds.add(item.request_type)
        return frozenset(kinds) if kinds else None

    def _lost(self, direction: Direction, ts: int, whole_frame: bool = False, since: int | None = None) -> None:
        """Frames of ``direction`` may have been lost (since capture time ``since``): pairing must stop guessing."""
        if direction == TO_BROKER:
            self._pending.append(_Barrier(self._client_ts if since is None else since))
            self._answers = 0             # lost requests may explain the next answers
        else:
            self._loss_ts = ts
            self._lost_responses = True
            self._lost_min += whole_frame

    # -- requests ---------------------------------------------------------------

    def _request(self, frame: bytes, first_ts: int, last_ts: int, offset: int, out: list[Event],
                 truncated_size: int = 0) -> None:
        body, exc, reached = parse_request_partial(frame)
        kind = body.get("request_type")
        if kind is None:
            out.append(Anomaly("malformed", TO_BROKER, first_ts,
                               f"0.7 request type does not parse: {exc}", offset))
            self._lost(TO_BROKER, last_ts)      # whether it wanted an answer is unknown
            return
        self._ordinal += 1
        size = truncated_size or len(frame) + 4
        failure = None
        if exc is not None:
            error = "Truncated" if truncated_size else type(exc).__name__
            detail = f"frame cut after {len(frame) + 4} of {truncated_size} bytes" if truncated_size else str(exc)
            failure = DecodeFailure(error, detail, reached)
        elif reached != len(frame) and not truncated_size:
            out.append(Anomaly("trailing_bytes", TO_BROKER, first_ts,
                               f"{len(frame) - reached} bytes after the 0.7 {API_NAMES[kind]} request body", offset))
        req = V07Request(API_KEYS[kind], None, self._ordinal, None, size, first_ts, last_ts, None,  # type: ignore[arg-type]
                         body, failure, offset, None, None, kind)
        if self.options.message_events:
            out.append(req)
        if failure is not None and not truncated_size:
            out.append(Anomaly("malformed", TO_BROKER, first_ts,
                               f"0.7 {req.api_name} request: {failure.error} at byte {failure.offset}: {failure.detail}",
                               offset))
        if not req.expects_response:
            out.append(Exchange(req, None, Status.NO_RESPONSE_EXPECTED))
            return
        if not self._pipelining and any(
                isinstance(item, V07Request) and item.last_ts > self._loss_ts
                and (self._sides[TO_CLIENT].synced or item.last_ts > self._server_ts) for item in self._pending):
            # An earlier request's answer was still due: no response bytes came since it was sent,
            # or they all decoded (and none answered it) with nothing lost.
            self._pipelining = True
        self._answers = 0
        self._pending.append(req)
        self._pending_bytes += req.size + _REQUEST_COST
        if self._pending_bytes > self.options.max_in_flight_bytes:
            self._shed(first_ts, offset, out)

    def _shed(self, ts: int, offset: int, out: list[Event]) -> None:
        """Over the in-flight memory bound: give up the oldest requests, keeping their place in the order."""
        pending = self._pending
        for i, item in enumerate(pending):
            if self._pending_bytes <= self.options.max_in_flight_bytes:
                break
            if isinstance(item, V07Request) and item is not pending[-1]:
                pending[i] = _Gone(item.last_ts, item.request_type)
                self._pending_bytes -= item.size + _REQUEST_COST - _GONE_COST
                self._gone += 1
                if self._gone == 1:
                    out.append(Anomaly("in_flight_limit", TO_BROKER, ts,
                                       f"more than {self.options.max_in_flight_bytes >> 20} MiB of 0.7 requests "
                                       "awaiting a response: the oldest are reported without response and their "
                                       "responses will be orphans; reported once per connection", offset))
                out.append(Exchange(item, None, Status.NO_RESPONSE))
        if self._pending_bytes > self.options.max_in_flight_bytes:
            # Even the placeholders are too many: forget them, and pairing becomes uncertain.
            kept = [item for item in pending if isinstance(item, V07Request)]
            first = next((item for item in pending if not isinstance(item, V07Request)), None)
            pending.clear()
            pending.append(_Barrier(first.last_ts if isinstance(first, _Gone) else ts))  # given up: not lost
            pending.extend(kept)
            self._pending_bytes = sum(r.size + _REQUEST_COST for r in kept)

    # -- responses --------------------------------------------------------------

    def _response(self, frame: bytes, first_ts: int, last_ts: int, offset: int, out: list[Event],
                  truncated_size: int = 0) -> None:
        self._answers += 1
        if self._answers >= 2:
            self._pipelining = True       # two answers in a row: two requests were waiting at once
        req = self._match(frame, first_ts, out, truncated_size)
        size = truncated_size or len(frame) + 4
        if req is None:
            self._orphan(frame, size, first_ts, last_ts, offset, out)
            return
        kind = req.request_type
        body, exc, reached = parse_response_partial(frame, kind, req.body)
        failure = None
        status = Status.MALFORMED if req.failure is not None and req.failure.error != "Truncated" else Status.OK
        if truncated_size:
            failure = DecodeFailure("Truncated", f"frame cut after {len(frame) + 4} of {truncated_size} bytes", reached)
        elif exc is not None:
            failure = DecodeFailure(type(exc).__name__, str(exc), reached)
            status = Status.MALFORMED
            out.append(Anomaly("malformed", TO_CLIENT, first_ts,
                               f"0.7 {req.api_name} response: {failure.error} at byte {reached}: {exc}", offset))
        elif reached != len(frame):
            out.append(Anomaly("trailing_bytes", TO_CLIENT, first_ts,
                               f"{len(frame) - reached} bytes after the 0.7 {req.api_name} response body", offset))
        resp = V07Response(req.correlation_id, size, first_ts, last_ts, req.api_key, None, None, body, failure,
                           stream_offset=offset, request_type=kind, targets=targets(req.body))
        if self.options.message_events:
            out.append(resp)
        out.append(Exchange(req, resp, status))

    def _take(self) -> V07Request | _Barrier | _Gone:
        item = self._pending.popleft()
        if isinstance(item, V07Request):
            self._pending_bytes -= item.size + _REQUEST_COST
        elif isinstance(item, _Gone):
            self._pending_bytes -= _GONE_COST
        return item

    def _match(self, frame: bytes, ts: int, out: list[Event], truncated: int) -> V07Request | None:
        """The request this response answers, if that can be proven (see the module doc).

        None makes the response an orphan: its request is unknown, or was given up (``_Gone``).
        """
        pending = self._pending
        if not pending:
            return None
        if self._doubt:
            # A MULTIFETCH answer is a chain of FETCH-shaped frames: after a search, a FETCH-shaped
            # frame may be one of them while a MULTIFETCH (or an unknown request) is waiting.
            if FETCH in response_shapes(frame) and any(
                    item.lo <= ts if isinstance(item, _Barrier) else
                    (item.request_type == MULTIFETCH and item.last_ts <= ts) for item in pending):
                if not self._pipelining:
                    self._settle(ts, out)
                else:
                    self._loss_ts, self._lost_responses = ts, True   # what it answered, if anything: unknown
                return None
            self._doubt = False
        head = pending[0]
        if self._lost_responses and not isinstance(head, _Barrier) and head.last_ts > self._loss_ts:
            self._lost_responses = False  # the lost answers came before any waiting request was sent
            self._lost_min = 0
        if not self._lost_responses and not isinstance(head, _Barrier):
            # Nothing lost: order decides, whatever the timestamps say (two capture points can disagree).
            if head.last_ts > ts and not self._skew_reported:
                self._skew_reported = True
                out.append(Anomaly("negative_latency", TO_CLIENT, ts,
                                   f"a 0.7 response began {(head.last_ts - ts) / 1000:.1f} us before its request "
                                   "ended, by the capture's timestamps (skewed clocks or capture points); latency "
                                   "kept as measured; reported once per connection", None,
                                   {"latency_ns": ts - head.last_ts}))
            self._take()
            return head if isinstance(head, V07Request) else None
        # Uncertain: unknown requests may come first, or answers were lost.
        req = self._uncertain(frame, ts, out, truncated)
        if req is None:
            self._loss_ts, self._lost_responses = ts, True   # what it answered is unknown, up to now
        return req

    def _uncertain(self, frame: bytes, ts: int, out: list[Event], truncated: int) -> V07Request | None:
        pending = self._pending
        if self._lost_min:
            # Each certainly lost response answered the oldest request still waiting.
            n, self._lost_min = self._lost_min, 0
            while n and pending and not isinstance(pending[0], _Barrier) and pending[0].last_ts <= self._loss_ts:
                item = self._take()
                n -= 1
                if isinstance(item, V07Request):
                    out.append(Exchange(item, None, Status.NO_RESPONSE))
        known: list[V07Request | _Gone] = []
        barrier_first = barrier_last = False
        for item in pending:
            if isinstance(item, _Barrier):
                if item.lo > ts:
                    break                 # lost after this response arrived
                barrier_first = barrier_first or not known
                barrier_last = True
                continue
            if item.last_ts > ts:
                break
            known.append(item)
            barrier_last = False
        if not known and not barrier_first:
            return None                   # it answers a request the capture does not show
        if not self._pipelining:
            # One request at a time: the answer is for the latest request sent before it.
            if barrier_last:
                self._settle(ts, out)     # that request is not in the capture: an orphan
                return None
            req = known[-1]
            if not (truncated or _fits(frame, req)):
                return None
            while pending[0] is not req:      # everything before it was answered (or lost)
                item = self._take()
                if isinstance(item, V07Request):
                    out.append(Exchange(item, None, Status.NO_RESPONSE))
            self._take()
            self._lost_responses = False
            return req if isinstance(req, V07Request) else None
        if barrier_first:
            return None                   # a pipelining client after unknown requests: never provable
        if len(known) == 1 and not barrier_last:
            self._take()
            self._lost_responses = False
            return known[0] if isinstance(known[0], V07Request) else None
        item = self._take()               # answered by the lost bytes or by this response: unknown which
        if isinstance(item, V07Request):
            out.append(Exchange(item, None, Status.NO_RESPONSE))
        if self._lost_responses:
            self._loss_ts = ts            # still unknown which requests are answered, up to now
        return None

    def _settle(self, ts: int, out: list[Event]) -> None:
        """A one-request-at-a-time client got an answer at ``ts``: everything sent before is answered."""
        pending = self._pending
        while pending:
            item = pending[0]
            if (item.lo if isinstance(item, _Barrier) else item.last_ts) > ts:
                break
            self._take()
            if isinstance(item, V07Request):
                out.append(Exchange(item, None, Status.NO_RESPONSE))
        self._lost_responses = False

    def _orphan(self, frame: bytes, size: int, first_ts: int, last_ts: int, offset: int, out: list[Event]) -> None:
        self._orphans += 1
        corr = -self._orphans
        shapes = response_shapes(frame) if self.options.infer_orphans else []
        if len(shapes) == 1:
            kind = shapes[0]
            body, _, _ = parse_response_partial(frame, kind, None)
            resp = V07Response(corr, size, first_ts, last_ts, API_KEYS[kind], None, None, body, None, inferred=True,
                               stream_offset=offset, request_type=kind)
        else:
            resp = V07Response(corr, size, first_ts, last_ts, None, None, None, None, None, stream_offset=offset,
                               raw=frame)
        if self.options.message_events:
            out.append(resp)
        out.append(Exchange(None, resp, Status.ORPHAN_RESPONSE))

    # -- damage -----------------------------------------------------------------

    def _truncated(self, direction: Direction, partial: bytes, need: int, first_ts: int, ts: int, offset: int,
                   out: list[Event], lost_after: bool) -> None:
        """Report what can be read of a frame whose end was lost."""
        if len(partial) >= 6 and need:
            if direction == TO_BROKER:
                self._request(partial[4:], first_ts, ts, offset, out, truncated_size=need)
            else:
                self._response(partial[4:], first_ts, ts, offset, out, truncated_size=need)
        elif not lost_after:
            self._lost(direction, ts)           # a frame whose type was never seen


def _fits(frame: bytes, req: V07Request | _Gone) -> bool:
    """The frame parses completely as the answer to ``req``."""
    if isinstance(req, _Gone) or req.failure is not None:   # nothing (whole) to check it against
        return req.request_type in response_shapes(frame)
    try:
        _, end = parse_response(frame, req.request_type, req.body)
    except PARSE_ERRORS:
        return False
    return end == len(frame) and req.request_type in response_shapes(frame)
