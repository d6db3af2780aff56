"""The entries of a records field: where each one ends, and the header of a v2 batch.

Every entry, a v2 batch or a legacy message (magic 0/1), starts with ``int64 offset, int32 length``
and has its magic byte at offset 16; :func:`entry_end` is the one reading of that prefix. A v2 batch
then has a fixed 61-byte header (KIP-98), read by :meth:`BatchHeader.read` alone: the summary of every
records field (:func:`dissector.records.summarize`) and the full decode (:mod:`dissector.recordset`)
both use it.

Compiled (``batchheader.pxd``), :class:`BatchHeader` holds C integers, read with the inlined readers of
:mod:`dissector.fixedwidth`, and is filled in place, so that a walk over many batches allocates one, made
without its ``__init__`` (``BatchHeader.__new__``): the dataclass call costs more than the whole read. A
constant whose name starts with ``_`` is the public one's C twin: compiled, a ``.pxd``'s C global is no
module attribute, and the modules importing the public one declare their own C copies the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotpath.speedups import crc32c_of

from dissector.errors import RecordsBadLength, RecordsError
from dissector import fixedwidth
from dissector.legacy import LEGACY_MIN_SIZE

__all__ = ["BatchHeader", "entry_end", "V2_HEADER", "V2_MIN_LENGTH", "V2_CRC_FROM", "MIN_RECORD"]

V2_HEADER = 61
V2_MIN_LENGTH = V2_HEADER - 12   # batchLength of a batch with no record bytes
V2_CRC_FROM = 21                 # CRC-32C covers attributes..end
MIN_RECORD = 7  # length, attributes, ts delta, offset delta, key len, value len, header count: a byte each
_V2_MIN_LENGTH, _V2_CRC_FROM, _MIN_RECORD = V2_MIN_LENGTH, V2_CRC_FROM, MIN_RECORD


def entry_end(b: bytes, pos: int, n: int) -> int:
    """Where the entry at ``pos`` of ``b[:n]`` ends, or -1 when ``b`` ends first (a partial tail).

    Raises :class:`RecordsBadLength` for a length below its magic's minimum and :class:`RecordsError`
    for an unknown magic: the framing is lost from there.
    """
    if n - pos < 17:
        return -1
    length = fixedwidth.i32(b, pos + 8)
    magic = b[pos + 16]
    if magic == 2:
        if length < _V2_MIN_LENGTH:
            raise RecordsBadLength(f"batch at byte {pos}: batch length {length} below the minimum {V2_MIN_LENGTH}")
    elif magic == 0 or magic == 1:
        if length < LEGACY_MIN_SIZE[magic]:
            raise RecordsBadLength(f"message at byte {pos}: size {length} below the minimum {LEGACY_MIN_SIZE[magic]}")
    else:
        raise RecordsError(f"entry at byte {pos}: unknown magic {magic}")
    end = pos + 12 + length
    return -1 if end > n else end


@dataclass
class BatchHeader:
    """The fields of a v2 batch's header (its magic, 2, is not kept)."""

    base_offset: int = 0
    batch_length: int = 0
    partition_leader_epoch: int = 0
    crc: int = 0
    attributes: int = 0
    last_offset_delta: int = 0
    base_timestamp: int = 0
    max_timestamp: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    base_sequence: int = 0
    record_count: int = 0

    def read(self, b: bytes, pos: int) -> None:
        """Read the header of the batch at ``pos``; the caller made sure its 61 bytes are there."""
        self.base_offset = fixedwidth.i64(b, pos)
        self.batch_length = fixedwidth.i32(b, pos + 8)
        self.partition_leader_epoch = fixedwidth.i32(b, pos + 12)
        self.crc = fixedwidth.u32(b, pos + 17)
        self.attributes = fixedwidth.i16(b, pos + 21)
        self.last_offset_delta = fixedwidth.i32(b, pos + 23)
        self.base_timestamp = fixedwidth.i64(b, pos + 27)
        self.max_timestamp = fixedwidth.i64(b, pos + 35)
        self.producer_id = fixedwidth.i64(b, pos + 43)
        self.producer_epoch = fixedwidth.i16(b, pos + 51)
        self.base_sequence = fixedwidth.i32(b, pos + 53)
        self.record_count = fixedwidth.i32(b, pos + 57)

    def crc_matches(self, b: bytes, pos: int) -> bool:
        """Whether the CRC-32C of the batch at ``pos`` is the one its header sent."""
        got = crc32c_of(b, pos + _V2_CRC_FROM, pos + 12 + self.batch_length)
        return got == self.crc

    def count_fits(self) -> bool:
        """Whether the declared record count is not negative and fits in the batch's bytes as they are
        (uncompressed)."""
        return 0 <= self.record_count <= (self.batch_length - _V2_MIN_LENGTH) // _MIN_RECORD
