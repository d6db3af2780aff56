"""Decompression bombs: valid record data that inflates to gigabytes, built in seconds.

No client sends these, so they are hand-built. Each codec's stream is cut
into independent pieces (gzip: blocks after a full flush; lz4: unlinked
frame blocks; zstd: RLE blocks; snappy: xerial blocks), so one compressed
piece of zeros is repeated instead of compressing gigabytes. Checksums are
right: gzip's CRC-32 over the zeros comes from a zero-extension operator,
not from reading them.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import crc32c

from dissector.codecs import XERIAL_MAGIC

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
UNIT = {GZIP: 64 << 20, SNAPPY: 32 << 20, LZ4: 4 << 20, ZSTD: 128 << 10}   # bytes of zeros per repeated piece


# -- CRC-32 of data followed by n zero bytes, without the zeros ----------------------------------

def _apply(m: list[int], x: int) -> int:
    r = 0
    i = 0
    while x:
        if x & 1:
            r ^= m[i]
        x >>= 1
        i += 1
    return r


def crc32_zeros(crc: int, n: int) -> int:
    """``zlib.crc32(b"\\0" * n, crc)``, in microseconds."""
    mask = 0xFFFFFFFF
    # One zero byte is linear on the inverted register: its image of each bit.
    step = [~zlib.crc32(b"\0", ~(1 << i) & mask) & mask for i in range(32)]
    reg = ~crc & mask
    while n:
        if n & 1:
            reg = _apply(step, reg)
        step = [_apply(step, v) for v in step]
        n >>= 1
    return ~reg & mask


# -- inflating streams -----------------------------------------------------------------------------

def inflating(codec: int, prefix: bytes, zeros: int, suffix: bytes) -> bytes:
    """``codec``-compressed ``prefix + b"\\0" * zeros + suffix``; ``zeros`` a multiple of UNIT[codec]."""
    unit = UNIT[codec]
    assert zeros % unit == 0
    k = zeros // unit
    if codec == GZIP:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
        piece = c.compress(bytes(unit)) + c.flush(zlib.Z_FULL_FLUSH)   # history reset on both sides
        tail = c.compress(suffix) + c.flush(zlib.Z_FINISH)
        crc = zlib.crc32(suffix, crc32_zeros(zlib.crc32(prefix), zeros))
        size = (len(prefix) + zeros + len(suffix)) & 0xFFFFFFFF
        return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + head + piece * k + tail
                + struct.pack("<II", crc, size))
    if codec == SNAPPY:
        def block(b: bytes) -> bytes:
            raw = bytes(cramjam.snappy.compress_raw(b))
            return struct.pack(">i", len(raw)) + raw
        return XERIAL_MAGIC + struct.pack(">ii", 1, 1) + block(prefix) + block(bytes(unit)) * k + block(suffix)
    if codec == LZ4:
        import lz4.frame

        def frame_parts(b: bytes) -> tuple[bytes, bytes]:
            f = lz4.frame.compress(b, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                                   content_checksum=False, store_size=False)
            return f[:7], f[7:-4]                 # header (magic, FLG, BD, HC); one block; end mark dropped
        _, first = frame_parts(prefix)
        header, zero = frame_parts(bytes(unit))     # its header declares 4 MiB blocks
        _, last = frame_parts(suffix)
        return header + first + zero * k + last + b"\0\0\0\0"
    if codec == ZSTD:
        def blk(kind: int, size: int, last: bool = False) -> bytes:
            return struct.pack("<I", last | kind << 1 | size << 3)[:3]
        # magic; no content size, no checksum; window 128 KiB
        out = bytearray(struct.pack("<I", 0xFD2FB528) + b"\x00\x38")
        out += blk(0, len(prefix)) + prefix
        out += (blk(1, unit) + b"\0") * k
        out += blk(0, len(suffix), True) + suffix
        return bytes(out)
    raise ValueError(codec)


# -- record data ------------------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def batch(codec: int, records: bytes, count: int, base_offset: int = 0) -> bytes:
    """A v2 record batch around already compressed (or plain) ``records``."""
    body = struct.pack(">hiqqqhii", codec, count - 1, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, count)
    body += records
    crc = crc32c.crc32c(body)
    head = struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(body), 0, 2)
    return head + struct.pack(">I", crc) + body


def plain_records(values: list[bytes]) -> bytes:
    out = bytearray()
    for i, v in enumerate(values):
        rec = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        out += _varint(len(rec)) + rec
    return bytes(out)


def bomb_batch(codec: int, size: int) -> bytes:
    """One record whose value is ``size`` zero bytes (rounded down to the codec's unit), compressed."""
    zeros = size - size % UNIT[codec]
    rest = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(zeros)
    length = len(rest) + zeros + 1
    prefix = _varint(length) + rest
    return batch(codec, inflating(codec, prefix, zeros, _varint(0)), 1)


def legacy_bomb(size: int, messages: int = 6) -> bytes:
    """A magic 1 gzip wrapper (Produce v2) whose inner set holds ``messages`` messages of ~size/messages zeros."""
    unit = UNIT[GZIP]
    per = (size // messages) // unit * unit
    per = min(per, (0x7FFFFFFF - 64) // unit * unit)           # an int32 message size
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = None
    parts = []
    crc_all = 0
    total = 0
    for i in range(messages):
        body_head = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", -1) + struct.pack(">i", per)
        crc = crc32_zeros(zlib.crc32(body_head), per)
        head = struct.pack(">qiI", i, 4 + len(body_head) + per, crc) + body_head
        parts.append(c.compress(head) + c.flush(zlib.Z_FULL_FLUSH))
        if piece is None:
            piece = c.compress(bytes(unit)) + c.flush(zlib.Z_FULL_FLUSH)
        parts.append(piece * (per // unit))
        crc_all = crc32_zeros(zlib.crc32(head, crc_all), per)
        total += len(head) + per
    parts.append(c.flush(zlib.Z_FINISH))
    value = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + b"".join(parts)
             + struct.pack("<II", crc_all, total & 0xFFFFFFFF))
    wrapper_body = struct.pack(">bbq", 1, GZIP, 1_700_000_000_000) + struct.pack(">i", -1) + \
        struct.pack(">i", len(value)) + value
    crc = zlib.crc32(wrapper_body)
    return struct.pack(">qiI", messages - 1, 4 + len(wrapper_body), crc) + wrapper_body
