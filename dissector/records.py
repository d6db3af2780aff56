"""Kafka record data: the bytes of a ``records`` field.

Two entry points:

* :func:`summarize` - headers only, never decompresses, never raises. Called
  for every records field.
* :func:`decode_records` - every batch, record, header and control record, with
  bounded decompression; raises :class:`~dissector.errors.RecordsError`
  (``strict=True``) or keeps errors in the result (``strict=False``).

A records field may hold v2 record batches and legacy messages (magic 0/1,
see :mod:`dissector.legacy`) in any order: both start with ``int64 offset,
int32 length`` and keep the magic byte at offset 16. A trailing entry cut short
is normal at the end of a Fetch response (the broker fills up to max.bytes),
so it is reported as ``partial_tail``, never as an error.

Bytes stay ``bytes`` in the objects; ``to_dict(bytes_mode)`` renders them with
:func:`dissector.codecs.render_bytes` (default ``auto``: printable UTF-8 as
text, otherwise ``"base64:..."``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hotpath import inheritable
from hotpath.crc import crc32c
from hotpath.speedups import crc32c_of, summary_json

from dissector.codecs import CODEC_NAMES, Budget, BytesMode, codec_name, render_bytes
from dissector.errors import (
    RecordsBadLength,
    RecordsBadVarint,
    RecordsError,
    RecordsUnderflow,
)
from dissector.ints import be_int, be_uint
from dissector.legacy import LEGACY_MIN_SIZE, LegacyMessage, count_wrapper, decode_message

__all__ = [
    "ControlRecord",
    "Record",
    "RecordBatch",
    "RecordSet",
    "RecordsSummary",
    "decode_records",
    "summarize",
    "LegacyMessage",
    "DEFAULT_MAX_DECOMPRESSED",
    "OUT_OF_RANGE",
]

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

# Offsets and timestamps are int64 on the wire and in the dataset, but some are sums of wire values
# (base offset + delta, base timestamp + delta) that a hostile or broken peer can push past int64.
# Such a sum is None, and a note starting with OUT_OF_RANGE says so (``out_of_range`` anomalies).
OUT_OF_RANGE = "out of range"
I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
# A base within this of int64's ends can leave it with an int32 delta (an offset delta, a last
# offset delta); anything else cannot, and needs no check per record.
_NEAR_MIN = I64_MIN + (1 << 31)
_NEAR_MAX = I64_MAX - (1 << 31)
_I64_TOP, _I64_BOTTOM = I64_MAX, I64_MIN      # as C integers when compiled (records.pxd)

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount
_V2 = struct.Struct(">qiibIhiqqqhii")
_V2_HEADER = 61
_V2_MIN_LENGTH = _V2_HEADER - 12   # batchLength of a batch with no record bytes
_V2_CRC_FROM = 21                  # CRC-32C covers attributes..end
_PREFIX = struct.Struct(">qi")     # offset + length/size: common to every magic
_LEGACY_SUMMARY = struct.Struct(">Ibb")   # crc, magic, attributes at +12
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_MIN_RECORD = 7  # length, attributes, ts delta, offset delta, key len, value len, header count
_TS_TYPES = ("create_time", "log_append_time")
_MAGIC_SETS = tuple(tuple(m for m in (0, 1, 2) if mask >> m & 1) for mask in range(8))

CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",      # types 2+ are KRaft metadata; their values are opaque here
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


# --------------------------------------------------------------------------
# Objects

@dataclass
class ControlRecord:
    version: int
    type: int
    type_name: str                   # ABORT, COMMIT, ... or UNKNOWN
    value_version: int | None = None  # ABORT/COMMIT value: version + coordinator epoch
    coordinator_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "type": self.type, "type_name": self.type_name,
                "value_version": self.value_version, "coordinator_epoch": self.coordinator_epoch}


@dataclass
class Record:
    offset: int                      # base offset + offset delta
    timestamp: int                   # base timestamp + delta, or the batch max timestamp under LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    offset_delta: int
    timestamp_delta: int
    attributes: int
    length: int                      # the record's length varint (bytes after it)
    control: ControlRecord | None = None

    def to_dict(self, bytes_mode: BytesMode = "auto") -> dict[str, Any]:
        return {
            "offset": self.offset,
            "timestamp": self.timestamp,
            "key": render_bytes(self.key, bytes_mode),
            "value": render_bytes(self.value, bytes_mode),
            "headers": [{"key": k, "value": render_bytes(v, bytes_mode)} for k, v in self.headers],
            "offset_delta": self.offset_delta,
            "timestamp_delta": self.timestamp_delta,
            "attributes": self.attributes,
            "length": self.length,
            "control": None if self.control is None else self.control.to_dict(),
        }


@dataclass
class RecordBatch:
    position: int                    # byte offset of the batch in the records field
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    crc_valid: bool | None           # None when CRC checking was off
    attributes: int
    codec: str
    timestamp_type: str              # create_time | log_append_time
    transactional: bool
    control: bool
    delete_horizon: bool             # base_timestamp is the compaction delete horizon
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int                # as declared in the header
    records: list[Record] = None  # type: ignore[assignment]   # None given is a fresh [] (see RecordsSummary)
    decompressed_size: int | None = None  # None when uncompressed
    error: str | None = None         # only with strict=False: why records are missing
    out_of_range: str | None = None  # records whose offset or timestamp left int64 (None there): see OUT_OF_RANGE

    def __post_init__(self) -> None:
        if self.records is None:
            self.records = []

    @property
    def last_offset(self) -> int | None:
        last = self.base_offset + self.last_offset_delta
        return last if I64_MIN <= last <= I64_MAX else None

    @property
    def size(self) -> int:
        return self.batch_length + 12

    def leaves(self) -> Iterator[Record]:
        return iter(self.records)

    def to_dict(self, bytes_mode: BytesMode = "auto") -> dict[str, Any]:
        return {
            "kind": "batch",
            "position": self.position,
            "base_offset": self.base_offset,
            "last_offset": self.last_offset,
            "batch_length": self.batch_length,
            "partition_leader_epoch": self.partition_leader_epoch,
            "magic": self.magic,
            "crc": self.crc,
            "crc_valid": self.crc_valid,
            "attributes": self.attributes,
            "codec": self.codec,
            "timestamp_type": self.timestamp_type,
            "transactional": self.transactional,
            "control": self.control,
            "delete_horizon": self.delete_horizon,
            "last_offset_delta": self.last_offset_delta,
            "base_timestamp": self.base_timestamp,
            "max_timestamp": self.max_timestamp,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
            "record_count": self.record_count,
            "decompressed_size": self.decompressed_size,
            "error": self.error,
            "out_of_range": self.out_of_range,
            "records": [r.to_dict(bytes_mode) for r in self.records],
        }


@dataclass
class RecordSet:
    """What :func:`decode_records` returns; iterates over its batches like a list."""

    batches: list[RecordBatch | LegacyMessage]  # top-level entries in wire order
    total_bytes: int
    partial_tail: bool = False       # the last entry was cut short (normal for Fetch)
    tail_bytes: int = 0              # bytes of that cut entry, not decoded
    error: str | None = None         # only with strict=False: why decoding stopped
    error_offset: int | None = None  # byte offset of the entry that failed

    def __iter__(self) -> Iterator[RecordBatch | LegacyMessage]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> RecordBatch | LegacyMessage:
        return self.batches[i]

    def records(self) -> Iterator[Record | LegacyMessage]:
        """Leaf records in order: v2 records, legacy messages, inner messages of wrappers.

        Both kinds have ``offset``, ``timestamp``, ``key``, ``value``, ``headers``.
        """
        for b in self.batches:
            yield from b.leaves()

    def to_dict(self, bytes_mode: BytesMode = "auto") -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "partial_tail": self.partial_tail,
            "tail_bytes": self.tail_bytes,
            "error": self.error,
            "error_offset": self.error_offset,
            "batches": [b.to_dict(bytes_mode) for b in self.batches],
        }


@dataclass
class RecordsSummary:
    """Header-level facts about a records field (see :func:`summarize`)."""

    total_bytes: int = 0
    magics: tuple[int, ...] = ()     # distinct magic values, sorted
    batch_count: int = 0             # complete top-level entries (v2 batches + legacy messages)
    record_count: int | None = 0     # None when a compressed legacy wrapper could not be opened
    legacy_wrappers: int = 0         # compressed legacy messages (opened to count their inner messages)
    first_offset: int | None = None  # base offset of the first entry (a legacy wrapper's: its first inner one)
    last_offset: int | None = None   # last offset of the last complete entry
    first_timestamp: int | None = None  # base timestamp of the first batch / first v1 message
    max_timestamp: int | None = None
    codec: str | None = None         # none/gzip/snappy/lz4/zstd, or "mixed"
    producer_id: int | None = None   # of the first v2 batch
    producer_epoch: int | None = None
    base_sequence: int | None = None
    transactional: bool = False      # any batch
    control: bool = False            # any control batch
    crc_checked: bool = False
    # Byte positions of entries whose CRC failed. None given is a fresh [] (__post_init__): compiled,
    # a default_factory made every construction import the dataclasses module, ~2,500 instructions.
    crc_failures: list[int] = None  # type: ignore[assignment]
    partial_tail: bool = False
    tail_bytes: int = 0
    error: str | None = None
    error_offset: int | None = None
    first_crc: int | None = None     # the first entry's CRC as sent: with the counts, what identifies a re-sent batch
    # The summarized bytes themselves (a reference, not a copy, for bytes input),
    # so a later full decode needs no second pass over the frame; not in to_dict.
    data: bytes | None = field(default=None, repr=False, compare=False)
    # An offset computed from the wire that left int64 (and is None here); not in to_dict: an anomaly says it.
    out_of_range: str | None = None

    def __post_init__(self) -> None:
        if self.crc_failures is None:
            self.crc_failures = []

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "magics": list(self.magics),
            "batch_count": self.batch_count,
            "record_count": self.record_count,
            "legacy_wrappers": self.legacy_wrappers,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "first_timestamp": self.first_timestamp,
            "max_timestamp": self.max_timestamp,
            "codec": self.codec,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
            "transactional": self.transactional,
            "control": self.control,
            "crc_checked": self.crc_checked,
            "crc_failures": list(self.crc_failures),
            "first_crc": self.first_crc,
            "partial_tail": self.partial_tail,
            "tail_bytes": self.tail_bytes,
            "error": self.error,
            "error_offset": self.error_offset,
        }

    def json_bytes(self) -> bytes | None:
        """:meth:`to_dict` as compact JSON, as orjson writes it, or None: then the caller serializes
        the dict (``hotpath.speedups.summary_json``: compiled, a C writer that declines values it
        would not write the same way, such as escaped text or an int past 64 bits)."""
        return summary_json((
            self.total_bytes, self.magics, self.batch_count, self.record_count, self.legacy_wrappers,
            self.first_offset, self.last_offset, self.first_timestamp, self.max_timestamp, self.codec,
            self.producer_id, self.producer_epoch, self.base_sequence, self.transactional, self.control,
            self.crc_checked, self.crc_failures, self.first_crc, self.partial_tail, self.tail_bytes,
            self.error, self.error_offset))


inheritable(RecordsSummary)     # dissector.v07.messages.MessageSetSummary


# --------------------------------------------------------------------------
# Fast path

def summarize(data: bytes | bytearray | memoryview | None, *, check_crc: bool = True,
              max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> RecordsSummary:
    """Walk entry headers only; never raises.

    v2 batches are not decompressed (their header has the count). Legacy
    compressed wrappers are opened, within ``max_decompressed`` for the whole
    call, because nothing else tells how many messages they hold (see
    :func:`dissector.legacy.count_wrapper`).
    """
    try:
        return _summarize(data, check_crc, max_decompressed)
    except Exception as e:  # noqa: BLE001 - the contract is "never raise"
        n = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else 0
        return RecordsSummary(total_bytes=n, error=f"internal error: {e!r}", error_offset=0,
                              data=data if isinstance(data, bytes) else None)


def _summarize(data: bytes | bytearray | memoryview | None, check_crc: bool, max_decompressed: int) -> RecordsSummary:
    if data is None:
        return RecordsSummary()
    if type(data) is not bytes:
        data = bytes(data)      # the summary keeps bytes in any case; compiled, reads need bytes
    b = data
    n = len(b)
    pos = 0
    magic_mask = 0
    batches = 0
    records = 0
    wrappers = 0
    unopened = 0
    budget: Budget | None = None
    first_offset = last_offset = first_ts = max_ts = None
    codec = -1
    pid = pepoch = bseq = first_crc = None
    transactional = control = False
    failures: list[int] = []
    partial = False
    err: str | None = None
    out_of_range: str | None = None
    while pos < n:
        if n - pos < 17:
            partial = True
            break
        offset = be_int(b, pos, 8)
        length = be_int(b, pos + 8, 4)
        magic = b[pos + 16]
        end = pos + 12 + length
        if magic == 2:
            if length < _V2_MIN_LENGTH:
                err = f"batch at byte {pos}: batch length {length} below the minimum {_V2_MIN_LENGTH}"
                break
            if end > n:
                partial = True
                break
            # The v2 header's fields (see _V2); the producer's three matter for the first batch only.
            crc = be_uint(b, pos + 17, 4)
            attrs = be_int(b, pos + 21, 2)
            lod = be_int(b, pos + 23, 4)
            base_ts = be_int(b, pos + 27, 8)
            max_t = be_int(b, pos + 35, 8)
            count = be_int(b, pos + 57, 4)
            c = attrs & 7
            if count < 0 or (c == 0 and count > (length - _V2_MIN_LENGTH) // _MIN_RECORD):
                err = f"batch at byte {pos}: record count {count} impossible for {length - _V2_MIN_LENGTH} bytes"
                break
            if check_crc and crc32c_of(b, pos + _V2_CRC_FROM, end) != crc:
                failures.append(pos)
            if batches == 0:
                first_offset = offset
                first_ts = base_ts
                pid, pepoch, bseq = be_int(b, pos + 43, 8), be_int(b, pos + 51, 2), be_int(b, pos + 53, 4)
                codec = c
                first_crc = crc
            elif codec != c:
                codec = 8
            if max_ts is None or max_t > max_ts:
                max_ts = max_t
            # Compiled, C integers (records.pxd): the sum is checked before it is made, as C's would wrap.
            if (lod > 0 and offset > _I64_TOP - lod) or (lod < 0 and offset < _I64_BOTTOM - lod):
                last_offset = None
                out_of_range = (f"{OUT_OF_RANGE}: batch at byte {pos}: last offset (base offset {offset} + last "
                                f"offset delta {lod}) beyond int64: null")
            else:
                last_offset = offset + lod
            records += count
            if attrs & 0x10:
                transactional = True
            if attrs & 0x20:
                control = True
        elif magic == 0 or magic == 1:
            if length < LEGACY_MIN_SIZE[magic]:
                err = f"message at byte {pos}: size {length} below the minimum {LEGACY_MIN_SIZE[magic]}"
                break
            if end > n:
                partial = True
                break
            crc, _, attrs = _LEGACY_SUMMARY.unpack_from(data, pos + 12)
            c = attrs & 7
            if check_crc and zlib.crc32(memoryview(b)[pos + 16:end]) != crc:
                failures.append(pos)
            ts = _I64.unpack_from(data, pos + 18)[0] if magic == 1 else None
            first, last = offset, offset
            if c:
                wrappers += 1
                if budget is None:
                    budget = Budget(max_decompressed)
                try:
                    count, first, last = _open_wrapper(data, pos, end, magic, c, offset, budget)
                    records += count
                except RecordsError:
                    unopened += 1
                if _in_int64(first) is None or _in_int64(last) is None:
                    out_of_range = (f"{OUT_OF_RANGE}: wrapper at byte {pos}: inner offsets (relative offsets shifted "
                                    f"to the wrapper's {offset}) beyond int64: null")
                    first = _in_int64(first)
                    last = _in_int64(last)
            else:
                records += 1
            if batches == 0:
                first_offset = first
                first_ts = ts
                codec = c
                first_crc = crc
            elif codec != c:
                codec = 8
            if ts is not None and (max_ts is None or ts > max_ts):
                max_ts = ts
            last_offset = last
        else:
            err = f"entry at byte {pos}: unknown magic {magic}"
            break
        magic_mask |= 1 << magic
        batches += 1
        pos = end
    # Made without its __init__ and filled field by field: compiled, these are stores into the
    # object's C struct, where the dataclass call parsed 23 arguments (~1,000 instructions).
    s = RecordsSummary.__new__(RecordsSummary)
    s.total_bytes = n
    s.magics = _MAGIC_SETS[magic_mask]
    s.batch_count = batches
    s.record_count = None if unopened else records
    s.legacy_wrappers = wrappers
    s.first_offset = first_offset
    s.last_offset = last_offset
    s.first_timestamp = first_ts
    s.max_timestamp = max_ts
    if codec < 0:
        s.codec = None
    else:
        s.codec = CODEC_NAMES[codec] if codec < 5 else "mixed" if codec == 8 else codec_name(codec)
    s.producer_id = pid
    s.producer_epoch = pepoch
    s.base_sequence = bseq
    s.transactional = transactional
    s.control = control
    s.crc_checked = check_crc
    s.crc_failures = failures
    s.partial_tail = partial
    s.tail_bytes = n - pos if partial else 0
    s.error = err
    s.error_offset = pos if err else None
    s.first_crc = first_crc
    s.data = b
    s.out_of_range = out_of_range
    return s


def _in_int64(value: int | None) -> int | None:
    """``value`` if int64 holds it, else None."""
    return value if value is not None and I64_MIN <= value <= I64_MAX else None


def _open_wrapper(data: bytes | bytearray | memoryview, pos: int, end: int, magic: int, codec: int, offset: int,
                  budget: Budget) -> tuple[int, int, int]:
    """Count the inner messages of the legacy wrapper at ``pos`` (see :func:`count_wrapper`)."""
    p = pos + 18 + (8 if magic == 1 else 0)
    (klen,) = _I32.unpack_from(data, p)
    p += 4 + max(klen, 0)
    if klen < -1 or p + 4 > end:
        raise RecordsBadLength(f"wrapper at byte {pos}: key length {klen} does not fit")
    (vlen,) = _I32.unpack_from(data, p)
    p += 4
    if vlen < 0 or p + vlen != end:
        raise RecordsBadLength(f"wrapper at byte {pos}: value length {vlen} does not fit")
    return count_wrapper(bytes(data[p:end]), codec, magic, offset, budget)


# --------------------------------------------------------------------------
# Full decode

def decode_records(
    data: bytes | bytearray | memoryview | None,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    max_depth: int = 2,
    check_crc: bool = True,
    strict: bool = True,
) -> RecordSet:
    """Decode every batch / message of a records field.

    ``max_decompressed`` caps the decompressed bytes of the whole call (all
    batches together). ``max_depth`` bounds legacy wrapper nesting (1 = top
    level; Kafka's own is 2); deeper wrappers are left undecoded with
    ``error`` set. With ``strict=True`` malformed data raises a
    :class:`RecordsError` subclass (CRC mismatches never raise: see
    ``crc_valid``); with ``strict=False`` the error is kept on the v2 batch or
    legacy wrapper (framing intact: decoding goes on with the next entry) or
    on the result (framing lost, or a top-level legacy message's own fields
    are bad: decoding stops), and what decoded before stays.
    """
    buf = b"" if data is None else (data if isinstance(data, bytes) else bytes(data))
    n = len(buf)
    out = RecordSet([], n)
    budget = Budget(max_decompressed)
    pos = 0
    while pos < n:
        try:
            if n - pos < 17:
                out.partial_tail, out.tail_bytes = True, n - pos
                break
            length = _PREFIX.unpack_from(buf, pos)[1]
            magic = buf[pos + 16]
            end = pos + 12 + length
            if magic == 2:
                if length < _V2_MIN_LENGTH:
                    raise RecordsBadLength(
                        f"batch at byte {pos}: batch length {length} below the minimum {_V2_MIN_LENGTH}")
                if end > n:
                    out.partial_tail, out.tail_bytes = True, n - pos
                    break
                out.batches.append(_decode_batch(buf, pos, end, budget, check_crc, strict))
            elif magic == 0 or magic == 1:
                if length < LEGACY_MIN_SIZE[magic]:
                    raise RecordsBadLength(
                        f"message at byte {pos}: size {length} below the minimum {LEGACY_MIN_SIZE[magic]}")
                if end > n:
                    out.partial_tail, out.tail_bytes = True, n - pos
                    break
                out.batches.append(decode_message(buf, pos, budget=budget, depth=1, max_depth=max_depth,
                                                  check_crc=check_crc, strict=strict))
            else:
                raise RecordsError(f"entry at byte {pos}: unknown magic {magic}")
        except RecordsError as e:
            if strict:
                raise
            out.error, out.error_offset = f"{type(e).__name__}: {e}", pos
            break
        pos = end
    return out


def _decode_batch(buf: bytes, pos: int, end: int, budget: Budget, check_crc: bool, strict: bool) -> RecordBatch:
    (base_offset, length, epoch, magic, crc, attrs, lod, base_ts, max_ts,
     pid, pepoch, bseq, count) = _V2.unpack_from(buf, pos)
    c = attrs & 7
    batch = RecordBatch(
        pos, base_offset, length, epoch, magic, crc,
        (crc32c(memoryview(buf)[pos + _V2_CRC_FROM:end]) == crc) if check_crc else None,
        attrs, codec_name(c), _TS_TYPES[(attrs >> 3) & 1],
        bool(attrs & 0x10), bool(attrs & 0x20), bool(attrs & 0x40),
        lod, base_ts, max_ts, pid, pepoch, bseq, count,
    )
    try:
        if count < 0:
            raise RecordsBadLength(f"negative record count {count}")
        if c == 0:
            _parse_records(buf, pos + _V2_HEADER, end, batch)
        else:
            data = budget.decompress(c, buf[pos + _V2_HEADER:end])
            batch.decompressed_size = len(data)
            _parse_records(data, 0, len(data), batch)
    except RecordsError as e:
        where = f"batch at byte {pos} (base offset {base_offset})"
        if c:
            where += f", {codec_name(c)}-decompressed records"
        if strict:
            raise type(e)(f"{where}: {e}") from e
        batch.error = f"{type(e).__name__}: {where}: {e}"
    return batch


def _varint(buf: bytes, pos: int, width: int) -> tuple[int, int]:
    """Zigzag varint (width 5) / varlong (width 10) at ``pos``; the caller catches IndexError."""
    result = 0
    shift = 0
    for i in range(pos, pos + width):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            # Truncate like Java's int/long arithmetic does.
            result &= 0xFFFFFFFF if width == 5 else 0xFFFFFFFFFFFFFFFF
            return (result >> 1) ^ -(result & 1), i + 1
        shift += 7
    raise RecordsBadVarint(f"varint at byte {pos} longer than {width} bytes")


def _parse_records(buf: bytes, pos: int, end: int, batch: RecordBatch) -> None:
    """Decode ``batch.record_count`` records from buf[pos:end] into ``batch.records``.

    Single-byte varints (the common case) are inlined; a read past the buffer
    raises IndexError, turned into RecordsUnderflow. Every length is checked
    against the record's own end before slicing.
    """
    count = batch.record_count
    if count > (end - pos) // _MIN_RECORD:
        raise RecordsBadLength(f"record count {count} impossible for {end - pos} bytes of records")
    records = batch.records
    append = records.append
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    lat_ts = batch.max_timestamp if batch.timestamp_type == "log_append_time" else None
    control = batch.control
    varint = _varint
    rec_start = pos
    # Offset deltas are int32: only a base near int64's ends can be pushed past them. Timestamp
    # deltas are int64 varlongs: any base can, so each sum is checked (two comparisons).
    near_end = not _NEAR_MIN < base_offset < _NEAR_MAX
    lost = 0
    try:
        for _ in range(count):
            rec_start = pos
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = varint(buf, pos, 5)
            if length < 6 or length > end - pos:
                raise RecordsBadLength(f"record length {length} with {end - pos} bytes left")
            rec_end = pos + length
            attrs = buf[pos]
            b = buf[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                ts_delta, pos = varint(buf, pos + 1, 10)
            b = buf[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = varint(buf, pos, 5)
            # key
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = varint(buf, pos, 5)
            if n < 0:
                if n != -1:
                    raise RecordsBadLength(f"key length {n}")
                key = None
            else:
                if n > rec_end - pos:
                    raise RecordsBadLength(f"key length {n} exceeds the {rec_end - pos} bytes left in the record")
                key = buf[pos:pos + n]
                pos += n
            # value
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = varint(buf, pos, 5)
            if n < 0:
                if n != -1:
                    raise RecordsBadLength(f"value length {n}")
                value = None
            else:
                if n > rec_end - pos:
                    raise RecordsBadLength(f"value length {n} exceeds the {rec_end - pos} bytes left in the record")
                value = buf[pos:pos + n]
                pos += n
            # headers
            b = buf[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                n, pos = varint(buf, pos, 5)
            headers: list[tuple[str, bytes | None]] = []
            if n:
                if n < 0 or n > (rec_end - pos) // 2:
                    raise RecordsBadLength(f"header count {n} with {rec_end - pos} bytes left in the record")
                for _h in range(n):
                    b = buf[pos]
                    if b < 0x80:
                        hk = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        hk, pos = varint(buf, pos, 5)
                    if hk < 0 or hk > rec_end - pos:
                        raise RecordsBadLength(f"header key length {hk}")
                    hkey = buf[pos:pos + hk].decode("utf-8", "replace")  # as Java's String decoding
                    pos += hk
                    b = buf[pos]
                    if b < 0x80:
                        hv = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        hv, pos = varint(buf, pos, 5)
                    if hv < 0:
                        if hv != -1:
                            raise RecordsBadLength(f"header value length {hv}")
                        headers.append((hkey, None))
                    else:
                        if hv > rec_end - pos:
                            raise RecordsBadLength(f"header value length {hv} exceeds the {rec_end - pos} bytes left")
                        headers.append((hkey, buf[pos:pos + hv]))
                        pos += hv
            if pos != rec_end:
                raise RecordsBadLength(f"record length {length} but its fields take {pos - rec_end + length}")
            offset = base_offset + off_delta
            if near_end and not I64_MIN <= offset <= I64_MAX:
                offset = None
                lost += 1
            if lat_ts is None:
                t = base_ts + ts_delta
                if not I64_MIN <= t <= I64_MAX:
                    t = None
                    lost += 1
            else:
                t = lat_ts
            rec = Record(offset, t, key, value, headers, off_delta, ts_delta, attrs, length)
            if control:
                rec.control = _control(key, value)
            append(rec)
    except IndexError:
        raise RecordsUnderflow(f"record at byte {rec_start} runs past the end of the records ({end})") from None
    except RecordsError as e:
        raise type(e)(f"record {len(records)} at byte {rec_start}: {e}") from e
    finally:
        if lost:        # said of the records decoded, whether or not the batch then failed
            batch.out_of_range = (f"{OUT_OF_RANGE}: batch at byte {batch.position} (base offset {base_offset}, base "
                                  f"timestamp {base_ts}): {lost} record offset(s) or timestamp(s) beyond int64: null")
    if pos != end:
        raise RecordsBadLength(f"{end - pos} bytes left after the {count} declared records")


def _control(key: bytes | None, value: bytes | None) -> ControlRecord | None:
    if key is None or len(key) < 4:
        return None
    version, ctype = _CONTROL_KEY.unpack_from(key)
    cr = ControlRecord(version, ctype, CONTROL_TYPES.get(ctype, "UNKNOWN"))
    if ctype in (0, 1) and value is not None and len(value) >= 6:
        cr.value_version, cr.coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    return cr
