"""Kafka 0.7 request and response frames: parsing, and telling a plausible frame from noise.

A request is ``REQUEST_LENGTH int32`` (bytes after it), ``REQUEST_TYPE int16``
and a body; a single-partition body starts ``TOPIC_LENGTH int16, TOPIC,
PARTITION int32``; a multi body is ``TOPICPARTITION_COUNT int16`` and that
many single bodies. A response is ``RESPONSE_LENGTH int32, ERROR_CODE int16``
and a body shaped by the request it answers. No correlation id and no client
id exist in this protocol.

Functions here take the frame *without* its 4-byte length and raise
:class:`~dissector.errors.DissectError` subclasses (or ``struct.error``) on
bytes that do not parse; the connection turns those into anomalies.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from dissector.errors import BadLength, DissectError, RecordsError, Underflow
from dissector.v07.messages import message_set_extent, summarize

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)
# The names the dataset uses, and the key of the Kafka api that does the same job,
# so api_key groups every generation's produce (0), fetch (1) and offset (2) traffic.
API_NAMES = {PRODUCE: "Produce", FETCH: "Fetch", MULTIFETCH: "MultiFetch", MULTIPRODUCE: "MultiProduce",
             OFFSETS: "ListOffsets"}
API_KEYS = {PRODUCE: 0, FETCH: 1, MULTIFETCH: 1, MULTIPRODUCE: 0, OFFSETS: 2}
EXPECTS_RESPONSE = frozenset({FETCH, MULTIFETCH, OFFSETS})
# 0.7's own error table (kafka.common.ErrorMapping of 0.7), in the dataset's naming style.
ERROR_NAMES = {-1: "UNKNOWN", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "INVALID_MESSAGE", 3: "WRONG_PARTITION",
               4: "INVALID_FETCH_SIZE"}
MAX_TOPIC = 255

_H = struct.Struct(">h").unpack_from
_I = struct.Struct(">i").unpack_from
_QI = struct.Struct(">qi").unpack_from
_Q = struct.Struct(">q").unpack_from
_TOPIC_CHARS = re.compile(rb"[\x21-\x7e]+\Z")


# What parsing 0.7 bytes can raise; anything else is a bug.
PARSE_ERRORS = (DissectError, RecordsError, struct.error, IndexError)


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"UNKNOWN_ERROR_CODE({code})")


class Implausible(DissectError):
    """Parses, but not as anything a 0.7 peer sends (used to tell 0.7 from noise)."""


@dataclass
class Target:
    """One topic-partition a request names, in request order."""

    topic: str
    partition: int
    offset: int | None        # FETCH offset: the base of the byte positions of the fetched set


def _topic(frame: bytes, o: int, strict: bool) -> tuple[str, int]:
    n = _H(frame, o)[0]
    o += 2
    if n < 0 or o + n > len(frame):
        raise BadLength(f"topic length {n} at byte {o - 2} with {len(frame) - o} bytes left")
    raw = frame[o:o + n]
    if strict and (n == 0 or n > MAX_TOPIC or not _TOPIC_CHARS.match(raw)):
        raise Implausible(f"topic {raw[:40]!r} at byte {o} is not a topic name")
    return raw.decode("utf-8", "replace"), o + n


def _entry(kind: int, frame: bytes, o: int, strict: bool, entry: dict[str, Any]) -> int:
    """One single-partition body at ``o``, read into ``entry`` field by field (a failure keeps the rest)."""
    entry["topic"], o = _topic(frame, o, strict)
    partition = _I(frame, o)[0]
    o += 4
    if strict and partition < -1:          # -1: "any partition" in a 0.7 PRODUCE
        raise Implausible(f"partition {partition}")
    entry["partition"] = partition
    if kind == PRODUCE:
        size = _I(frame, o)[0]
        o += 4
        if size < 0 or o + size > len(frame):
            raise BadLength(f"messages length {size} at byte {o - 4} with {len(frame) - o} bytes left")
        _, stop = message_set_extent(frame, o, o + size)
        if stop != o + size:
            raise BadLength(f"message set of {size} bytes at byte {o} ends in a cut message")
        entry["messages_length"] = size
        entry["messages"] = summarize(frame[o:o + size])
        o += size
    elif kind == FETCH:
        offset, max_size = _QI(frame, o)
        o += 12
        if strict and (offset < 0 or max_size <= 0):
            raise Implausible(f"fetch offset {offset}, max size {max_size}")
        entry["offset"] = offset
        entry["max_size"] = max_size
    else:  # OFFSETS
        time, max_number = _QI(frame, o)
        o += 12
        if strict and (time < -2 or max_number < 0):
            raise Implausible(f"offsets time {time}, max number {max_number}")
        entry["time"] = time
        entry["max_number"] = max_number
    return o


_SINGLE = {PRODUCE: PRODUCE, FETCH: FETCH, OFFSETS: OFFSETS, MULTIFETCH: FETCH, MULTIPRODUCE: PRODUCE}


def parse_request(frame: bytes, strict: bool = False) -> tuple[int, dict[str, Any], int]:
    """(request type, body, bytes used). With ``strict``, refuse what no 0.7 client sends.

    The body always holds what parsed before a failure; callers that need it
    catch the error with :func:`parse_request_partial`.
    """
    body: dict[str, Any] = {}
    end = _parse_into(frame, body, strict)
    return body["request_type"], body, end


def parse_request_partial(frame: bytes) -> tuple[dict[str, Any], Exception | None, int]:
    """(body so far, the error or None, offset reached)."""
    body: dict[str, Any] = {}
    state = [0]
    try:
        end = _parse_into(frame, body, False, state)
        return body, None, end
    except PARSE_ERRORS as exc:
        return body, exc, state[0]


def _parse_into(frame: bytes, body: dict[str, Any], strict: bool, state: list[int] | None = None) -> int:
    kind = _H(frame, 0)[0]
    if kind not in API_NAMES:
        raise Implausible(f"request type {kind} (0.7 has 0..4)")
    body["request_type"] = kind
    o = 2
    if kind in (MULTIFETCH, MULTIPRODUCE):
        count = _H(frame, 2)[0]
        o = 4
        if count < 0 or (strict and count == 0):
            raise BadLength(f"topic-partition count {count}")
        body["topic_partition_count"] = count
        entries: list[dict[str, Any]] = []
        body["fetches" if kind == MULTIFETCH else "produces"] = entries
        for _ in range(count):
            if state is not None:
                state[0] = o
            e: dict[str, Any] = {}
            entries.append(e)
            o = _entry(_SINGLE[kind], frame, o, strict, e)
    else:
        if state is not None:
            state[0] = o
        o = _entry(kind, frame, o, strict, body)
    if state is not None:
        state[0] = o
    return o


def targets(body: dict[str, Any] | None) -> list[Target]:
    """The topic-partitions a request body names, in order (responses follow it)."""
    if not body:
        return []
    kind = body.get("request_type")
    entries = body.get("fetches") if kind == MULTIFETCH else body.get("produces") if kind == MULTIPRODUCE \
        else [body]
    out = []
    for e in entries or ():
        if "topic" in e and "partition" in e:
            out.append(Target(e["topic"], e["partition"], e.get("offset")))
    return out


def request_is_plausible(frame: bytes) -> bool:
    """The whole frame parses strictly as one 0.7 request, nothing left over."""
    try:
        _, _, end = parse_request(frame, strict=True)
    except PARSE_ERRORS:
        return False
    return end == len(frame)


# -- responses -------------------------------------------------------------------------------------

def parse_response(frame: bytes, kind: int, request: dict[str, Any] | None) -> tuple[dict[str, Any], int]:
    """(body, bytes used) of a response to a request of type ``kind``.

    ``request`` (the request body, when known) gives MULTIFETCH its count and
    every message set its fetch offset, so messages get byte-position offsets.
    """
    body: dict[str, Any] = {}
    _response_into(frame, kind, request, body)
    return body, body.pop("_end")


def parse_response_partial(frame: bytes, kind: int, request: dict[str, Any] | None
                           ) -> tuple[dict[str, Any], Exception | None, int]:
    body: dict[str, Any] = {}
    try:
        _response_into(frame, kind, request, body)
        return body, None, body.pop("_end")
    except PARSE_ERRORS as exc:
        return body, exc, body.pop("_end", 0)


def _response_into(frame: bytes, kind: int, request: dict[str, Any] | None, body: dict[str, Any]) -> None:
    body["_end"] = 0
    body["error_code"] = _H(frame, 0)[0]
    body["_end"] = o = 2
    n = len(frame)
    tgs = targets(request)
    if kind == FETCH:
        base = tgs[0].offset if tgs else None
        body["messages"] = summarize(frame[2:], base)
        body["_end"] = n
    elif kind == OFFSETS:
        if n == 2:
            return                  # an error answer without offsets
        count = _I(frame, 2)[0]
        o = 6
        if count < 0 or count > (n - 6) // 8:
            raise BadLength(f"offset count {count} with {n - 6} bytes left")
        body["offsets"] = [_Q(frame, o + 8 * i)[0] for i in range(count)]
        body["_end"] = o + 8 * count
    elif kind == MULTIFETCH:
        fetches: list[dict[str, Any]] = []
        body["fetches"] = fetches
        i = 0
        while o < n and (request is None or i < len(tgs)):
            size = _I(frame, o)[0]
            if size < 2 or o + 4 + size > n:
                raise BadLength(f"message set {i}: length {size} at byte {o} with {n - o - 4} bytes left")
            entry: dict[str, Any] = {}
            if i < len(tgs):
                entry["topic"], entry["partition"] = tgs[i].topic, tgs[i].partition
            entry["error_code"] = _H(frame, o + 4)[0]
            entry["messages"] = summarize(frame[o + 6:o + 4 + size], tgs[i].offset if i < len(tgs) else None)
            fetches.append(entry)
            o += 4 + size
            body["_end"] = o
            i += 1
        if request is not None and i != len(tgs):
            raise Underflow(f"{i} message sets for {len(tgs)} requested topic-partitions")
    else:
        raise BadLength(f"request type {kind} has no response")


def response_shapes(frame: bytes) -> list[int]:
    """Request types whose response this frame could be, judged by its bytes alone (orphans, resync)."""
    if len(frame) < 2:
        return []
    code = _H(frame, 0)[0]
    if code not in ERROR_NAMES:
        return []
    out = []
    n = len(frame)
    if n == 2 or (n >= 6 and _I(frame, 2)[0] * 8 + 6 == n):
        out.append(OFFSETS)
    # MULTIFETCH: a chain of (length, error, set) that ends exactly at the frame's end.
    o, k = 2, 0
    while n - o >= 6:
        size = _I(frame, o)[0]
        if size < 2 or o + 4 + size > n or _H(frame, o + 4)[0] not in ERROR_NAMES:
            break
        o += 4 + size
        k += 1
    if k and o == n:
        out.append(MULTIFETCH)
    # FETCH: messages with good CRCs from the first byte (a cut last one allowed), or nothing.
    s = summarize(frame[2:])
    if s.error is None and not s.crc_failures and (s.batch_count or n == 2 or (s.partial_tail and n > 11)):
        out.append(FETCH)
    return out


# -- finding frames in a byte stream ---------------------------------------------------------------

# A size under 112 MiB, then a request type 0..4: candidates for a 0.7 request frame.
_REQUEST_CANDIDATE = re.compile(rb"[\x00-\x06]...\x00[\x00-\x04]", re.S)
# A size under 112 MiB, then an error code -1..4: candidates for a 0.7 response frame.
_RESPONSE_CANDIDATE = re.compile(rb"[\x00-\x06]...(?:\x00[\x00-\x04]|\xff\xff)", re.S)
_MIN_PRODUCE = 2 + 2 + 1 + 4 + 4        # the smallest request: an empty PRODUCE to a one-letter topic


def plausible_request_header(buf: bytes, pos: int, max_frame: int) -> int | None:
    """If a plausible 0.7 request starts at ``buf[pos]``, its size (after the length); else None.

    Looks at the fixed part only (length, type, topic, partition, and for FETCH
    and OFFSETS the exact size), so it can be asked of a frame not yet complete.
    """
    if len(buf) - pos < 10:
        return None
    size, kind, n = struct.unpack_from(">ihh", buf, pos)
    if size < _MIN_PRODUCE or size > max_frame or kind not in API_NAMES:
        return None
    if kind in (MULTIFETCH, MULTIPRODUCE):
        if n <= 0 or len(buf) - pos < 12:
            return None
        n = _H(buf, pos + 8)[0]
        at = pos + 10
    else:
        at = pos + 8
    if n <= 0 or n > MAX_TOPIC:
        return None
    topic = buf[at:at + n]
    if len(topic) < n and len(buf) - pos < 4 + size:
        return size if _TOPIC_CHARS.match(topic or b"x") else None
    if not _TOPIC_CHARS.match(topic):
        return None
    if kind in (FETCH, OFFSETS) and size != 2 + 2 + n + 4 + 12:
        return None
    return size


def find_request(buf: bytes, start: int = 0, max_frame: int = 100 << 20,
                 require_complete: bool = True) -> tuple[int | None, int]:
    """(offset, 0) of the first whole 0.7 request frame at or after ``start`` that parses strictly,
    or (offset, bytes needed) of a plausible one not yet complete (when not ``require_complete``),
    or (None, 0)."""
    pos = start
    search = _REQUEST_CANDIDATE.search
    while True:
        m = search(buf, pos)
        if m is None:
            return None, 0
        at = m.start()
        size = plausible_request_header(buf, at, max_frame)
        if size is not None:
            if at + 4 + size > len(buf):
                if not require_complete:
                    return at, size + 4
            elif request_is_plausible(buf[at + 4:at + 4 + size]):
                return at, 0
        pos = at + 1


def find_response(buf: bytes, start: int, max_frame: int, kinds: frozenset[int] | None
                  ) -> tuple[int | None, int]:
    """(offset, 0) of the first whole frame that parses as a response of one of ``kinds``
    (any, when None) and is strong evidence: it ends exactly where ``buf`` ends or where
    another plausible response starts. (offset, bytes needed) for an incomplete candidate
    whose header fits; (None, 0) otherwise."""
    pos = start
    search = _RESPONSE_CANDIDATE.search
    n = len(buf)
    waiting: tuple[int | None, int] = (None, 0)
    while True:
        m = search(buf, pos)
        if m is None:
            return waiting
        at = m.start()
        size = _I(buf, at)[0]
        if 2 <= size <= max_frame:
            end = at + 4 + size
            if end > n:
                if waiting[0] is None and size + 4 <= (1 << 20):
                    waiting = (at, size + 4)
            else:
                shapes = response_shapes(buf[at + 4:end])
                if kinds is not None:
                    shapes = [k for k in shapes if k in kinds]
                if shapes and (end == n or _RESPONSE_CANDIDATE.match(buf, end)):
                    return at, 0
                if shapes and n - end < 6 and waiting[0] is None:
                    waiting = (at, end + 6 - at)      # what follows it is not here yet
        pos = at + 1


def sniff(data: bytes, max_frame: int = 100 << 20) -> bool | None:
    """Is the start of a client's stream a 0.7 request? True / False / None (need more bytes)."""
    if len(data) < 10:
        if len(data) >= 6:
            size, kind = struct.unpack_from(">ih", data, 0)
            if size < _MIN_PRODUCE or size > max_frame or kind not in API_NAMES:
                return False
        return None
    size = plausible_request_header(data, 0, max_frame)
    if size is None:
        return False
    if len(data) < size + 4:
        return None
    return request_is_plausible(data[4:size + 4])

