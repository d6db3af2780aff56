"""Big-endian integers of a fixed width, read where the hot path reads most of them.

As Python these are :func:`dissector.ints.be_int` and :func:`~dissector.ints.be_uint` of their width,
and this module is all there is. Compiled, it is never compiled itself: ``fixedwidth.pxd`` holds their
C twins, inline functions that the compiled callers cimport (``from dissector cimport fixedwidth``) and
call as ``fixedwidth.i32(b, p)``, the name their ``.py`` calls through this module. Inlined, a read of
a ``bytes`` whose bytes are there is a bounds check and a few loads and shifts where a call to
``be_int`` cost ~86 instructions (a cross-module call and a checked index per byte); anything else
(another buffer, bytes missing) goes to ``be_int``, which reads or raises exactly as before.
"""

from __future__ import annotations

from dissector.ints import be_int, be_uint


def i8(b: bytes, p: int) -> int:
    return be_int(b, p, 1)


def i16(b: bytes, p: int) -> int:
    return be_int(b, p, 2)


def i32(b: bytes, p: int) -> int:
    return be_int(b, p, 4)


def i64(b: bytes, p: int) -> int:
    return be_int(b, p, 8)


def u16(b: bytes, p: int) -> int:
    return be_uint(b, p, 2)


def u32(b: bytes, p: int) -> int:
    return be_uint(b, p, 4)
