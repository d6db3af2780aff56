"""Bounded decompression (dissector.codecs)."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import cramjam
import pytest

from dissector.codecs import (
    XERIAL_MAGIC,
    Budget,
    codec_name,
    decompress,
    gunzip,
    lz4_decompress,
    lz4_header_checksum,
    render_bytes,
    snappy_decompress,
    zstd_decompress,
)
from dissector.errors import DecompressionError, DecompressionLimit, RecordsError

TEXT = b"".join(b'{"id": %d, "name": "user-%d"}\n' % (i, i) for i in range(20000))  # ~560 KB


def xerial(payload: bytes, chunk: int) -> bytes:
    out = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(payload), chunk):
        block = bytes(cramjam.snappy.compress_raw(payload[i:i + chunk]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def streamed_zeros(compressor, total: int, chunk: int = 1 << 20) -> bytes:
    """Compress ``total`` zero bytes without ever holding them."""
    zero = bytes(chunk)
    out = bytearray()
    for _ in range(total // chunk):
        compressor.compress(zero)  # returns the count consumed; output comes from flush()
        out += bytes(compressor.flush())
    out += bytes(compressor.finish())
    return bytes(out)


def test_codec_names():
    assert [codec_name(i) for i in range(6)] == ["none", "gzip", "snappy", "lz4", "zstd", "unknown(5)"]
    with pytest.raises(DecompressionError, match="unknown compression codec 6"):
        decompress(6, b"x", 100)
    assert decompress(0, b"abc", 1) == b"abc"  # "none" is never inflated


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_roundtrip_every_codec(codec):
    comp = {
        1: lambda d: gzip.compress(d),
        2: lambda d: bytes(cramjam.snappy.compress_raw(d)),
        3: lambda d: bytes(cramjam.lz4.compress(d)),
        4: lambda d: bytes(cramjam.zstd.compress(d)),
    }[codec]
    assert decompress(codec, comp(TEXT), len(TEXT)) == TEXT
    with pytest.raises(DecompressionLimit):
        decompress(codec, comp(TEXT), len(TEXT) - 1)
    assert decompress(codec, comp(b""), 0) == b""


def test_gzip_members_and_trailing_garbage():
    two = gzip.compress(b"abc") + gzip.compress(b"def")
    assert gunzip(two, 100) == b"abcdef"
    assert gunzip(gzip.compress(b"abc") + b"\x00\x00junk", 100) == b"abc"
    with pytest.raises(DecompressionError, match="truncated"):
        gunzip(gzip.compress(TEXT)[:-100], 10**7)
    with pytest.raises(DecompressionError):
        gunzip(b"\x1f\x8b\x08\x00garbage-garbage", 100)
    with pytest.raises(DecompressionLimit):
        gunzip(two, 5)  # the cap counts across members


def test_snappy_raw_and_xerial():
    raw = bytes(cramjam.snappy.compress_raw(TEXT))
    assert snappy_decompress(raw, len(TEXT)) == TEXT
    framed = xerial(TEXT, 32 * 1024)
    assert framed.count(b"SNAPPY") == 1 and snappy_decompress(framed, len(TEXT)) == TEXT
    assert snappy_decompress(XERIAL_MAGIC + struct.pack(">ii", 1, 1), 0) == b""  # no blocks
    with pytest.raises(DecompressionLimit):
        snappy_decompress(framed, len(TEXT) - 1)
    with pytest.raises(DecompressionError, match="xerial block length"):
        snappy_decompress(framed[:-5], 10**7)
    with pytest.raises(DecompressionError, match="xerial block length -1"):
        snappy_decompress(XERIAL_MAGIC + struct.pack(">iii", 1, 1, -1), 100)
    with pytest.raises(DecompressionError, match="truncated xerial header"):
        snappy_decompress(XERIAL_MAGIC + b"\x00", 100)
    with pytest.raises(DecompressionError):
        snappy_decompress(b"\xff\xff\xff\xff\x0f garbage", 10**12)


def test_snappy_declared_length_checked_before_inflating():
    # The varint header declares 2**32-1 bytes: refused without allocating.
    with pytest.raises(DecompressionLimit, match="4294967295"):
        snappy_decompress(b"\xff\xff\xff\xff\x0f\x00", 1 << 20)


def _lz4_frame(payload: bytes, **kw) -> bytes:
    lz4frame = pytest.importorskip("lz4.frame")
    return lz4frame.compress(payload, **kw)


@pytest.mark.parametrize("block_size", [4, 7], ids=["64KiB", "4MiB"])  # 64 KiB: ~9 blocks; 4 MiB: one
@pytest.mark.parametrize("linked", [True, False])
@pytest.mark.parametrize("checksums", [True, False])
def test_lz4_frames(linked, checksums, block_size):
    f = _lz4_frame(TEXT, block_linked=linked, block_checksum=checksums, content_checksum=checksums,
                   store_size=checksums, block_size=block_size)
    assert ((f[5] >> 4) & 7 > 4) == (block_size == 7)  # lz4 shrinks 4 MiB to 1 MiB for this input
    assert lz4_decompress(f, len(TEXT)) == TEXT
    with pytest.raises(DecompressionLimit):
        lz4_decompress(f, len(TEXT) - 1)


def test_lz4_header_checksum_matches_spec():
    f = bytes(cramjam.lz4.compress(b"hello"))
    flg = f[4]
    hc = 6 + (8 if flg & 8 else 0)
    assert lz4_header_checksum(f[4:hc]) == f[hc]
    xxhash = pytest.importorskip("xxhash")
    for n in range(16):
        data = bytes(range(30, 30 + n))
        assert lz4_header_checksum(data) == (xxhash.xxh32(data).intdigest() >> 8) & 0xFF


def test_lz4_broken_header_checksum_tolerated():
    f = bytearray(cramjam.lz4.compress(TEXT))  # cramjam writes linked blocks
    f[6] ^= 0x5A  # the HC byte (no content size in cramjam's header)
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(bytes(f))
    assert lz4_decompress(bytes(f), len(TEXT)) == TEXT


def test_lz4_stored_blocks_skippable_frames_and_concatenation():
    # FLG: version 1, independent blocks; BD: 64 KB; a stored (uncompressed) block.
    desc = bytes([0x60, 0x40])
    frame = (struct.pack("<I", 0x184D2204) + desc + bytes([lz4_header_checksum(desc)])
             + struct.pack("<I", 0x80000000 | 5) + b"hello" + struct.pack("<I", 0))
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"xyz"
    assert lz4_decompress(skippable + frame + frame, 100) == b"hellohello"
    with pytest.raises(DecompressionError, match="no end mark"):
        lz4_decompress(frame[:-4], 100)
    with pytest.raises(DecompressionError, match="bad frame magic"):
        lz4_decompress(b"\x00" * 12, 100)
    with pytest.raises(DecompressionError, match="block size"):
        lz4_decompress(frame[:7] + struct.pack("<I", 0x7FFFFFFF) + b"x", 100)
    with pytest.raises(DecompressionError, match="version"):
        lz4_decompress(frame[:4] + b"\x20" + frame[5:], 100)
    with pytest.raises(DecompressionError, match="dictionary"):
        lz4_decompress(frame[:4] + b"\x61" + frame[5:], 100)


def test_lz4_declared_content_size_refused_early():
    desc = bytes([0x68, 0x40]) + struct.pack("<Q", 1 << 40)
    frame = struct.pack("<I", 0x184D2204) + desc + bytes([lz4_header_checksum(desc)]) + struct.pack("<I", 0)
    with pytest.raises(DecompressionLimit, match=str(1 << 40)):
        lz4_decompress(frame, 1 << 20)


def test_zstd_with_and_without_content_size():
    zstandard = pytest.importorskip("zstandard")
    with_size = zstandard.ZstdCompressor(write_content_size=True).compress(TEXT)
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    without = cobj.compress(TEXT) + cobj.flush()
    for f in (with_size, without):
        assert zstd_decompress(f, len(TEXT)) == TEXT
        with pytest.raises(DecompressionLimit):
            zstd_decompress(f, len(TEXT) - 1)
    with pytest.raises(DecompressionError):
        zstd_decompress(b"\x28\xb5\x2f\xfd" + b"\xff" * 20, 1000)


@pytest.mark.parametrize("kind", ["gzip", "zstd", "lz4", "lz4-independent"])
def test_bomb_is_capped_and_memory_bounded(kind):
    """256 MiB of zeros compressed to a few KB; a 4 MiB cap must stop it cheaply."""
    total, cap = 256 << 20, 4 << 20
    if kind == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb = b"".join(c.compress(bytes(1 << 20)) for _ in range(total >> 20)) + c.flush()
        fn = gunzip
    elif kind == "zstd":
        bomb = streamed_zeros(cramjam.zstd.Compressor(), total)
        fn = zstd_decompress
    elif kind == "lz4":
        bomb = streamed_zeros(cramjam.lz4.Compressor(), total)  # linked blocks
        fn = lz4_decompress
    else:
        lz4frame = pytest.importorskip("lz4.frame")
        c = lz4frame.LZ4FrameCompressor(block_linked=False)
        bomb = c.begin() + b"".join(c.compress(bytes(1 << 20)) for _ in range(total >> 20)) + c.flush()
        fn = lz4_decompress
    assert len(bomb) < 2 << 20
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimit):
            fn(bomb, cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap, peak


def test_budget_is_shared_across_calls():
    b = Budget(10)
    assert b.decompress(1, gzip.compress(b"123456")) == b"123456"
    assert b.remaining == 4
    with pytest.raises(DecompressionLimit):
        b.decompress(1, gzip.compress(b"123456"))
    assert issubclass(DecompressionLimit, RecordsError)


def test_render_bytes():
    assert render_bytes(None) is None
    assert render_bytes(b"hello\tworld\n") == "hello\tworld\n"
    assert render_bytes("héllo".encode()) == "héllo"
    assert render_bytes(b"\x00\x01") == "base64:AAE="
    assert render_bytes(b"\xff") == "base64:/w=="
    assert render_bytes(b"base64:abc") == "base64:YmFzZTY0OmFiYw=="  # never ambiguous
    assert render_bytes(b"\x00\x01", "hex") == "0001"
    assert render_bytes(b"ab", "base64") == "YWI="
    assert render_bytes(b"a\xff", "utf8") == "a\ufffd"
    assert render_bytes(b"\x00", "raw") == b"\x00"
    with pytest.raises(ValueError):
        render_bytes(b"x", "nope")  # type: ignore[arg-type]


def test_lz4_frame_with_a_4mib_block_that_inflates_a_lot():
    """Found building decompression bombs: cramjam reports a too-small output buffer for a
    highly compressible block as "Input invalid or too long?", not as a buffer problem."""
    lz4frame = pytest.importorskip("lz4.frame")
    data = lz4frame.compress(bytes(4 << 20), block_size=lz4frame.BLOCKSIZE_MAX4MB, block_linked=False,
                             content_checksum=False, store_size=False)
    assert decompress(3, data, 8 << 20) == bytes(4 << 20)
    with pytest.raises(DecompressionLimit):
        decompress(3, data, 1 << 20)
