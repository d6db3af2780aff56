"""Bounded decompression of Kafka record payloads.

Every function takes ``limit``, the most bytes it may produce, and raises
:class:`DecompressionLimit` rather than allocate past it: gzip streams through
zlib with ``max_length``; snappy checks the declared length before inflating;
lz4 frames are parsed here and inflated block by block (each block is at most
the frame's declared block size); zstd and linked lz4 frames inflate into a
buffer that grows geometrically up to ``limit + 1`` and never beyond.

Codec ids are the low three attribute bits shared by record batches (magic 2)
and legacy messages (magic 0/1). :func:`render_bytes` turns record bytes into
JSON-friendly text.
"""

from __future__ import annotations

import base64
import enum
import struct
import zlib
from dataclasses import dataclass
from typing import Literal

import cramjam

from dissector.errors import DecompressionError, DecompressionLimit

__all__ = [
    "B64_PREFIX",
    "Budget",
    "BytesMode",
    "Codec",
    "codec_name",
    "decompress",
    "gunzip",
    "lz4_decompress",
    "lz4_header_checksum",
    "render_bytes",
    "snappy_decompress",
    "zstd_decompress",
    "XERIAL_MAGIC",
]


class Codec(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")   # by codec id, 0..4


def codec_name(codec: int) -> str:
    """``none/gzip/snappy/lz4/zstd``, or ``unknown(N)`` for ids 5..7."""
    return CODEC_NAMES[codec] if 0 <= codec < 5 else f"unknown({codec})"


def decompress(codec: int, data: bytes, limit: int) -> bytes:
    """Inflate ``data`` written with ``codec``; at most ``limit`` bytes out."""
    if codec == 1:
        return gunzip(data, limit)
    if codec == 2:
        return snappy_decompress(data, limit)
    if codec == 3:
        return lz4_decompress(data, limit)
    if codec == 4:
        return zstd_decompress(data, limit)
    if codec == 0:
        return data
    raise DecompressionError(f"unknown compression codec {codec}")


def _too_big(codec: str, size: int | str, limit: int) -> DecompressionLimit:
    return DecompressionLimit(f"{codec}: decompressed size {size} exceeds the limit of {limit} bytes")


# --- gzip -----------------------------------------------------------------

def gunzip(data: bytes, limit: int) -> bytes:
    """Gzip, possibly several concatenated members (as GZIPInputStream reads)."""
    out: list[bytes] = []
    total = 0
    rest = data
    while True:
        d = zlib.decompressobj(wbits=31)
        try:
            chunk = d.decompress(rest, limit - total + 1)
        except zlib.error as e:
            raise DecompressionError(f"gzip: {e}") from None
        total += len(chunk)
        if total > limit or d.unconsumed_tail:
            raise _too_big("gzip", f"> {limit}", limit)
        out.append(chunk)
        if not d.eof:
            raise DecompressionError("gzip: truncated stream")
        rest = d.unused_data
        # Java's GZIPInputStream ignores trailing bytes that are not another member.
        if len(rest) < 10 or rest[:2] != b"\x1f\x8b":
            break
    return out[0] if len(out) == 1 else b"".join(out)


# --- snappy ---------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic + int32 version + int32 compatible version
_I32 = struct.Struct(">i")


def _snappy_raw(data: bytes, limit: int) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(data)
    except Exception as e:  # noqa: BLE001 - cramjam raises assorted types on garbage
        raise DecompressionError(f"snappy: {e}") from None
    if declared > limit:
        raise _too_big("snappy", declared, limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as e:  # noqa: BLE001
        raise DecompressionError(f"snappy: {e}") from None


def snappy_decompress(data: bytes, limit: int) -> bytes:
    """Raw snappy, or the xerial framing the Java client writes.

    Xerial: ``\\x82SNAPPY\\x00``, int32 version, int32 compatible version, then
    repeated (int32 length, raw snappy block).
    """
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, limit)
    if len(data) < _XERIAL_HEADER:
        raise DecompressionError("snappy: truncated xerial header")
    out: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"snappy: truncated xerial block length at {pos}")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise DecompressionError(f"snappy: xerial block length {n} at {pos - 4} exceeds the {end - pos} bytes left")
        block = _snappy_raw(data[pos:pos + n], limit - total)
        total += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


# --- bounded inflate into a growing buffer ------------------------------------

