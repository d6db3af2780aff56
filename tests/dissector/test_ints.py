"""Big-endian integers read byte by byte (dissector.ints) and by width (dissector.fixedwidth): the values
``struct`` reads."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dissector import fixedwidth
from dissector.batchheader import BatchHeader
from dissector.ints import be_int, be_uint


@given(st.binary(min_size=1, max_size=12), st.data())
def test_the_values_int_from_bytes_reads(data: bytes, draw) -> None:
    p = draw.draw(st.integers(0, len(data) - 1))
    size = draw.draw(st.integers(1, min(8, len(data) - p)))
    chunk = data[p:p + size]
    assert be_int(data, p, size) == int.from_bytes(chunk, "big", signed=True)
    assert be_int(bytearray(data), p, size) == be_int(memoryview(data), p, size) == be_int(data, p, size)
    if size <= 7:
        assert be_uint(data, p, size) == int.from_bytes(chunk, "big")


def test_the_ends_of_int64_and_a_read_past_the_end() -> None:
    assert be_int(b"\x80" + bytes(7), 0, 8) == -(1 << 63)
    assert be_int(b"\x7f" + b"\xff" * 7, 0, 8) == (1 << 63) - 1
    assert be_int(b"\xff\xff\xff\xff", 0, 4) == -1
    assert be_uint(b"\xff\xff\xff\xff", 0, 4) == 0xFFFFFFFF
    with pytest.raises(IndexError):
        be_int(b"\x00\x01\x02", 0, 4)


@given(st.binary(min_size=61, max_size=70), st.data())
def test_a_batch_header_reads_what_struct_reads(data: bytes, draw) -> None:
    # BatchHeader.read takes every width dissector.fixedwidth has (compiled: its inlined C readers).
    pos = draw.draw(st.integers(0, len(data) - 61))
    h = BatchHeader()
    h.read(data, pos)
    want = struct.unpack_from(">qiibIhiqqqhii", data, pos)
    assert (h.base_offset, h.batch_length, h.partition_leader_epoch, h.crc, h.attributes, h.last_offset_delta,
            h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence,
            h.record_count) == want[:3] + want[4:]


@pytest.mark.parametrize("buf", [b"\x80\x00\x00\x01\xff\xfe", bytearray(b"\x80\x00\x00\x01\xff\xfe"),
                                 memoryview(b"\x80\x00\x00\x01\xff\xfe")])
def test_the_fixed_width_readers_are_be_int_and_be_uint_of_their_width(buf) -> None:
    assert [fixedwidth.i8(buf, 0), fixedwidth.i16(buf, 0), fixedwidth.i32(buf, 0), fixedwidth.i16(buf, 4)] == [
        -128, -32768, -2147483647, -2]
    assert fixedwidth.u16(bytes(buf), 4) == 0xFFFE and fixedwidth.u32(bytes(buf), 2) == 0x0001FFFE
    assert fixedwidth.i64(bytes(buf) + b"\x00\x00", 0) == be_int(bytes(buf) + b"\x00\x00", 0, 8)
    with pytest.raises(IndexError):
        fixedwidth.i32(buf, 4)
