"""A records field decoded whole: :func:`decode_records` and the objects it returns.

Every batch, record, header and control record, with bounded decompression
(see :mod:`dissector.records` for the field and its summary, which reads headers
only). Legacy messages (magic 0/1) are decoded by :mod:`dissector.legacy`.
Malformed data raises :class:`~dissector.errors.RecordsError` (``strict=True``)
or leaves the error in the result (``strict=False``).

Bytes stay ``bytes`` in the objects; ``to_dict(bytes_mode)`` renders them with
:func:`dissector.codecs.render_bytes` (default ``auto``: printable UTF-8 as
text, otherwise ``"base64:..."``).

Compiled (``recordset.pxd``), the objects are extension types, built per batch
and record with ``--records``, and the record loop's positions, lengths and
deltas are C integers: :func:`_varint` returns a C pair, not a tuple.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dissector.batchheader import MIN_RECORD, V2_HEADER, BatchHeader, entry_end
from dissector.codecs import DEFAULT_MAX_DECOMPRESSED, Budget, BytesMode, codec_name, render_bytes
from dissector.errors import (
    RecordsBadLength,
    RecordsBadVarint,
    RecordsError,
    RecordsUnderflow,
)
from dissector.ints import I64_MAX, I64_MIN, OUT_OF_RANGE
from dissector.legacy import LegacyMessage, decode_message

__all__ = ["ControlRecord", "Record", "RecordBatch", "RecordSet", "decode_records", "CONTROL_TYPES"]

# A base within this of int64's ends can leave it with an int32 delta (an offset delta, a last
# offset delta); anything else cannot, and needs no check per record.
_NEAR_MIN = I64_MIN + (1 << 31)
_NEAR_MAX = I64_MAX - (1 << 31)
_U32, _U64 = (1 << 32) - 1, (1 << 64) - 1   # Java's int and long arithmetic, on a varint's bits
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_TS_TYPES = ("create_time", "log_append_time")

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
    header = BatchHeader.__new__(BatchHeader)
    pos = 0
    while pos < n:
        try:
            end = entry_end(buf, pos, n)
            if end < 0:
                out.partial_tail, out.tail_bytes = True, n - pos
                break
            if buf[pos + 16] == 2:
                header.read(buf, pos)
                out.batches.append(_decode_batch(buf, pos, end, header, budget, check_crc, strict))
            else:
                out.batches.append(decode_message(buf, pos, budget=budget, depth=1, max_depth=max_depth,
                                                  check_crc=check_crc, strict=strict))
        except RecordsError as e:
            if strict:
                raise
            out.error, out.error_offset = f"{type(e).__name__}: {e}", pos
            break
        pos = end
    return out


def _decode_batch(buf: bytes, pos: int, end: int, h: BatchHeader, budget: Budget, check_crc: bool,
                  strict: bool) -> RecordBatch:
    attrs = h.attributes
    count = h.record_count
    c = attrs & 7
    batch = RecordBatch(
        pos, h.base_offset, h.batch_length, h.partition_leader_epoch, 2, h.crc,
        h.crc_matches(buf, pos) if check_crc else None,
        attrs, codec_name(c), _TS_TYPES[(attrs >> 3) & 1],
        bool(attrs & 0x10), bool(attrs & 0x20), bool(attrs & 0x40),
        h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
        h.base_sequence, count,
    )
    try:
        if count < 0:
            raise RecordsBadLength(f"negative record count {count}")
        if c == 0:
            _parse_records(buf, pos + V2_HEADER, end, batch)
        else:
            data = budget.decompress(c, buf[pos + V2_HEADER:end])
            if type(data) is not bytes:
                data = bytes(data)
            batch.decompressed_size = len(data)
            _parse_records(data, 0, len(data), batch)
    except RecordsError as e:
        where = f"batch at byte {pos} (base offset {batch.base_offset})"
        if c:
            where += f", {codec_name(c)}-decompressed records"
        if strict:
            raise type(e)(f"{where}: {e}") from e
        batch.error = f"{type(e).__name__}: {where}: {e}"
    return batch


def _varint(buf: bytes, pos: int, width: int) -> tuple[int, int]:
    """(zigzag varint (width 5) or varlong (width 10) at ``pos``, the position after it).

    Reading past ``buf`` raises IndexError, which the caller turns into RecordsUnderflow."""
    b = buf[pos]
    if b < 0x80:        # one byte: nearly every length and delta of small records
        return (b >> 1) ^ -(b & 1), pos + 1
    return _long_varint(buf, pos, width)


def _long_varint(buf: bytes, pos: int, width: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for i in range(pos, pos + width):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= _U32 if width == 5 else _U64
            return (result >> 1) ^ -(result & 1), i + 1
        shift += 7
    raise RecordsBadVarint(f"varint at byte {pos} longer than {width} bytes")


def _parse_records(buf: bytes, pos: int, end: int, batch: RecordBatch) -> None:
    """Decode ``batch.record_count`` records from buf[pos:end] into ``batch.records``.

    A read past the buffer raises IndexError, turned into RecordsUnderflow.
    Every length is checked against the record's own end before slicing.
    """
    count = batch.record_count
    if count > (end - pos) // MIN_RECORD:
        raise RecordsBadLength(f"record count {count} impossible for {end - pos} bytes of records")
    records = batch.records
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    lat_ts = batch.max_timestamp if batch.timestamp_type == "log_append_time" else None
    control = batch.control
    rec_start = pos
    # Offset deltas are int32: only a base near int64's ends can be pushed past them. Timestamp
    # deltas are int64 varlongs: any base can, so each sum is checked (two comparisons).
    near_end = not _NEAR_MIN < base_offset < _NEAR_MAX
    lost = 0
    try:
        for _ in range(count):
            rec_start = pos
            length, pos = _varint(buf, pos, 5)
            if length < 6 or length > end - pos:
                raise RecordsBadLength(f"record length {length} with {end - pos} bytes left")
            rec_end = pos + length
            attrs = buf[pos]
            ts_delta, pos = _varint(buf, pos + 1, 10)
            off_delta, pos = _varint(buf, pos, 5)
            n, pos = _varint(buf, pos, 5)
            if n < 0:
                if n != -1:
                    raise RecordsBadLength(f"key length {n}")
                key = None
            else:
                if n > rec_end - pos:
                    raise RecordsBadLength(f"key length {n} exceeds the {rec_end - pos} bytes left in the record")
                key = buf[pos:pos + n]
                pos += n
            n, pos = _varint(buf, pos, 5)
            if n < 0:
                if n != -1:
                    raise RecordsBadLength(f"value length {n}")
                value = None
            else:
                if n > rec_end - pos:
                    raise RecordsBadLength(f"value length {n} exceeds the {rec_end - pos} bytes left in the record")
                value = buf[pos:pos + n]
                pos += n
            n, pos = _varint(buf, pos, 5)
            headers: list[tuple[str, bytes | None]] = []
            if n:
                if n < 0 or n > (rec_end - pos) // 2:
                    raise RecordsBadLength(f"header count {n} with {rec_end - pos} bytes left in the record")
                for _h in range(n):
                    hk, pos = _varint(buf, pos, 5)
                    if hk < 0 or hk > rec_end - pos:
                        raise RecordsBadLength(f"header key length {hk}")
                    hkey = buf[pos:pos + hk].decode("utf-8", "replace")  # as Java's String decoding
                    pos += hk
                    hv, pos = _varint(buf, pos, 5)
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
            records.append(rec)
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
