"""Kafka 0.7 message sets: the bytes a PRODUCE carries and a FETCH returns.

A message is ``LENGTH int32`` (bytes after the field), ``MAGIC int8``, with
magic 1 an ``ATTRIBUTES int8`` whose low two bits name the codec (0 none,
1 gzip, 2 snappy), ``CHECKSUM uint32`` (CRC-32 of the payload) and the
payload. A compressed message's payload is itself a message set. There is no
key, no timestamp and no per-message offset: a consumer's offset is a byte
position in the partition's log, so a message fetched from offset F at byte
position P of the set has offset F + P. Messages inside a compressed wrapper
take the wrapper's offset (the position a consumer resumes from to read them
again).

Two entry points, as for the later formats in :mod:`dissector.records`:
:func:`summarize` walks top-level headers only and never decompresses;
:func:`decode_message_set` decodes everything with the shared bomb cap.

:class:`MessageSetSummary` has no slots: compiled, its base is an extension type
whose fields a slot of the same name would shadow (see also ``messages.pxd``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dissector.codecs import Budget, BytesMode, codec_name, render_bytes
from dissector.errors import RecordsBadLength, RecordsError, RecordsUnderflow
from dissector.ints import I64_MAX
from dissector.records import DEFAULT_MAX_DECOMPRESSED, OUT_OF_RANGE, RecordsSummary

__all__ = ["Message07", "MessageSet07", "MessageSetSummary", "decode_message_set", "summarize",
           "message_set_extent", "MIN_LENGTH"]

_I32 = struct.Struct(">i").unpack_from
_U32 = struct.Struct(">I").unpack_from
MIN_LENGTH = (5, 6)          # LENGTH of an empty-payload message, by magic
_HEADER = (9, 10)            # bytes before the payload, by magic (LENGTH included)
MAX_DEPTH = 4                # wrappers inside wrappers followed this deep; deeper is reported


@dataclass
class Message07:
    position: int                 # byte position in the set it was read from
    offset: int | None            # consumer offset (see module doc); None when the base is unknown
    length: int
    magic: int
    attributes: int
    codec: str
    checksum: int
    crc_valid: bool
    payload: bytes                # for a wrapper: the compressed inner set
    inner: list[Message07] | None = None
    error: str | None = None      # why an inner set is missing or incomplete

    # Record-like view, so the records table and the tree read these like the later formats.
    key = None
    timestamp = None

    @property
    def value(self) -> bytes:
        return self.payload

    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        return []

    @property
    def is_wrapper(self) -> bool:
        return self.magic == 1 and self.attributes & 3 != 0

    def leaves(self) -> Iterator[Message07]:
        if not self.is_wrapper:
            yield self
            return
        for m in self.inner or ():
            yield from m.leaves()

    def to_dict(self, bytes_mode: BytesMode = "auto") -> dict[str, Any]:
        return {
            "position": self.position,
            "offset": self.offset,
            "length": self.length,
            "magic": self.magic,
            "attributes": self.attributes,
            "codec": self.codec,
            "checksum": self.checksum,
            "crc_valid": self.crc_valid,
            "payload": render_bytes(self.payload, bytes_mode),
            "inner": None if self.inner is None else [m.to_dict(bytes_mode) for m in self.inner],
            "error": self.error,
        }


@dataclass
class MessageSet07:
    messages: list[Message07]
    total_bytes: int
    partial_tail: bool = False    # the last message was cut (normal at the end of a FETCH response)
    tail_bytes: int = 0
    error: str | None = None      # why decoding stopped early
    error_offset: int | None = None

    def leaves(self) -> Iterator[Message07]:
        for m in self.messages:
            yield from m.leaves()


@dataclass
class MessageSetSummary(RecordsSummary):
    """A :class:`RecordsSummary` of a 0.7 message set; ``base_offset`` is the fetch offset, if known."""

    base_offset: int | None = None
    format: str = "0.7"

    def to_dict(self) -> dict[str, Any]:
        d = RecordsSummary.to_dict(self)
        d["format"] = self.format
        d["base_offset"] = self.base_offset
        return d


def _header(buf: bytes, pos: int, end: int) -> tuple[int, int, int, int]:
    """(length, magic, attributes, checksum) of the message at ``pos``; it must fit before ``end``."""
    length = _I32(buf, pos)[0]
    magic = buf[pos + 4]
    if magic > 1:
        raise RecordsError(f"message at byte {pos}: magic {magic} (0.7 knows 0 and 1)")
    if length < MIN_LENGTH[magic]:
        raise RecordsBadLength(f"message at byte {pos}: length {length} below the minimum {MIN_LENGTH[magic]}")
    if pos + 4 + length > end:
        raise RecordsUnderflow(f"message at byte {pos}: length {length} runs past the set's end")
    if magic == 1:
        return length, 1, buf[pos + 5], _U32(buf, pos + 6)[0]
    return length, 0, 0, _U32(buf, pos + 5)[0]


def message_set_extent(buf: bytes, start: int, end: int) -> tuple[int, int]:
    """(complete messages, end of the last one) of the set in ``buf[start:end]``.

    Raises :class:`RecordsError` when a header is impossible (bad magic, a length
    below the minimum); a message running past ``end`` stops the walk (a partial tail).
    """
    pos = start
    count = 0
    while end - pos >= 4:
        if end - pos < 9:
            break
        try:
            length, _, _, _ = _header(buf, pos, end)
        except RecordsUnderflow:
            break
        pos += 4 + length
        count += 1
    return count, pos


def summarize(data: bytes, base_offset: int | None = None, *, check_crc: bool = True,
              max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> MessageSetSummary:
    """Top-level headers: counts, codecs, CRCs, byte-position offsets. Never raises.

    Compressed wrappers are opened (within ``max_decompressed`` for the whole
    call) only to count the messages inside, as the later formats' summary
    does; one that cannot be opened makes the count unknown (None).
    """
    n = len(data)
    pos = 0
    count = records = wrappers = 0
    unknown = False
    budget = Budget(max_decompressed)
    first = last = None
    codec = -1
    magics = 0
    failures: list[int] = []
    err: str | None = None
    partial = False
    mv = memoryview(data)
    try:
        while pos < n:
            if n - pos < 9:
                partial = True
                break
            length = _I32(data, pos)[0]
            magic = data[pos + 4]
            if magic <= 1 and length >= MIN_LENGTH[magic] and pos + 4 + length > n:
                partial = True
                break
            length, magic, attrs, crc = _header(data, pos, n)
            end = pos + 4 + length
            if check_crc and zlib.crc32(mv[pos + _HEADER[magic]:end]) != crc:
                failures.append(pos)
            c = attrs & 3
            codec = c if count == 0 else (codec if codec == c else 8)
            magics |= 1 << magic
            if c:
                wrappers += 1
                if not unknown:
                    opened = _decode(data, pos, n, None, budget, 1, MAX_DEPTH, top=True)
                    if _broken(opened):
                        unknown = True
                    else:
                        records += sum(1 for _ in opened.leaves())
            else:
                records += 1
            if base_offset is not None:
                if first is None:
                    first = base_offset + pos
                last = base_offset + pos
            count += 1
            pos = end
    except RecordsError as e:
        err = str(e)
    out_of_range = None
    if last is not None and last > I64_MAX:
        # A fetch offset near int64's end: byte positions past it have no int64 offset.
        out_of_range = (f"{OUT_OF_RANGE}: fetch offset {base_offset} plus byte positions up to {pos} beyond int64: "
                        "offsets past it null")
        first = first if first <= I64_MAX else None
        last = None
    return MessageSetSummary(
        total_bytes=n, magics=tuple(m for m in (0, 1) if magics >> m & 1), batch_count=count,
        record_count=None if unknown else records, legacy_wrappers=wrappers,
        first_offset=first, last_offset=last,
        codec=None if codec < 0 else ("mixed" if codec == 8 else codec_name(codec)),
        crc_checked=check_crc, crc_failures=failures, partial_tail=partial, tail_bytes=n - pos if partial else 0,
        error=err, error_offset=pos if err else None, data=data, out_of_range=out_of_range, base_offset=base_offset)


def _broken(m: Message07) -> bool:
    if m.error is not None:
        return True
    return any(_broken(i) for i in m.inner or ())


def decode_message_set(data: bytes, base_offset: int | None = None, *,
                       max_decompressed: int = DEFAULT_MAX_DECOMPRESSED, max_depth: int = MAX_DEPTH) -> MessageSet07:
    """Every message, inner sets inflated within ``max_decompressed`` bytes for the whole call. Never raises.

    A failure inside a wrapper stays on that wrapper (``error``); a broken
    top-level header stops the walk and is kept on the result.
    """
    out = MessageSet07([], len(data))
    budget = Budget(max_decompressed)
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 9:
            out.partial_tail, out.tail_bytes = True, n - pos
            break
        try:
            msg = _decode(data, pos, n, base_offset, budget, 1, max_depth, top=True)
        except RecordsUnderflow:
            out.partial_tail, out.tail_bytes = True, n - pos
            break
        except RecordsError as e:
            out.error, out.error_offset = f"{type(e).__name__}: {e}", pos
            break
        out.messages.append(msg)
        pos += 4 + msg.length
    return out


def _decode(buf: bytes, pos: int, end: int, base: int | None, budget: Budget, depth: int, max_depth: int,
            top: bool = False, offset: int | None = None) -> Message07:
    length, magic, attrs, crc = _header(buf, pos, end)
    stop = pos + 4 + length
    payload = buf[pos + _HEADER[magic]:stop]
    if top:
        offset = None if base is None or base + pos > I64_MAX else base + pos
    c = attrs & 3 if magic == 1 else 0
    msg = Message07(pos, offset, length, magic, attrs, codec_name(c), crc, zlib.crc32(payload) == crc, payload)
    if not c:
        return msg
    if c == 3:
        msg.error = "codec bits 3: not a 0.7 codec"
        return msg
    if depth >= max_depth:
        msg.error = f"compressed message at nesting depth {depth} (max {max_depth}): not decoded"
        return msg
    inner: list[Message07] = []
    msg.inner = inner
    try:
        data = budget.decompress(c, payload)
        p, n = 0, len(data)
        while p < n:
            if n - p < 9:
                raise RecordsUnderflow(f"inner set: {n - p} bytes at byte {p}, a message needs 9")
            m = _decode(data, p, n, base, budget, depth + 1, max_depth, offset=offset)
            inner.append(m)
            p += 4 + m.length
    except RecordsError as e:
        msg.error = f"{type(e).__name__}: {e}"
    return msg