def _into(fn: object, name: str, data: bytes, hint: int, limit: int) -> bytes:
    """Call cramjam's ``*_into`` with a buffer that grows x4 up to ``limit + 1``.

    cramjam stops with "failed to write whole buffer" when the buffer is full,
    so memory never exceeds limit + 1 even for a bomb.
    """
    size = max(64, min(hint, limit + 1))
    while True:
        buf = bytearray(size)
        try:
            n = fn(data, buf)  # type: ignore[operator]
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            if "whole buffer" not in msg and "large enough" not in msg:
                raise DecompressionError(f"{name}: {msg}") from None
            if size > limit:
                raise _too_big(name, f"> {limit}", limit) from None
            size = min(size * 4, limit + 1)
            continue
        if n > limit:
            raise _too_big(name, n, limit)
        return bytes(memoryview(buf)[:n])


# --- zstd -----------------------------------------------------------------

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_content_size(data: bytes) -> int | None:
    """Frame_Content_Size of the first frame, when the header declares it."""
    if len(data) < 6 or data[:4] != _ZSTD_MAGIC:
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single = (fhd >> 5) & 1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    width = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or len(data) < pos + width:
        return None
    size = int.from_bytes(data[pos:pos + width], "little")
    return size + 256 if width == 2 else size


def zstd_decompress(data: bytes, limit: int) -> bytes:
    declared = _zstd_content_size(data)
    if declared is not None and declared > limit:
        raise _too_big("zstd", declared, limit)
    hint = declared + 1 if declared is not None else 4 * len(data) + 1024
    return _into(cramjam.zstd.decompress_into, "zstd", data, hint, limit)


# --- lz4 ------------------------------------------------------------------

