"""Kafka record data: the bytes of a ``records`` field.

Two entry points:

* :func:`summarize` - headers only, never decompresses, never raises. Called
  for every records field a body decoder meets (``dissector.schema._decoders``):
  a v2 batch's header has its count. A legacy compressed wrapper is opened
  (within a budget) because nothing else tells how many messages it holds.
* :func:`decode_records` - every batch, record, header and control record, with
  bounded decompression (:mod:`dissector.recordset`, whose objects are
  importable from here too).

A records field may hold v2 record batches and legacy messages (magic 0/1,
see :mod:`dissector.legacy`) in any order (:mod:`dissector.batchheader` frames
them). A trailing entry cut short is normal at the end of a Fetch response (the
broker fills up to max.bytes), so it is reported as ``partial_tail``, never as
an error.

Compiled (``records.pxd``), :class:`RecordsSummary` is an extension type and the walk's integers
are C integers: building the summary and writing it back into the body's JSON run in C (issue #8).
A sum of wire values that may leave int64 is checked before it is made, as C's would wrap; the
summary is made without its ``__init__`` and filled field by field, stores into its C struct where
the dataclass call parsed 23 arguments (~1,000 instructions); its ``crc_failures`` defaults to None,
made a fresh [] after init, as a ``default_factory`` made every construction import the dataclasses
module (~2,500 instructions); :meth:`RecordsSummary.json_bytes` is a C writer
(``hotpath.speedups.summary_json``) that declines values it would not write as orjson does, such as
escaped text or an int past 64 bits.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from hotpath import inheritable
from hotpath.speedups import summary_json

from dissector.batchheader import V2_MIN_LENGTH, BatchHeader, entry_end
from dissector.codecs import CODEC_NAMES, DEFAULT_MAX_DECOMPRESSED, Budget, codec_name
from dissector.errors import RecordsBadLength, RecordsError
from dissector.ints import I64_MAX, I64_MIN, OUT_OF_RANGE, be_int
from dissector.legacy import LegacyMessage, count_wrapper
from dissector.recordset import ControlRecord, Record, RecordBatch, RecordSet, decode_records

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

_I64_TOP, _I64_BOTTOM = I64_MAX, I64_MIN
_LEGACY_SUMMARY = struct.Struct(">Ibb")   # crc, magic, attributes at +12
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_MAGIC_SETS = tuple(tuple(m for m in (0, 1, 2) if mask >> m & 1) for mask in range(8))


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
    # Byte positions of entries whose CRC failed; None given is a fresh [] (see the module docstring).
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

    def json_values(self) -> tuple[Any, ...]:
        """:meth:`to_dict`'s values, in its order (``hotpath.speedups.SUMMARY_KEYS``), for the C writers."""
        return (
            self.total_bytes, self.magics, self.batch_count, self.record_count, self.legacy_wrappers,
            self.first_offset, self.last_offset, self.first_timestamp, self.max_timestamp, self.codec,
            self.producer_id, self.producer_epoch, self.base_sequence, self.transactional, self.control,
            self.crc_checked, self.crc_failures, self.first_crc, self.partial_tail, self.tail_bytes,
            self.error, self.error_offset)

    def json_bytes(self) -> bytes | None:
        """:meth:`to_dict` as compact JSON, as orjson writes it, or None: then the caller serializes
        the dict (``hotpath.speedups.summary_json`` declines values it would not write the same way)."""
        return summary_json(self.json_values())


inheritable(RecordsSummary)     # dissector.v07.messages.MessageSetSummary


def summarize(data: bytes | bytearray | memoryview | None, *, check_crc: bool = True,
              max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> RecordsSummary:
    """Walk entry headers only; never raises.

    v2 batches are not decompressed (their header has the count). Legacy
    compressed wrappers are opened, within ``max_decompressed`` for the whole
    call, because nothing else tells how many messages they hold (see
    :func:`dissector.legacy.count_wrapper`).
    """
    return summarize_field(data, check_crc, max_decompressed)


def summarize_field(data: bytes | bytearray | memoryview | None, check_crc: bool = True,
                    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> RecordsSummary:
    """:func:`summarize`, its arguments positional: compiled, a C function (``records.pxd``) that
    :func:`summarize_span`, which the body decoders cimport, calls without parsing keywords."""
    try:
        return _summarize(data, check_crc, max_decompressed)
    except Exception as e:  # noqa: BLE001 - the contract is "never raise"
        n = len(data) if isinstance(data, (bytes, bytearray, memoryview)) else 0
        return RecordsSummary(total_bytes=n, error=f"internal error: {e!r}", error_offset=0,
                              data=data if isinstance(data, bytes) else None)


def summarize_span(b: bytes, start: int, end: int) -> RecordsSummary:
    """:func:`summarize_field` of ``b[start:end]``: what the compiled body decoders call for each records
    field, its bytes checked to be in ``b``. Compiled (``records.pxd``), they are copied out through a
    pointer, where slicing ``b`` made and freed a slice object (~400 instructions)."""
    if not 0 <= start <= end <= len(b):
        raise IndexError(f"bytes {start} to {end} of {len(b)}")
    at = b
    return summarize_field(at[start:end])


def _summarize(data: bytes | bytearray | memoryview | None, check_crc: bool, max_decompressed: int) -> RecordsSummary:
    if data is None:
        return RecordsSummary()
    if type(data) is not bytes:
        data = bytes(data)      # the summary keeps bytes in any case
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
    h = BatchHeader.__new__(BatchHeader)
    while pos < n:
        try:
            end = entry_end(b, pos, n)
        except RecordsError as e:
            err = str(e)
            break
        if end < 0:
            partial = True
            break
        magic = b[pos + 16]
        if magic == 2:
            h.read(b, pos)
            offset = h.base_offset
            attrs = h.attributes
            lod = h.last_offset_delta
            max_t = h.max_timestamp
            count = h.record_count
            c = attrs & 7
            if count < 0 or (c == 0 and not h.count_fits()):
                err = f"batch at byte {pos}: record count {count} impossible for {h.batch_length - V2_MIN_LENGTH} bytes"
                break
            if check_crc and not h.crc_matches(b, pos):
                failures.append(pos)
            if batches == 0:
                first_offset = offset
                first_ts = h.base_timestamp
                pid, pepoch, bseq = h.producer_id, h.producer_epoch, h.base_sequence
                codec = c
                first_crc = h.crc
            elif codec != c:
                codec = 8
            if max_ts is None or max_t > max_ts:
                max_ts = max_t
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
        else:
            offset = be_int(b, pos, 8)
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
        magic_mask |= 1 << magic
        batches += 1
        pos = end
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


