"""Kafka frame headers: parsing, and telling a plausible frame from noise.

Used three ways: by the connection to read every frame, by ``capture`` to decide
whether a TCP connection speaks Kafka at all, and by the resync logic to find
the next frame boundary after bytes were lost. A plausible request header is
strong evidence: a size within bounds, a known api key with a version that key
has, a non-negative correlation id and a printable client id.

Compiled (``framing.pxd``), a request header's integers are read as C loads
(:mod:`dissector.ints`) from the frame as typed ``bytes``, and the header-version
tables are C-level dicts. Their keys stay defined for a garbled frame's negative
api key or version, where a shift of a negative C integer would not be.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass

from dissector import schema
from dissector.decoders import DECODE_ERRORS, Decoders, default_decoders
from dissector.errors import Underflow
from dissector import fixedwidth
from dissector.primitives import read_tags

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # a broker's socket.request.max.bytes default
# Real peers leave a few stray bytes after a body (librdkafka: 4 after ApiVersions v0,
# 3 after a null Metadata topics array). A frame proven otherwise may carry that many.
MAX_PAD = 4

_SIZE = struct.Struct(">i").unpack_from
_HHI = struct.Struct(">hhi").unpack_from
_H = struct.Struct(">h").unpack_from

# Header versions per api key and version, keyed by api_key * 65536 + version: one int, not a
# tuple to build and hash for every frame. Versions are below 2**15, so a negative api key or
# version from a garbled frame gives a key no table holds. Built once, read per frame.
_REQ_HEADER: dict[int, int] = {}
_RESP_HEADER: dict[int, int] = {}
for _key in schema.api_keys():
    _lo, _hi = schema.version_range(_key)  # type: ignore[misc]
    for _v in range(_lo, _hi + 1):
        _REQ_HEADER[_key * 65536 + _v] = schema.request_header_version(_key, _v)
        _RESP_HEADER[_key * 65536 + _v] = schema.response_header_version(_key, _v)


def known_request(api_key: int, version: int) -> bool:
    """Whether the schema has this api key and version."""
    return (api_key * 65536 + version) in _REQ_HEADER


def request_header_version(api_key: int, version: int) -> int:
    hv = _REQ_HEADER.get(api_key * 65536 + version)
    if hv is None:
        # Unknown api or a version newer than the schema: the client id is there
        # in every header version clients send today; tags only if the api is flexible.
        return schema.request_header_version(api_key, version) if schema.version_range(api_key) else 1
    return hv


def response_header_version(api_key: int, version: int) -> int:
    hv = _RESP_HEADER.get(api_key * 65536 + version)
    if hv is None:
        return schema.response_header_version(api_key, version) if schema.version_range(api_key) else 0
    return hv


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    body_offset: int              # offset of the body inside the frame (frame excludes the size prefix)
    tags: dict[int, bytes] | None


def parse_request_header(frame: bytes) -> RequestHeader:
    """Parse a request header from a frame (the bytes after the 4-byte size). Raises DECODE_ERRORS."""
    b = frame if type(frame) is bytes else bytes(frame)
    size = len(b)
    whole = size >= 10    # a shorter frame fails in struct, as it always did
    if whole:
        api_key, version, corr = fixedwidth.i16(b, 0), fixedwidth.i16(b, 2), fixedwidth.i32(b, 4)
    else:
        api_key, version, corr = _HHI(b, 0)
    known = _REQ_HEADER.get(api_key * 65536 + version)
    hv = known if known is not None else request_header_version(api_key, version)
    o = 8
    client_id = None
    if hv >= 1:
        n = fixedwidth.i16(b, 8) if whole else _H(b, 8)[0]
        o = 10
        if n >= 0:
            end = o + n
            if end > size:
                raise Underflow(f"client id of {n} bytes runs past the frame")
            client_id = b[o:end].decode("utf-8", "replace")
            o = end
    tags = None
    if hv >= 2:
        if b[o] == 0:           # no tagged fields, nearly always: no holder, no call
            o += 1
        else:
            holder: dict = {}
            o = read_tags(b, o, holder, None)
            tags = holder.get("_unknown_tags")
    return RequestHeader(api_key, version, corr, client_id, hv, o, tags)


def parse_response_header(frame: bytes, header_version: int) -> tuple[int, int, dict[int, bytes] | None]:
    """(correlation id, body offset, header tags)."""
    corr = fixedwidth.i32(frame, 0) if len(frame) >= 4 else _SIZE(frame, 0)[0]   # too short: struct.error as ever
    if header_version >= 1:
        if frame[4] == 0:
            return corr, 5, None
        holder: dict = {}
        o = read_tags(frame, 4, holder, None)
        return corr, o, holder.get("_unknown_tags")
    return corr, 4, None


_PRINTABLE = re.compile(rb"[\x20-\x7e]*\Z")


def plausible_request_header(buf: bytes, pos: int, max_frame: int = DEFAULT_MAX_FRAME) -> int | None:
    """If a plausible request frame starts at ``buf[pos]``, its size; else None.

    Looks only at the size, the fixed header and the client id, so it can be
    asked of a frame that has not fully arrived.
    """
    if len(buf) - pos < 14:
        return None
    size, api_key, version, corr = struct.unpack_from(">ihhi", buf, pos)
    if size < 10 or size > max_frame or corr < 0:
        return None
    hv = _REQ_HEADER.get(api_key * 65536 + version)
    if hv is None:
        return None
    if hv == 0:
        return size
    n = _H(buf, pos + 12)[0]
    if n < -1 or n > size - 10:
        return None
    if n > 0:
        cid = buf[pos + 14:pos + 14 + n]
        if not _PRINTABLE.match(cid):
            return None
    return size


class Sniff(enum.Enum):
    KAFKA = "kafka"
    NOT_KAFKA = "not_kafka"
    NEED_MORE = "need_more"


def sniff_request(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> Sniff:
    """Do the first bytes a client sent look like a Kafka request?

    The header must be plausible and, once the whole first frame is there, its
    body must decode completely with the schema of its api key and version.
    """
    if len(data) < 14:
        # Reject early what can never become a request, so a quiet non-Kafka
        # connection is not buffered forever.
        if len(data) >= 4:
            size = _SIZE(data, 0)[0]
            if size < 10 or size > max_frame:
                return Sniff.NOT_KAFKA
        if len(data) >= 8:
            api_key, version = struct.unpack_from(">hh", data, 4)
            if (api_key, version) not in _REQ_HEADER:
                return Sniff.NOT_KAFKA
        return Sniff.NEED_MORE
    size = plausible_request_header(data, 0, max_frame)
    if size is None:
        return Sniff.NOT_KAFKA
    if len(data) < size + 4:
        # A body we cannot check yet: decide on the header when the frame is large.
        return Sniff.KAFKA if len(data) >= 4096 else Sniff.NEED_MORE
    return Sniff.KAFKA if request_frame_decodes(data[4:size + 4]) else Sniff.NOT_KAFKA


def request_frame_decodes(frame: bytes, decoders: Decoders | None = None) -> bool:
    """Header and body decode with no failure and nothing left over (but a few pad bytes)."""
    try:
        hdr = parse_request_header(frame)
    except DECODE_ERRORS:
        return False
    d = (decoders or default_decoders()).decode(hdr.api_key, "request", hdr.api_version, frame, hdr.body_offset)
    if d is None or d.failure is not None:
        return False
    return len(frame) - d.end <= MAX_PAD


# A size below 112 MiB, a known-looking api key (0..127), a version below 32,
# any correlation id, then a client id length of -1 or under 256 — a cheap
# regex pass picks candidates so that resync does not test every byte in Python.
_CANDIDATE = re.compile(rb"[\x00-\x06]...\x00[\x00-\x7f]\x00[\x00-\x1f][\x00-\x7f]...(?:\x00|\xff\xff)", re.S)


def find_request_frame(data: bytes, start: int = 0, max_frame: int = DEFAULT_MAX_FRAME,
                       require_complete: bool = False) -> int | None:
    """Offset of the first plausible request frame at or after ``start``, else None.

    With ``require_complete``, the frame must be whole in ``data`` and decode
    completely; otherwise a plausible header is enough.
    """
    pos = start
    search = _CANDIDATE.search
    while True:
        m = search(data, pos)
        if m is None:
            return None
        at = m.start()
        size = plausible_request_header(data, at, max_frame)
        if size is not None:
            if not require_complete:
                return at
            if at + 4 + size <= len(data) and request_frame_decodes(data[at + 4:at + 4 + size]):
                return at
        pos = at + 1
