"""Big-endian integers read byte by byte (dissector.ints): the values ``struct`` reads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
