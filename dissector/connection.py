"""One Kafka TCP connection as a sans-IO state machine.

Every rule about a connection's state lives in this file:

* Each direction is a stream of size-prefixed frames. A side is *synced* when
  the next byte it receives starts a frame. It starts synced when the caller saw
  the connection open, unsynced when the capture began mid-stream, and loses
  sync when bytes are lost across a frame boundary. An unsynced side searches
  for a frame it can prove (see :mod:`dissector.resync`) and drops what came before.
* A gap that ends inside a frame of known size does not lose sync: the frame is
  reported truncated and the rest of it is skipped.
* Requests wait in ``_pending`` (insertion order = send order) until the
  response with their correlation id arrives. Brokers answer in order, so when
  a response pairs with a request, every request sent before it that is still
  waiting was never answered.
* After a SaslHandshake v0 request, frames that do not parse as Kafka are raw
  SASL tokens, until the client sends a Kafka request again.

Nothing here raises on bad bytes: failures become ``Anomaly`` events or a
``DecodeFailure`` on the message that kept everything decoded before it.

Compiled (``connection.pxd``), the connection and its sides are extension types
whose state is read from C structs. In ``_frames``, ``b`` is a pointer into the
bytes, so frames are copied straight out of it rather than sliced through
Python's protocol, and ``_request``/``_response`` are called by name, which are
C calls (a bound method chosen once would not be). The walk over ``_pending``
for its oldest request is a C loop.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from dissector import budget, fixedwidth, quirks
from dissector.decoders import DECODE_ERRORS, Decoders, default_decoders
from dissector.embedded import decode_group_payloads
from dissector.events import (Anomaly, DecodeFailure, Direction, Event, Exchange, Request, Response, SaslToken, Status,
                              response_expected)
from dissector.framing import (DEFAULT_MAX_FRAME, known_request, parse_request_header, parse_response_header,
                               request_frame_decodes, response_header_version)
from dissector.held import STEP as HELD_STEP
from dissector.infer import Inference, infer_response
from dissector.redact import needs_redaction, redact
from dissector.skim import SKIMMED, answers_skimmed, skimmed, unskimmed
from dissector.resync import RESYNC_KEEP, find_request, find_response, resync_detail
from dissector.topics import TEACHING_APIS, TopicRegistry

_I32 = struct.Struct(">i").unpack_from
TO_BROKER = Direction.TO_BROKER
TO_CLIENT = Direction.TO_CLIENT
# Bound once: an enum member looked up on its class costs ~80 ns, and every response needs one.
_OK, _MALFORMED = Status.OK, Status.MALFORMED
_NONE: tuple = ()
_GROUP_APIS = frozenset({11, 14, 15})
_FULL_INFERENCES = 64    # orphans per connection given a full search before shortcuts start
_REQUEST_COST = 1024     # bytes a waiting decoded request costs besides its frame (objects, body dict)
_HELD_STEP = HELD_STEP   # see dissector/held.py
# A skimmed request's response from this size on is not copied out of its buffer (a Fetch's, mostly):
# smaller, the copy costs less than the second look-up of its request (callgrind).
_SKIM_UNCOPIED = 4096


_LIMIT = "DecodeLimit"                 # the failure of a body cut at its decoding budget (dissector.budget)
_NOT_THE_PEERS = ("Truncated", _LIMIT)


@dataclass(frozen=True)
class Options:
    max_frame_size: int = DEFAULT_MAX_FRAME
    keep_secrets: bool = False
    # Requests awaiting a response, per connection, bounded by their estimated memory (frame size
    # plus a fixed cost per decoded request) rather than by a count: librdkafka at linger 0 keeps
    # tens of thousands of small requests in flight. Past it the oldest is given up, with an anomaly.
    max_in_flight_bytes: int = 64 << 20
    infer_orphans: bool = True
    # Shared by the connections of one capture (dissector.held.HeldBytes): bounds the bytes held
    # for frames still arriving across all of them. None: only the frame cap bounds them.
    held: Any = field(default=None, compare=False)
    # Shared likewise (dissector.infer.InferenceBudget): full inference searches that missed, capture-wide.
    inference: Any = field(default=None, compare=False)
    # Request and Response events as each message decodes. An Exchange carries both, so a consumer
    # that only keeps exchanges (the dataset) turns these off and skips two events per exchange.
    message_events: bool = True
    # A dissector.skim.Skim: bodies of Produce and Fetch left undecoded before a worker's packet range.
    skim: Any = field(default=None, compare=False)


class _Side:
    """Reassembly state of one direction."""

    __slots__ = ("budget", "chunks", "counted", "have", "need", "first_ts", "offset", "synced", "skip")

    def __init__(self, synced: bool, budget: Any = None) -> None:
        self.budget = budget   # dissector.held.HeldBytes or None
        self.counted = 0       # of `have`, the bytes counted in the budget (see Connection._count_held)
        self.chunks: list[bytes] = []
        self.have = 0          # bytes in chunks
        self.need = 0          # length of the frame being collected (size prefix included), 0 if unknown
        self.first_ts = 0      # capture ts of the first byte in chunks
        self.offset = 0        # stream offset of the first byte in chunks
        self.synced = synced
        self.skip = 0          # bytes still to drop: the rest of a frame cut by a gap

    def take(self) -> bytes:
        if self.counted:
            self.budget.used -= self.counted
            self.counted = 0
        buf = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        self.chunks = []
        self.have = 0
        self.need = 0
        return buf

    def keep(self, rest: bytes, ts: int) -> None:
        self.chunks = [rest] if rest else []
        self.have = len(rest)
        self.first_ts = ts



def _api_name(api_key: int) -> str:
    from dissector.schema import api_name   # a rare path: the schema module stays out of the import
    return api_name(api_key)


class Connection:
    """Feed bytes of both directions in capture order; get events back."""

    def __init__(self, options: Options | None = None, *, topics: TopicRegistry | None = None,
                 mid_stream: bool = False, decoders: Decoders | None = None) -> None:
        self.options = options or Options()
        self.topics = topics if topics is not None else TopicRegistry()
        self._decoders = decoders or default_decoders()
        held = self.options.held
        # synced None: joined mid-stream and not yet on a frame (False: sync lost to a gap).
        joined = None if mid_stream else True
        self._sides = (_Side(joined, held), _Side(joined, held))
        self._pending: dict[int, tuple[int, Request]] = {}
        self._pending_bytes = 0     # estimated memory of _pending (see Options.max_in_flight_bytes)
        self._cap_hits = 0
        self._seq = 0
        # No request with a lower seq is still waiting. Responses come in send order, so this is
        # nearly always the answered one's seq, and the search for older unanswered requests
        # (the dict's first entry: after many pops from its front, a walk over their holes) is
        # skipped.
        self._older_from = 1
        self._seen_versions: dict[int, int] = {}
        self._sasl_raw = False
        self._sasl_mechanism: str | None = None
        self._last_ts = 0
        self._orphans = 0
        self._full_misses = 0       # full inference searches that found nothing (see _infer)
        self._inference_limited = False
        self._inferred: dict[tuple[int, int], None] = {}   # (api, version) pairs inferred here, in order
        self._skew_reported = False   # a negative latency was reported (once per connection)
        self._messages = self.options.message_events
        self._software: str | None = None   # what the client named itself in ApiVersions (dissector.quirks)
        self._skim = self.options.skim

    # -- public API -------------------------------------------------------------

    def feed(self, direction: Direction, data: bytes, ts: int) -> list[Event]:
        """Bytes that arrived on ``direction`` at capture time ``ts`` (ns)."""
        out: list[Event] = []
        if not data:
            return out
        self._last_ts = ts
        side = self._sides[direction]
        if side.skip:
            if len(data) <= side.skip:
                side.skip -= len(data)
                side.offset += len(data)
                return out
            side.offset += side.skip
            data = data[side.skip:]
            side.skip = 0
        if not side.synced:
            self._feed_unsynced(direction, side, data, ts, out)
            return out
        if side.have:
            side.chunks.append(data)
            side.have += len(data)
            if side.need == 0:
                if side.have < 4:
                    return out
                head = side.take()
                side.keep(head, side.first_ts)
                size = fixedwidth.i32(head, 0)
                if not self._size_ok(direction, size):
                    self._bad_size(direction, side, size, ts, out)
                    return out
                side.need = size + 4
            if side.have < side.need:
                if side.budget is not None and side.have - side.counted >= _HELD_STEP:
                    self._count_held(direction, side, ts, out)
                return out
            first_ts = side.first_ts
            buf = side.take()
        else:
            first_ts = ts
            buf = data
        self._frames(direction, side, buf, first_ts, ts, out)
        return out

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        """``nbytes`` of ``direction`` were lost (None: unknown). The side resyncs by itself."""
        out: list[Event] = []
        side = self._sides[direction]
        lost = "an unknown number of" if nbytes is None else str(nbytes)
        out.append(Anomaly("gap", direction, ts, f"{lost} bytes missing from the capture", side.offset + side.have,
                           {"bytes": nbytes}))
        if side.skip and nbytes is not None:
            # Still inside the tail of a frame already reported truncated.
            if nbytes < side.skip:
                side.skip -= nbytes
                side.offset += nbytes
                return out
            nbytes -= side.skip
            side.offset += side.skip
            side.skip = 0
            if nbytes == 0:
                return out
        if side.synced and side.have:
            need = side.need
            partial = side.take()
            self._truncated(direction, partial, need, side.first_ts, ts, side.offset, out)
            if need and nbytes is not None and side.have + len(partial) + nbytes <= need:
                side.skip = need - len(partial) - nbytes
                side.offset += len(partial) + nbytes
                return out
            side.offset += len(partial)
        elif side.have:
            side.offset += side.have
            side.take()
        if nbytes != 0:
            side.synced = False
        side.offset += nbytes or 0
        return out

    def close(self, ts: int) -> list[Event]:
        """End of the connection or of the capture: flush what is incomplete."""
        out: list[Event] = []
        for direction in (TO_BROKER, TO_CLIENT):
            side = self._sides[direction]
            if side.synced and side.have:
                need = side.need
                partial = side.take()
                out.append(Anomaly("truncated", direction, ts,
                                   f"stream ended {len(partial)} bytes into a frame of {need or 'unknown size'}",
                                   side.offset))
                self._truncated(direction, partial, need, side.first_ts, ts, side.offset, out)
            elif side.have:
                out.append(Anomaly("unsynced_tail", direction, ts,
                                   f"{side.have} bytes at the end never matched a frame", side.offset))
                side.take()
        for _, req in self._pending.values():
            out.append(Exchange(self._unskim(req), None, Status.NO_RESPONSE))
        self._pending.clear()
        self._pending_bytes = 0
        return out

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # -- at rest ------------------------------------------------------------------

    def at_rest(self) -> tuple | None:
        """What a quiet connection's future decoding depends on, when nothing is in the middle of
        anything (no frame half read, no request awaiting its response, no raw SASL): a tuple of
        plain values that :meth:`resume` makes a connection of again. None otherwise."""
        a, b = self._sides
        if (self._pending or self._sasl_raw or not a.synced or not b.synced or a.have or b.have or a.skip
                or b.skip):
            return None
        return (a.offset, b.offset, self._cap_hits, self._last_ts, self._orphans, self._full_misses,
                self._inference_limited, self._skew_reported, self._sasl_mechanism,
                tuple(self._seen_versions.items()), tuple(self._inferred), self._software)

    @classmethod
    def resume(cls, state: tuple, options: Options | None = None, *, topics: TopicRegistry | None = None,
               decoders: Decoders | None = None) -> Connection:
        """The connection :meth:`at_rest` described, ready for its next bytes."""
        conn = cls(options, topics=topics, decoders=decoders)
        a, b = conn._sides
        (a.offset, b.offset, conn._cap_hits, conn._last_ts, conn._orphans, conn._full_misses,
         conn._inference_limited, conn._skew_reported, conn._sasl_mechanism, seen, inferred, conn._software) = state
        conn._seen_versions = dict(seen)
        conn._inferred = dict.fromkeys(inferred)
        return conn

    def _count_held(self, direction: Direction, side: _Side, ts: int, out: list[Event]) -> None:
        """A frame still arriving grew by a step: count it; past the capture's limit, give it up."""
        budget = side.budget
        budget.used += side.have - side.counted
        side.counted = side.have
        if budget.used <= budget.limit:
            return
        budget.cuts += 1
        need, first_ts, offset = side.need, side.first_ts, side.offset
        partial = side.take()
        out.append(Anomaly("frame_held_limit", direction, ts,
                           f"a frame of {need} bytes had {len(partial)} held while the connections of this capture "
                           f"held more than {budget.limit} bytes of unfinished frames: decoded as truncated, "
                           "the rest skipped", offset, {"frame": need, "held": len(partial)}))
        self._truncated(direction, partial, need, first_ts, ts, offset, out)
        side.skip = need - len(partial)
        side.offset += len(partial)

    # -- framing ----------------------------------------------------------------

    def _size_ok(self, direction: Direction, size: int) -> bool:
        if size > self.options.max_frame_size:
            return False
        if self._sasl_raw:
            return size >= 0
        return size >= (8 if direction == TO_BROKER else 4)

    def _bad_size(self, direction: Direction, side: _Side, size: int, ts: int, out: list[Event]) -> None:
        out.append(Anomaly("bad_frame_size", direction, ts,
                           f"frame size {size} outside 0..{self.options.max_frame_size}; resyncing", side.offset))
        buf = side.take()
        side.synced = False
        side.offset += 1
        self._feed_unsynced(direction, side, buf[1:], ts, out)

    def _frames(self, direction: Direction, side: _Side, buf: bytes, first_ts: int, ts: int,
                out: list[Event]) -> None:
        """Cut complete frames off ``buf``; keep the incomplete tail."""
        if type(buf) is not bytes:
            buf = bytes(buf)
        b = buf
        pos = 0
        n = len(buf)
        to_broker = direction == TO_BROKER
        while n - pos >= 4:
            size = fixedwidth.i32(buf, pos)
            if not self._size_ok(direction, size):
                side.offset += pos
                side.keep(buf[pos:], first_ts)
                self._bad_size(direction, side, size, ts, out)
                return
            end = pos + 4 + size
            if end > n:
                side.offset += pos
                side.keep(buf[pos:] if pos else buf, first_ts)
                side.need = size + 4
                return
            if to_broker:
                self._request(b[pos + 4:end], first_ts, ts, side.offset + pos, out)
            elif (size >= _SKIM_UNCOPIED and self._skim is not None and not self._skim.done
                  and answers_skimmed(self._skim, self._pending, be_int(buf, pos + 4, 4))):
                # A skimmed request's answer while skimming: its correlation id is all _response reads of it.
                self._response(b[pos + 4:pos + 8], first_ts, ts, side.offset + pos, out)
            else:
                self._response(b[pos + 4:end], first_ts, ts, side.offset + pos, out)
            first_ts = ts
            pos = end
        side.offset += pos
        side.keep(buf[pos:] if pos < n else b"", first_ts)

    # -- requests ---------------------------------------------------------------

    def _request(self, frame: bytes, first_ts: int, last_ts: int, offset: int, out: list[Event],
                 truncated_size: int = 0) -> None:
        if self._sasl_raw and not truncated_size and not self._looks_like_request(frame):
            out.append(SaslToken(TO_BROKER, len(frame) + 4, first_ts, self._sasl_mechanism,
                                 frame if self.options.keep_secrets else None))
            return
        try:
            hdr = parse_request_header(frame)
        except DECODE_ERRORS as exc:
            out.append(Anomaly("malformed", TO_BROKER, first_ts,
                               f"request header does not parse: {exc or type(exc).__name__}", offset))
            return
        self._sasl_raw = False
        size = truncated_size or len(frame) + 4
        if self._skim is not None and not self._skim.done and not truncated_size:   # before this worker's range
            req = skimmed(self._skim, hdr, frame, size, first_ts, last_ts, offset)
            if req is not None:
                self._seen_versions[hdr.api_key] = hdr.api_version
                self._wait(req, hdr.correlation_id, first_ts, offset, out)
                return
        d = self._decoders.decode(hdr.api_key, "request", hdr.api_version, frame, hdr.body_offset)
        failure = None
        raw = None
        if d is None:
            body = None
            raw = frame[hdr.body_offset:]
            out.append(Anomaly("unknown_api", TO_BROKER, first_ts,
                               f"api key {hdr.api_key} version {hdr.api_version} is not in the schema; body kept raw",
                               offset))
        else:
            body = d.body
            failure = d.failure
            if truncated_size and failure is not None:
                failure = DecodeFailure("Truncated", f"frame cut after {len(frame) + 4} of {truncated_size} bytes",
                                        failure.offset)
            elif failure is None and d.end != len(frame) and not truncated_size:
                extra = len(frame) - d.end
                out.append(Anomaly("trailing_bytes", TO_BROKER, first_ts,
                                   f"{extra} bytes after the {_api_name(hdr.api_key)} v{hdr.api_version} request body",
                                   offset, quirks.as_extra(quirks.trailing_bytes(
                                       hdr.api_key, hdr.api_version, "request", extra, body, self._software))))
            self._after_request(hdr.api_key, hdr.api_version, body, size)
        req = Request(hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id, size, first_ts, last_ts,
                      hdr.header_version, body, failure, offset, raw, hdr.tags)
        self._seen_versions[hdr.api_key] = hdr.api_version
        if self._messages:
            out.append(req)
        if failure is not None and not truncated_size:
            if failure.error == _LIMIT:
                out.append(budget.limit_anomaly(TO_BROKER, first_ts, f"{req.api_name} v{hdr.api_version} request", size,
                                          failure, offset))
            else:
                out.append(Anomaly("malformed", TO_BROKER, first_ts,
                                   f"{req.api_name} v{hdr.api_version} request: {failure.error} at byte "
                                   f"{failure.offset}: {failure.detail}", offset))
        if not response_expected(hdr.api_key, body):
            out.append(Exchange(req, None, Status.NO_RESPONSE_EXPECTED))
            return
        self._wait(req, hdr.correlation_id, first_ts, offset, out)

    def _wait(self, req: Request, corr: int, first_ts: int, offset: int, out: list[Event]) -> None:
        """``req`` awaits its response: in ``_pending``, within the in-flight bound."""
        pending = self._pending
        old = pending.pop(corr, None)
        if old is not None:
            self._pending_bytes -= old[1].size + _REQUEST_COST
            out.append(Exchange(self._unskim(old[1]), None, Status.NO_RESPONSE))
        self._seq += 1
        pending[corr] = (self._seq, req)
        self._pending_bytes += req.size + _REQUEST_COST
        while self._pending_bytes > self.options.max_in_flight_bytes and len(pending) > 1:
            gone = self._unskim(pending.pop(next(iter(pending)))[1])
            self._pending_bytes -= gone.size + _REQUEST_COST
            self._cap_hits += 1
            if self._cap_hits == 1:
                out.append(Anomaly("in_flight_limit", TO_BROKER, first_ts,
                                   f"more than {self.options.max_in_flight_bytes >> 20} MiB of requests "
                                   f"({len(pending) + 1}) awaiting a response: the oldest, {gone.api_name} "
                                   f"correlation id {gone.correlation_id}, is reported without response and its "
                                   "response will be an orphan; reported once per connection", offset,
                                   {"in_flight": len(pending) + 1}))
            out.append(Exchange(gone, None, Status.NO_RESPONSE))

    def _after_request(self, api_key: int, version: int, body: dict[str, Any], size: int = 0) -> None:
        if api_key == 17 and version == 0:  # SaslHandshake v0: raw tokens follow
            self._sasl_raw = True
            self._sasl_mechanism = body.get("mechanism")
        elif api_key == 17:
            self._sasl_mechanism = body.get("mechanism")
        if api_key in _GROUP_APIS:
            decode_group_payloads(self._decoders, api_key, "request", body, None, size)
        elif api_key == 18:
            self._software = quirks.client_software(body) or self._software
        if not self.options.keep_secrets and needs_redaction(api_key):
            redact(api_key, body, self._sasl_mechanism)

    def _unskim(self, req: Request) -> Request:
        """``req`` decoded if it was skimmed and skimming is over (its anomalies belong to its packet's worker)."""
        if req.failure is SKIMMED and not self._skim.active():
            req = unskimmed(self._decoders, req)
            self._after_request(req.api_key, req.api_version, req.body, req.size)
        return req

    def _looks_like_request(self, frame: bytes) -> bool:
        if len(frame) < 8:
            return False
        api_key, version, corr = struct.unpack_from(">hhi", frame, 0)
        if corr < 0 or not known_request(api_key, version):
            return False
        return request_frame_decodes(frame, self._decoders)

    # -- responses --------------------------------------------------------------

    def _response(self, frame: bytes, first_ts: int, last_ts: int, offset: int, out: list[Event],
                  truncated_size: int = 0) -> None:
        if len(frame) < 4:
            if self._sasl_raw or self._sasl_mechanism:
                out.append(SaslToken(TO_CLIENT, len(frame) + 4, first_ts, self._sasl_mechanism,
                                     frame if self.options.keep_secrets else None))
            else:
                out.append(Anomaly("malformed", TO_CLIENT, first_ts, f"response of {len(frame)} bytes has no header",
                                   offset))
            return
        corr = fixedwidth.i32(frame, 0)
        entry = self._pending.pop(corr, None)
        if entry is not None:
            seq, req = entry
            self._pending_bytes -= req.size + _REQUEST_COST
        size = truncated_size or len(frame) + 4
        if entry is None:
            if self._sasl_raw:
                out.append(SaslToken(TO_CLIENT, size, first_ts, self._sasl_mechanism,
                                     frame if self.options.keep_secrets else None))
                return
            self._orphan(frame, corr, size, first_ts, last_ts, offset, out)
            return
        if first_ts < req.last_ts and not self._skew_reported:
            # Kept as measured, not clamped: the capture's clocks disagree (two taps, queues).
            self._skew_reported = True
            out.append(Anomaly("negative_latency", TO_CLIENT, first_ts,
                               f"response {corr} began {(req.last_ts - first_ts) / 1000:.1f} us before its request "
                               "ended, by the capture's timestamps (skewed clocks or capture points); latency kept "
                               "as measured; reported once per connection", offset,
                               {"latency_ns": first_ts - req.last_ts}))
        pending = self._pending
        while seq > self._older_from and pending:
            for first in pending:       # the oldest request still waiting
                break
            if pending[first][0] > seq:
                break
            unanswered = self._unskim(pending.pop(first)[1])
            self._pending_bytes -= unanswered.size + _REQUEST_COST
            out.append(Exchange(unanswered, None, Status.NO_RESPONSE))
        self._older_from = seq + 1
        if req.failure is SKIMMED:
            req = self._unskim(req)
            if req.failure is SKIMMED:     # still before this worker's range: no one writes the exchange
                return
        if req.body is None:
            resp = Response(corr, size, first_ts, last_ts, req.api_key, req.api_version, None, None, None,
                            stream_offset=offset, raw=frame[4:])
            if self._messages:
                out.append(resp)
            out.append(Exchange(req, resp, Status.OK))
            return
        hv = response_header_version(req.api_key, req.api_version)
        try:
            _, body_offset, tags = parse_response_header(frame, hv)
        except DECODE_ERRORS as exc:
            failure = DecodeFailure(type(exc).__name__, "response header tagged fields do not parse", 4)
            resp = Response(corr, size, first_ts, last_ts, req.api_key, req.api_version, hv, None, failure,
                            stream_offset=offset, raw=frame[4:])
            if self._messages:
                out.append(resp)
            out.append(Exchange(req, resp, Status.MALFORMED))
            return
        d = self._decoders.decode(req.api_key, "response", req.api_version, frame, body_offset)
        assert d is not None  # the request decoded with this api/version, so the schema has it
        if (req.api_key == 18 and (d.failure is not None or d.end != len(frame))
                and frame[body_offset:body_offset + 2] == b"\x00\x23"):
            # A broker that does not support the ApiVersions version asked for
            # answers UNSUPPORTED_VERSION in the v0 layout; clients re-read it so.
            v0 = self._decoders.decode(18, "response", 0, frame, body_offset)
            if v0 is not None and v0.failure is None and v0.end == len(frame):
                d = v0
        failure = d.failure
        # Truncation is the capture's doing, a body cut at the decoding budget ours; anything else
        # that failed is the peer's.
        status = _MALFORMED if req.failure is not None and req.failure.error not in _NOT_THE_PEERS else _OK
        if truncated_size and failure is not None:
            failure = DecodeFailure("Truncated", f"frame cut after {len(frame) + 4} of {truncated_size} bytes",
                                    failure.offset)
        elif failure is not None and failure.error == _LIMIT:
            out.append(budget.limit_anomaly(TO_CLIENT, first_ts, f"{req.api_name} v{req.api_version} response", size,
                                      failure, offset))
        elif failure is not None:
            status = Status.MALFORMED
            out.append(Anomaly("malformed", TO_CLIENT, first_ts,
                               f"{req.api_name} v{req.api_version} response: {failure.error} at byte {failure.offset}: "
                               f"{failure.detail}", offset))
        elif d.end != len(frame) and not truncated_size:
            extra = len(frame) - d.end
            out.append(Anomaly("trailing_bytes", TO_CLIENT, first_ts,
                               f"{extra} bytes after the {req.api_name} v{req.api_version} response body", offset,
                               quirks.as_extra(quirks.trailing_bytes(req.api_key, req.api_version, "response", extra,
                                                                     d.body, self._software))))
        self._after_response(req.api_key, d.body, req.body, size)
        # Positional (inferred, stream_offset, raw, header_tags): keywords cost a dict per response.
        resp = Response(corr, size, first_ts, last_ts, req.api_key, req.api_version, hv, d.body, failure,
                        False, offset, None, tags)
        if self._messages:
            out.append(resp)
        out.append(Exchange(req, resp, status))

    def _after_response(self, api_key: int, body: dict[str, Any], request_body: dict[str, Any] | None,
                        size: int = 0) -> None:
        if api_key in TEACHING_APIS:     # a method call for each response otherwise, to learn nothing
            self.topics.learn_from_response(api_key, body)
        if api_key in _GROUP_APIS:
            decode_group_payloads(self._decoders, api_key, "response", body, request_body, size)
        if not self.options.keep_secrets and needs_redaction(api_key):
            redact(api_key, body, self._sasl_mechanism)

    def _infer(self, frame: bytes, out: list[Event] | None = None, ts: int = 0,
               offset: int | None = None) -> Inference | None:
        """Infer an orphan's api, cheaply once this connection has shown what its orphans are.

        A full search tries every response schema (one to five milliseconds). A
        one-sided capture can hold millions of orphans, and a damaged or hostile one
        millions of frames no schema fits, so after the first few the apis already
        inferred here are tried first. A frame none of them fits gets a full search
        (a new api shows up at once) until full searches have missed that many times
        on this connection; then only every so often: the cost per orphan stays
        bounded whatever the orphans are.
        """
        self._orphans += 1
        if self._inferred and self._orphans > _FULL_INFERENCES:
            guess = infer_response(self._decoders, frame, self._seen_versions, list(self._inferred))
            if guess is not None:
                return guess
        shared = self.options.inference
        n = self._orphans
        if shared is not None and shared.misses >= shared.limit:
            # A damaged or hostile capture: a connection searches fully only at its orphans 64, 128, 256...
            limited = n < _FULL_INFERENCES or n & (n - 1) != 0
        else:
            limited = self._full_misses >= _FULL_INFERENCES and n % _FULL_INFERENCES != 0
        if limited:
            if out is not None and not self._inference_limited:
                self._inference_limited = True
                out.append(Anomaly(
                    "inference_limit", TO_CLIENT, ts,
                    f"{self._full_misses} orphan responses on this connection and {shared.misses if shared else 0} "
                    "in the capture fit no response schema: from here on only those apis already inferred here, "
                    f"and now and then every schema, are tried (reported once)", offset))
            return None
        guess = infer_response(self._decoders, frame, self._seen_versions)
        if guess is None:
            self._full_misses += 1
            if shared is not None:
                shared.misses += 1
        else:
            self._inferred[(guess.api_key, guess.api_version)] = None
        return guess

    def _orphan(self, frame: bytes, corr: int, size: int, first_ts: int, last_ts: int, offset: int,
                out: list[Event]) -> None:
        guess = self._infer(frame, out, last_ts, offset) if self.options.infer_orphans else None
        if guess is None:
            resp = Response(corr, size, first_ts, last_ts, None, None, None, None, None, stream_offset=offset,
                            raw=frame[4:])
        else:
            self._after_response(guess.api_key, guess.body, None, size)
            resp = Response(corr, size, first_ts, last_ts, guess.api_key, guess.api_version, guess.header_version,
                            guess.body, None, inferred=True, stream_offset=offset)
        if self._messages:
            out.append(resp)
        out.append(Exchange(None, resp, Status.ORPHAN_RESPONSE))

    # -- damage -----------------------------------------------------------------

    def _truncated(self, direction: Direction, partial: bytes, need: int, first_ts: int, ts: int, offset: int,
                   out: list[Event]) -> None:
        """Report what can be read of a frame whose end was lost."""
        if len(partial) < 4 + (8 if direction == TO_BROKER else 4):
            return
        size = need or _I32(partial, 0)[0] + 4
        if direction == TO_BROKER:
            self._request(partial[4:], first_ts, ts, offset, out, truncated_size=size)
        else:
            self._response(partial[4:], first_ts, ts, offset, out, truncated_size=size)

    def _feed_unsynced(self, direction: Direction, side: _Side, data: bytes, ts: int, out: list[Event]) -> None:
        """Collect bytes until a frame that can be proven starts; resume framing there."""
        segment_start = side.have
        if side.have:
            side.chunks.append(data)
            side.have += len(data)
            if side.need and side.have < side.need:
                return  # waiting for a candidate frame to complete before testing it
        else:
            side.keep(data, ts)
        buf = side.take()
        if direction == TO_BROKER:
            at, waiting = find_request(buf, self.options.max_frame_size, self._decoders)
        else:
            infer = self._infer if self.options.infer_orphans else None
            at, waiting = find_response(buf, segment_start, self._pending, self.options.max_frame_size,
                                        self._decoders, infer)
        if at is None:
            # Keep a tail in which a frame header may straddle the next segment.
            keep = buf[-RESYNC_KEEP:] if waiting else buf[-13:]
            side.offset += len(buf) - len(keep)
            side.keep(keep, ts)
            return
        if waiting:
            side.offset += at
            side.keep(buf[at:], ts)
            side.need = waiting
            return
        out.append(Anomaly("resync", direction, ts, resync_detail(direction, at, side.synced is None, ""),
                           side.offset, {"skipped": at}))
        side.offset += at
        side.synced = True
        self._frames(direction, side, buf[at:] if at else buf, ts, ts, out)
