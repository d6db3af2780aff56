"""Big-endian integers read byte by byte, for the compiled hot path (issue #8).

A ``struct`` call costs ~700 instructions: argument parsing, a tuple, an int per field.
Compiled with ``ints.pxd`` beside it, these are C functions: each byte read is a C
load, and the callers that cimport them (``records.pxd``, ``schema/_decoders.pxd``)
get C integers back. As Python they read the same values, more slowly. The caller
makes sure the bytes are there (or, compiled, lets the bounds check raise IndexError).
"""

from __future__ import annotations

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def be_int(buf: bytes | bytearray | memoryview, p: int, size: int) -> int:
    """The signed integer of ``size`` bytes at ``p``. Starting from the sign-extended first byte,
    every step stays in range of a C long long."""
    if type(buf) is bytes:
        b = buf
    else:                       # another buffer: its few bytes copied, so that reads stay C loads
        b = bytes(buf[p:p + size])
        p = 0
    v = b[p]
    if v >= 128:
        v -= 256
    for i in range(p + 1, p + size):
        v = v * 256 + b[i]
    return v


def be_uint(b: bytes, p: int, size: int) -> int:
    """The unsigned integer of ``size`` bytes (at most 7, to fit a C long long) at ``p``."""
    v = 0
    for i in range(p, p + size):
        v = v * 256 + b[i]
    return v