_LZ4_MAGIC = 0x184D2204
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _xxh32_short(b: bytes) -> int:
    """XXH32 (seed 0) of fewer than 16 bytes: all an lz4 frame descriptor can be."""
    h = (_P5 + len(b)) & _M32
    i = 0
    while i + 4 <= len(b):
        h = (h + _U32.unpack_from(b, i)[0] * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        i += 4
    for c in b[i:]:
        h = (h + c * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    return h ^ (h >> 16)


def lz4_header_checksum(descriptor: bytes) -> int:
    """The HC byte the lz4 frame spec wants for FLG..end of descriptor."""
    return (_xxh32_short(descriptor) >> 8) & 0xFF


def lz4_decompress(data: bytes, limit: int) -> bytes:
    """LZ4 frame(s), ignoring the header checksum byte.

    Kafka before 0.10 computed that checksum over the wrong bytes for magic 0/1
    messages, so it is never verified: the header is parsed here and blocks are
    inflated one by one. Linked blocks need the previous block as dictionary,
    which cramjam's block API lacks; such frames (multi-block only) are re-headed
    with a correct checksum and inflated whole, still bounded.
    """
    out: list[bytes] = []
    total = 0
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"lz4: {end - pos} trailing bytes at {pos}")
        (magic,) = _U32.unpack_from(data, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if end - pos < 8:
                raise DecompressionError(f"lz4: truncated skippable frame at {pos}")
            skip = _U32.unpack_from(data, pos + 4)[0]
            pos += 8 + skip
            continue
        if magic != _LZ4_MAGIC:
            raise DecompressionError(f"lz4: bad frame magic {magic:#010x} at {pos}")
        chunk, pos = _lz4_frame(data, pos, limit - total)
        total += len(chunk)
        out.append(chunk)
    if not out:
        raise DecompressionError("lz4: no frame")
    return out[0] if len(out) == 1 else b"".join(out)


def _lz4_frame(data: bytes, start: int, limit: int) -> tuple[bytes, int]:
    end = len(data)
    pos = start + 4
    if end - pos < 3:
        raise DecompressionError("lz4: truncated frame descriptor")
    flg = data[pos]
    bd = data[pos + 1]
    if flg >> 6 != 1:
        raise DecompressionError(f"lz4: unsupported frame version {flg >> 6}")
    linked = not flg & 0x20
    block_checksum = 4 if flg & 0x10 else 0
    content_checksum = flg & 0x04
    if flg & 0x01:
        raise DecompressionError("lz4: frame needs a dictionary")
    bsid = (bd >> 4) & 7
    if bsid < 4:
        raise DecompressionError(f"lz4: bad block size id {bsid}")
    block_max = 1 << (8 + 2 * bsid)
    desc_end = pos + 2
    if flg & 0x08:
        if end - desc_end < 9:
            raise DecompressionError("lz4: truncated frame descriptor")
        (declared,) = _U64.unpack_from(data, desc_end)
        if declared > limit:
            raise _too_big("lz4", declared, limit)
        desc_end += 8
    hc_pos = desc_end
    pos = hc_pos + 1
    blocks: list[tuple[int, int, bool]] = []  # (start, size, stored uncompressed)
    while True:
        if end - pos < 4:
            raise DecompressionError(f"lz4: truncated frame at {pos} (no end mark)")
        (word,) = _U32.unpack_from(data, pos)
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        if size > block_max or size > end - pos:
            raise DecompressionError(f"lz4: block size {size} at {pos - 4} is invalid")
        blocks.append((pos, size, bool(word & 0x80000000)))
        pos += size + block_checksum
    if content_checksum:
        pos = min(end, pos + 4)
    frame_end = pos

    if linked and any(not stored for _, _, stored in blocks[1:]):
        frame = bytearray(data[start:frame_end])
        frame[hc_pos - start] = lz4_header_checksum(bytes(data[start + 4:hc_pos]))
        hint = min(len(blocks) * block_max, 4 * len(frame) + 1024)
        return _into(cramjam.lz4.decompress_into, "lz4", bytes(frame), hint, limit), frame_end

    out: list[bytes] = []
    total = 0
    # Scratch grows x4 on demand up to the block size (or limit + 1): a tiny
    # frame declaring 4 MiB blocks must not cost a 4 MiB allocation.
    cap = min(block_max, limit + 1)
    scratch = bytearray(min(cap, 1 << 16))
    for bstart, size, stored in blocks:
        if stored:
            piece = data[bstart:bstart + size]
        else:
            block = data[bstart:bstart + size]
            while True:
                try:
                    n = cramjam.lz4.decompress_block_into(block, scratch)
                    break
                except Exception as e:  # noqa: BLE001
                    # A too-small buffer is not always reported as such: a block that
                    # inflates a lot (4 MiB of zeros) fails as "Input invalid or too long?".
                    # So any failure is retried with more room, up to the block size.
                    if len(scratch) < cap:
                        scratch = bytearray(min(cap, len(scratch) * 4))
                        continue
                    if "large enough" not in str(e) and "too long" not in str(e):
                        raise DecompressionError(f"lz4: block at {bstart}: {e}") from None
                    if cap > limit:
                        raise _too_big("lz4", f"> {limit}", limit) from None
                    raise DecompressionError(
                        f"lz4: block at {bstart} inflates past the {block_max}-byte block size") from None
            piece = bytes(memoryview(scratch)[:n])
        total += len(piece)
        if total > limit:
            raise _too_big("lz4", f"> {limit}", limit)
        out.append(piece)
    return (out[0] if len(out) == 1 else b"".join(out)), frame_end


# --- budget across one decode call ---------------------------------------------

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024    # per decode call, all of its batches together


@dataclass
class Budget:
    """Decompressed bytes still allowed in one decode call (shared by all its batches)."""

    remaining: int

    def decompress(self, codec: int, data: bytes) -> bytes:
        try:
            out = decompress(codec, data, self.remaining)
        except MemoryError:
            # A limit set above what the process may allocate: the input decides the size, so
            # this is the input's problem, reported like the limit itself.
            raise DecompressionLimit(f"{codec_name(codec)}: out of memory inflating within the limit of "
                                     f"{self.remaining} bytes") from None
        self.remaining -= len(out)
        return out


# --- bytes for JSON -------------------------------------------------------------

BytesMode = Literal["auto", "base64", "hex", "utf8", "raw"]
_CONTROL_WS = str.maketrans("", "", "\t\n\r")
B64_PREFIX = "base64:"


def render_bytes(b: bytes | None, mode: BytesMode = "auto") -> str | bytes | None:
    """Render a key/value/header value for JSON.

    ``auto``: the text itself when the bytes are UTF-8 whose characters are all
    printable (tab/CR/LF allowed), otherwise ``"base64:" + base64``; text that
    itself starts with ``base64:`` is also base64-encoded, so the two never mix
    up. ``base64`` / ``hex``: always encoded, no prefix. ``utf8``: decoded with
    U+FFFD for bad bytes (lossy). ``raw``: the bytes unchanged (Arrow binary).
    """
    if b is None or mode == "raw":
        return b
    if mode == "auto":
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if s.translate(_CONTROL_WS).isprintable() and not s.startswith(B64_PREFIX):
                return s
        return B64_PREFIX + base64.b64encode(b).decode("ascii")
    if mode == "base64":
        return base64.b64encode(b).decode("ascii")
    if mode == "hex":
        return b.hex()
    if mode == "utf8":
        return b.decode("utf-8", "replace")
    raise ValueError(f"unknown bytes mode {mode!r}")
