"""Finding where frames start again in the bytes of a side that lost sync (or never had it).

A side is unsynced when the capture began mid-stream or bytes were lost across a frame boundary
(see :mod:`dissector.connection`). Anything can look like a size prefix, so a place counts as a
frame's start only when what follows is proven: a request by a header and body that decode, a
response by the correlation id of a request still waiting and a body that decodes as its answer.
A candidate whose frame has not all arrived yet is waited for, up to :data:`RESYNC_KEEP` bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from dissector.decoders import DECODE_ERRORS, Decoders
from dissector.events import Direction, Request
from dissector.framing import (
    MAX_PAD,
    find_request_frame,
    parse_response_header,
    plausible_request_header,
    request_frame_decodes,
    response_header_version,
)
from dissector.skim import SKIMMED

__all__ = ["RESYNC_KEEP", "find_request", "find_response", "resync_detail"]

RESYNC_KEEP = 1 << 20   # bytes an unsynced side keeps while it looks for a frame it can prove
_I32 = struct.Struct(">i").unpack_from
_PACK_I32 = struct.Struct(">i").pack


def resync_detail(direction: Direction, skipped: int, joined: bool, generation: str) -> str:
    """What a resync anomaly says: after a mid-stream start it is no error, and reads so."""
    if joined:
        what = "requests" if direction == Direction.TO_BROKER else "responses"
        rest = f", after {skipped} bytes of an earlier one" if skipped else ""
        return f"the capture joined this connection mid-stream: {what} read from the first {generation}frame{rest}"
    if skipped:
        return f"skipped {skipped} bytes to the next provable {generation}frame"
    return f"found a {generation}frame boundary"


def find_request(buf: bytes, max_frame: int, decoders: Decoders) -> tuple[int | None, int]:
    """(offset of a proven request frame, 0) or (offset of a candidate, bytes it needs)."""
    pos = 0
    while True:
        at = find_request_frame(buf, pos, max_frame)
        if at is None:
            return None, 0
        size = plausible_request_header(buf, at, max_frame)
        assert size is not None
        if at + 4 + size > len(buf):
            if size + 4 <= RESYNC_KEEP or at == 0:
                return at, size + 4
            pos = at + 1
            continue
        if request_frame_decodes(buf[at + 4:at + 4 + size], decoders):
            return at, 0
        pos = at + 1


def find_response(buf: bytes, segment_start: int, pending: dict[int, tuple[Any, Request]], max_frame: int,
                  decoders: Decoders, infer: Callable[[bytes], Any] | None) -> tuple[int | None, int]:
    """As :func:`find_request`, for responses: proven by the correlation id of a ``pending`` request
    and a body that decodes. ``infer`` (a connection's orphan inference, or None when it has none)
    is asked about a frame that nothing waits for."""
    best: int | None = None
    best_wait = 0
    for corr, (_, req) in pending.items():
        needle = _PACK_I32(corr)
        pos = buf.find(needle, 4)
        while pos != -1 and (best is None or pos - 4 < best):
            at = pos - 4
            size = _I32(buf, at)[0]
            if 4 <= size <= max_frame:
                if at + 4 + size > len(buf):
                    if best is None or at < best:
                        best, best_wait = at, size + 4
                elif _response_decodes(buf[at + 4:at + 4 + size], req, decoders):
                    best, best_wait = at, 0
                    break
            pos = buf.find(needle, pos + 1)
    if best is not None:
        return best, best_wait
    if infer is not None and not pending:
        # Nothing to pair with (a one-sided or late-started capture): a response
        # that starts a segment and ends exactly where the bytes end is likely
        # whole; accept it only if exactly one api decodes it.
        if len(buf) - segment_start >= 8:
            size = _I32(buf, segment_start)[0]
            if segment_start + 4 + size == len(buf):
                frame = buf[segment_start + 4:]
                if infer(frame) is not None:
                    return segment_start, 0
    return None, 0


def _response_decodes(frame: bytes, req: Request, decoders: Decoders) -> bool:
    if req.body is None and req.failure is not SKIMMED:     # a skimmed request has a body, not yet decoded
        return False
    try:
        _, body_offset, _ = parse_response_header(frame, response_header_version(req.api_key, req.api_version))
    except DECODE_ERRORS:
        return False
    d = decoders.decode(req.api_key, "response", req.api_version, frame, body_offset)
    return d is not None and d.failure is None and len(frame) - d.end <= MAX_PAD
