"""Big-endian integers read byte by byte, for the compiled hot path (issue #8), and int64's bounds.

A ``struct`` call costs ~700 instructions: argument parsing, a tuple, an int per field.
Compiled with ``ints.pxd`` beside it, these are C functions: each byte read is a C
load, and the callers that cimport them (``records.pxd``, ``dissector/fixedwidth.pxd``)
get C integers back; the hot readers of a known width are :mod:`dissector.fixedwidth`'s,
inlined, which fall back to these. As Python they read the same values, more slowly. The caller
makes sure the bytes are there (or, compiled, lets the bounds check raise IndexError).
Every step of :func:`be_int`, starting from the sign-extended first byte, stays in
range of a C long long, and :func:`be_uint` reads at most 7 bytes for the same
reason; a buffer other than ``bytes`` has its few bytes copied so that reads stay
C loads.
"""

from __future__ import annotations

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
# Offsets and timestamps are int64 on the wire and in the dataset, but some are sums of wire values
# (base offset + delta, base timestamp + delta) that a hostile or broken peer can push past int64.
# Such a sum is None, and a note starting with OUT_OF_RANGE says so (``out_of_range`` anomalies).
OUT_OF_RANGE = "out of range"


def be_int(buf: bytes | bytearray | memoryview, p: int, size: int) -> int:
    """The signed integer of ``size`` (at most 8) bytes at ``p``."""
    if type(buf) is bytes:
        b = buf
    else:
        b = bytes(buf[p:p + size])
        p = 0
    v = b[p]
    if v >= 128:
        v -= 256
    for i in range(p + 1, p + size):
        v = v * 256 + b[i]
    return v


def be_uint(b: bytes, p: int, size: int) -> int:
    """The unsigned integer of ``size`` (at most 7) bytes at ``p``."""
    v = 0
    for i in range(p, p + size):
        v = v * 256 + b[i]
    return v
