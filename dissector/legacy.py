"""Legacy message sets (magic 0 and 1), as written before Kafka 0.11.

A message set is repeated ``offset int64, message_size int32, message``; a
message is ``crc uint32, magic int8, attributes int8, [timestamp int64 if
magic 1], key bytes, value bytes`` with int32 lengths (-1 = null). The CRC-32
covers magic..end. A message whose attributes name a codec is a *wrapper*: its
value is a compressed inner message set.

Inner offsets: under a magic 1 wrapper they are relative (0..n-1) and the
wrapper's offset is the absolute offset of the *last* inner message; under a
magic 0 wrapper they are absolute as written. Under a magic 1 wrapper with
LogAppendTime, inner messages take the wrapper's timestamp (as Kafka's
consumer does); what the wire said stays in ``wire_offset``/``wire_timestamp``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dissector.codecs import Budget, BytesMode, codec_name, render_bytes
from dissector.errors import RecordsBadLength, RecordsError, RecordsUnderflow
from dissector.ints import I64_MAX, I64_MIN

__all__ = ["LegacyMessage", "decode_message", "decode_message_set", "count_wrapper", "LEGACY_MIN_SIZE"]

_HEAD = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
LEGACY_MIN_SIZE = (14, 22)  # message_size of a v0 / v1 message with null key and value
_TS_TYPES = ("create_time", "log_append_time")


@dataclass
class LegacyMessage:
    position: int                 # byte offset of the entry in the buffer it was read from
    offset: int                   # absolute offset (see module doc)
    wire_offset: int              # the offset field as written
    message_size: int
    crc: int
    crc_valid: bool | None        # None when CRC checking was off
    magic: int
    attributes: int
    codec: str
    timestamp_type: str | None    # None for magic 0
    timestamp: int | None         # effective; None for magic 0
    wire_timestamp: int | None
    key: bytes | None
    value: bytes | None           # for a wrapper: the compressed inner set
    inner: list[LegacyMessage] | None = None  # decoded inner set of a wrapper
    error: str | None = None      # why the inner set is missing or incomplete
    out_of_range: str | None = None   # inner offsets shifted past int64 (None there): see dissector.records

    # Record-like view so leaves of both formats read alike.
    @property
    def headers(self) -> list[tuple[str, bytes | None]]:
        return []

    @property
    def is_wrapper(self) -> bool:
        return self.attributes & 7 != 0

    def leaves(self) -> Iterator[LegacyMessage]:
        """This message if it is not a wrapper, else its inner leaves in order."""
        if self.inner is None:
            if not self.is_wrapper:
                yield self
            return
        for m in self.inner:
            yield from m.leaves()

    def to_dict(self, bytes_mode: BytesMode = "auto") -> dict[str, Any]:
        return {
            "kind": "legacy",
            "position": self.position,
            "offset": self.offset,
            "wire_offset": self.wire_offset,
            "message_size": self.message_size,
            "crc": self.crc,
            "crc_valid": self.crc_valid,
            "magic": self.magic,
            "attributes": self.attributes,
            "codec": self.codec,
            "timestamp_type": self.timestamp_type,
            "timestamp": self.timestamp,
            "wire_timestamp": self.wire_timestamp,
            "key": render_bytes(self.key, bytes_mode),
            "value": render_bytes(self.value, bytes_mode),
            "inner": None if self.inner is None else [m.to_dict(bytes_mode) for m in self.inner],
            "error": self.error,
            "out_of_range": self.out_of_range,
        }


def _shift(msgs: list[LegacyMessage], delta: int) -> int:
    """Add ``delta`` to the offsets; those it pushes past int64 become None. How many did."""
    lost = 0
    for m in msgs:
        if m.offset is not None:
            m.offset += delta
            if not I64_MIN <= m.offset <= I64_MAX:
                m.offset = None
                lost += 1
        if m.inner:
            lost += _shift(m.inner, delta)
    return lost


def _bytes_field(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise RecordsUnderflow(f"{what} length at byte {pos} runs past the message end {end}")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > end - pos:
        raise RecordsBadLength(f"{what} length {n} at byte {pos - 4} exceeds the {end - pos} bytes left")
    return buf[pos:pos + n], pos + n


def decode_message(
    buf: bytes, pos: int, *, budget: Budget, depth: int = 1, max_depth: int = 2,
    check_crc: bool = True, strict: bool = True,
) -> LegacyMessage:
    """Decode the whole entry at ``pos``; the caller has checked it fits in ``buf``."""
    offset, size, crc, magic, attrs = _HEAD.unpack_from(buf, pos)
    end = pos + 12 + size
    p = pos + 18
    ts: int | None = None
    if magic == 1:
        (ts,) = _I64.unpack_from(buf, p)
        p += 8
    key, p = _bytes_field(buf, p, end, "key")
    value, p = _bytes_field(buf, p, end, "value")
    if p != end:
        raise RecordsBadLength(f"message at byte {pos}: size {size} leaves {end - p} unread bytes")
    crc_valid = (zlib.crc32(memoryview(buf)[pos + 16:end]) == crc) if check_crc else None
    codec = attrs & 7
    msg = LegacyMessage(
        pos, offset, offset, size, crc, crc_valid, magic, attrs, codec_name(codec),
        _TS_TYPES[(attrs >> 3) & 1] if magic == 1 else None, ts, ts, key, value,
    )
    if codec == 0:
        return msg
    if depth >= max_depth:
        # Kafka nests once; anything deeper is reported, not followed.
        msg.error = f"compressed message at nesting depth {depth} (max {max_depth}): not decoded"
        return msg
    if value is None:
        msg.error = "compressed wrapper with a null value"
        if strict:
            raise RecordsError(f"message at byte {pos}: {msg.error}")
        return msg
    inner: list[LegacyMessage] = []
    msg.inner = inner
    try:
        data = budget.decompress(codec, value)
        decode_message_set(data, inner, budget=budget, depth=depth + 1, max_depth=max_depth,
                           check_crc=check_crc, strict=strict)
    except RecordsError as e:
        if strict:
            raise type(e)(f"wrapper at byte {pos} (offset {offset}): {e}") from e
        msg.error = f"{type(e).__name__}: {e}"
    if inner and magic >= 1:
        lost = _shift(inner, offset - inner[-1].wire_offset)
        if lost:
            msg.out_of_range = (f"out of range: wrapper at byte {pos}: {lost} inner offset(s) (relative offsets "
                                f"shifted to the wrapper's {offset}) beyond int64: null")
        if attrs & 8:
            for m in inner:
                m.timestamp = ts
    return msg


def decode_message_set(
    buf: bytes, out: list[LegacyMessage], *, budget: Budget, depth: int, max_depth: int,
    check_crc: bool, strict: bool,
) -> None:
    """Append every message of an inner (complete) message set to ``out``."""
    pos = 0
    n = len(buf)
    while pos < n:
        if n - pos < 18:
            raise RecordsUnderflow(f"inner message at byte {pos}: {n - pos} bytes, header needs 18")
        size = _I32.unpack_from(buf, pos + 8)[0]
        magic = buf[pos + 16]
        if magic not in (0, 1):
            raise RecordsError(f"inner message at byte {pos}: magic {magic} inside a message set")
        if size < LEGACY_MIN_SIZE[magic]:
            raise RecordsBadLength(f"inner message at byte {pos}: size {size} below the minimum")
        if size > n - pos - 12:
            raise RecordsUnderflow(f"inner message at byte {pos}: size {size} exceeds the {n - pos - 12} bytes left")
        out.append(decode_message(buf, pos, budget=budget, depth=depth, max_depth=max_depth,
                                  check_crc=check_crc, strict=strict))
        pos += 12 + size


def count_wrapper(value: bytes, codec: int, magic: int, wrapper_offset: int, budget: Budget) -> tuple[int, int, int]:
    """(inner message count, first offset, last offset) of a compressed wrapper's inner set.

    The summary path calls this: no header of the legacy format carries the
    inner count, so the wrapper has to be opened. Decompression is bounded by
    ``budget`` (the decompression cap), and legacy traffic (pre-0.11 clients)
    is rare today, so paying it in the summary is acceptable; only entry
    headers of the inner set are walked, nothing is decoded or kept.

    Offsets follow :func:`decode_message`: under a magic 1 wrapper the inner
    offsets are relative and the wrapper's offset is that of the last inner
    message. A producer's request may carry a wrapper offset smaller than the
    last relative offset (kafka-python writes 0); no broker-assigned offset can
    be, so then the relative offsets themselves are given, as for a v2 batch in
    a Produce request. Raises :class:`RecordsError` when the set cannot be read.
    """
    data = budget.decompress(codec, value)
    pos = 0
    n = len(data)
    count = 0
    first = last = 0
    while pos < n:
        if n - pos < 18:
            raise RecordsUnderflow(f"inner message at byte {pos}: {n - pos} bytes, header needs 18")
        offset, size, _, inner_magic, attrs = _HEAD.unpack_from(data, pos)
        if inner_magic not in (0, 1):
            raise RecordsError(f"inner message at byte {pos}: magic {inner_magic} inside a message set")
        if size < LEGACY_MIN_SIZE[inner_magic] or size > n - pos - 12:
            raise RecordsBadLength(f"inner message at byte {pos}: size {size} does not fit")
        if attrs & 7:
            raise RecordsError(f"inner message at byte {pos} is itself compressed (Kafka nests once)")
        if not count:
            first = offset
        last = offset
        count += 1
        pos += 12 + size
    if not count:
        raise RecordsError("compressed wrapper holds no message")
    if magic >= 1:
        delta = wrapper_offset - last
        if first + delta < 0:
            delta = 0
        first += delta
        last += delta
    return count, first, last
