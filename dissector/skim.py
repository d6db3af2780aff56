"""Skimming: a connection's frames cut and paired without decoding the bodies nobody will read.

When several workers share one connection by packet ranges (``kdissect decode --jobs``, see
docs/architecture.md), every worker frames and pairs the whole connection up to the end of its
range, so that its first exchanges pair as in one process, but it writes rows only for what
happens inside its range. Before its range starts, the bodies of the requests that carry no
connection state (Produce, Fetch: the bulk of any capture) are not decoded: such a request waits
in ``_pending`` with its frame and no body, and its response is kept raw. If the request is still
waiting when the range starts, it is decoded then (:meth:`Connection._unskim`), so every exchange
the worker writes is decoded exactly as one process decodes it.

The requests skimmed are those whose body changes nothing in the connection or the capture:
never SASL, ApiVersions (quirks), Metadata or CreateTopics (topic ids), the group apis (embedded
payloads), nor any frame the dissector has to look into to frame the next one.
"""

from __future__ import annotations

from typing import Any

from dissector.events import DecodeFailure, Request
from dissector.framing import known_request, parse_request_header

# Produce and Fetch: whether a response comes depends only on Produce's acks, read below
# (:func:`skimmed` tests the two keys itself).
SKIMMED_APIS = frozenset({0, 1})
# The failure a skimmed request carries until it is decoded (identity-compared).
SKIMMED = DecodeFailure("Skimmed", "body not decoded before this worker's range", 0)


class Skim:
    """Skim while ``counter.packets`` (the packets read: ``capture.stats.CaptureStats``, or anything with
    that attribute) is below ``start``; once it is not, never again."""

    __slots__ = ("counter", "done", "start")

    def __init__(self, start: int, counter: Any = None) -> None:
        self.start = start
        self.counter = counter
        self.done = start <= 0

    def active(self) -> bool:
        if self.done:
            return False
        packets = self.counter.packets
        if packets < self.start:
            return True
        self.done = True
        return False


def produce_acks(frame: bytes, body_offset: int, version: int) -> int | None:
    """A Produce request's acks read from its frame without decoding the rest; None if the bytes
    do not hold it. The caller skims only when this is neither None nor 0: then a response is
    expected whatever a full decode would make of the body (a body failing before acks expects one too)."""
    o = body_offset
    n = len(frame)
    if version >= 3:                       # transactional_id, a nullable string
        if version >= 9:                   # compact: unsigned varint length + 1, 0 for null
            length = shift = 0
            while True:
                if o >= n or shift > 28:
                    return None
                b = frame[o]
                o += 1
                length |= (b & 0x7F) << shift
                if not b & 0x80:
                    break
                shift += 7
            o += length - 1 if length else 0
        else:
            if o + 2 > n:
                return None
            length = _i16(frame, o)
            o += 2 + (length if length > 0 else 0)
            if length < -1:
                return None
    if o + 2 > n:
        return None
    return _i16(frame, o)


def _i16(b: bytes, o: int) -> int:
    v = b[o] << 8 | b[o + 1]
    return v - 0x10000 if v & 0x8000 else v


def skimmed(skim: Skim, hdr: Any, frame: bytes, size: int, first_ts: int, last_ts: int,
            offset: int) -> Request | None:
    """The request of header ``hdr`` left undecoded (its frame kept for :func:`unskimmed`) if ``skim``
    is on and its api is skimmed; else None: the caller decodes it."""
    api_key = hdr.api_key
    # Cheapest first: most frames of a skimmed stretch are Produce or Fetch, all of them known.
    if api_key > 1 or api_key < 0 or skim.done or not skim.active() or not known_request(api_key, hdr.api_version):
        return None
    if api_key == 0:
        acks = produce_acks(frame, hdr.body_offset, hdr.api_version)
        if acks is None or acks == 0:
            return None
    return Request(api_key, hdr.api_version, hdr.correlation_id, hdr.client_id, size, first_ts, last_ts,
                   hdr.header_version, None, SKIMMED, offset, frame, hdr.tags)


def answers_skimmed(skim: Skim, pending: dict, corr: int) -> bool:
    """Whether a response of correlation id ``corr`` answers a request of ``pending`` (a connection's
    ``_pending``) that was skimmed, while skimming goes on: then nothing of its frame but the id is read."""
    entry = pending.get(corr)
    if entry is None:
        return False
    req = entry[1]
    return req.failure is SKIMMED and skim.active()


def unskimmed(decoders: Any, req: Request) -> Request:
    """A skimmed request decoded, as :meth:`Connection._request` decodes it (known api and version, whole)."""
    frame = req.raw
    assert frame is not None
    d = decoders.decode(req.api_key, "request", req.api_version, frame, parse_request_header(frame).body_offset)
    return Request(req.api_key, req.api_version, req.correlation_id, req.client_id, req.size, req.first_ts,
                   req.last_ts, req.header_version, d.body, d.failure, req.stream_offset, None, req.header_tags)
