"""Record data decoding (dissector.records / dissector.legacy).

Batches come from kafka-python's and aiokafka's own builders (independent
encoders) where they can make them, and from the small hand encoder below for
what they can't (control batches, LogAppendTime, corruption, quirks).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import struct
import time
import zlib
from pathlib import Path

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dissector.codecs as codecs_mod
from dissector.codecs import XERIAL_MAGIC
from dissector.errors import (
    BadLength,
    BadVarint,
    DecompressionError,
    DecompressionLimit,
    RecordsBadLength,
    RecordsBadVarint,
    RecordsError,
    RecordsUnderflow,
    Underflow,
)
from dissector.legacy import LegacyMessage
from dissector.records import (
    RecordBatch,
    RecordsSummary,
    decode_records,
    summarize,
    summarize_span,
)

kbuilders = pytest.importorskip("kafka.record.default_records")
klegacy = pytest.importorskip("kafka.record.legacy_records")
kcodec = pytest.importorskip("kafka.codec")
abuilders = pytest.importorskip("aiokafka.record.default_records")
alegacy = pytest.importorskip("aiokafka.record.legacy_records")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# --------------------------------------------------------------------------
# Hand encoder (test-only)

def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n: int) -> bytes:
    return uvarint((n << 1) ^ (n >> 63))


def enc_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes | None]] = (), attrs: int = 0) -> bytes:
    body = bytearray([attrs]) + varint(ts_delta) + varint(offset_delta)
    for b in (key, value):
        body += varint(-1) if b is None else varint(len(b)) + b
    body += varint(len(headers))
    for k, v in headers:
        kb = k.encode()
        body += varint(len(kb)) + kb + (varint(-1) if v is None else varint(len(v)) + v)
    return varint(len(body)) + bytes(body)


def enc_batch(records: bytes, count: int, *, base_offset: int = 0, attrs: int = 0, lod: int | None = None,
              base_ts: int = 1000, max_ts: int = 2000, pid: int = -1, pepoch: int = -1, bseq: int = -1,
              epoch: int = 5, magic: int = 2, crc: int | None = None) -> bytes:
    tail = struct.pack(">hiqqqhii", attrs, count - 1 if lod is None else lod, base_ts, max_ts,
                       pid, pepoch, bseq, count) + records
    c = crc32c.crc32c(tail) if crc is None else crc
    head = struct.pack(">qiibI", base_offset, len(tail) + 9, epoch, magic, c)
    return head + tail


def enc_legacy(offset: int, magic: int, attrs: int, key: bytes | None, value: bytes | None,
               ts: int | None = None) -> bytes:
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", ts if ts is not None else -1)
    for b in (key, value):
        body += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def control_batch(ctype: int, coordinator_epoch: int, base_offset: int = 50, pid: int = 9) -> bytes:
    rec = enc_record(0, 0, struct.pack(">hh", 0, ctype), struct.pack(">hi", 0, coordinator_epoch))
    return enc_batch(rec, 1, base_offset=base_offset, attrs=0x30, pid=pid, pepoch=2, bseq=-1)


def test_hand_encoder_agrees_with_kafka_python():
    data = enc_batch(enc_record(0, 0, b"k", b"v", [("h", b"x")]) + enc_record(1, 5, None, b"w"), 2,
                     base_offset=10, base_ts=1000, max_ts=1005)
    kb = kbuilders.DefaultRecordBatch(data)
    assert kb.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kb] == [
        (10, 1000, b"k", b"v", [("h", b"x")]), (11, 1005, None, b"w", [])]


# --------------------------------------------------------------------------
# Builders: v2

def has_codec(lib: str, codec: int) -> bool:
    if lib == "aiokafka" or codec in (0, 1):
        return True
    return {2: kcodec.has_snappy, 3: kcodec.has_lz4, 4: kcodec.has_zstd}[codec]()


RECS = [
    (0, 1_700_000_000_000, b"key-0", b"value-0", [("trace", b"abc"), ("null", None)]),
    (1, 1_700_000_000_005, None, b"value-1" * 50, []),
    (2, 1_699_999_999_990, b"", None, [("\u00e9t\u00e9", b"\x00\xff")]),   # earlier ts: negative delta
    (3, 1_700_000_000_100, b"k3", b"", []),
    (300, 1_700_000_123_456, b"big-delta", b"x" * 3000, [("h", b"")]),       # multi-byte varints
]


def build_v2(lib: str, codec: int, *, transactional=False, pid=-1, pepoch=-1, bseq=-1, recs=RECS) -> bytes:
    mod = kbuilders if lib == "kafka" else abuilders
    b = mod.DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                      producer_id=pid, producer_epoch=pepoch, base_sequence=bseq,
                                      batch_size=1 << 22)
    for off, ts, k, v, h in recs:
        b.append(off, timestamp=ts, key=k, value=v, headers=h)
    return bytes(b.build())


def with_base_offset(batch: bytes, base: int) -> bytes:
    return struct.pack(">q", base) + batch[8:]  # the CRC doesn't cover it (as a broker rewrites it)


@pytest.mark.parametrize("lib", ["kafka", "aiokafka"])
@pytest.mark.parametrize("codec", range(5), ids=CODECS)
def test_v2_builder_roundtrip(lib, codec):
    if not has_codec(lib, codec):
        pytest.skip(f"{lib} lacks {CODECS[codec]}")
    data = with_base_offset(build_v2(lib, codec, transactional=True, pid=4242, pepoch=7, bseq=100), 1000)
    rs = decode_records(data)
    assert not rs.partial_tail and rs.error is None and len(rs) == 1
    batch = rs[0]
    assert isinstance(batch, RecordBatch)
    assert (batch.base_offset, batch.magic, batch.codec, batch.crc_valid) == (1000, 2, CODECS[codec], True)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 100)
    assert batch.transactional and not batch.control and batch.timestamp_type == "create_time"
    assert batch.record_count == 5 and batch.last_offset_delta == 300 and batch.last_offset == 1300
    assert batch.base_timestamp == RECS[0][1]
    assert batch.max_timestamp == max(r[1] for r in RECS)
    assert (batch.decompressed_size is None) == (codec == 0)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records]
    assert got == [(1000 + o, ts, k, v, h) for o, ts, k, v, h in RECS]
    assert all(r.control is None and r.attributes == 0 for r in batch.records)

    s = summarize(data)
    assert s.error is None and not s.partial_tail
    assert (s.magics, s.batch_count, s.record_count, s.codec) == ((2,), 1, 5, CODECS[codec])
    assert (s.first_offset, s.last_offset) == (1000, 1300)
    assert (s.first_timestamp, s.max_timestamp) == (RECS[0][1], batch.max_timestamp)
    assert (s.producer_id, s.producer_epoch, s.base_sequence) == (4242, 7, 100)
    assert s.transactional and not s.control and s.crc_checked and s.crc_failures == []
    assert s.total_bytes == len(data)
    json.dumps(s.to_dict())
    json.dumps(rs.to_dict())



def test_a_span_of_a_body_is_summarized_as_its_slice():
    # What the compiled body decoders call: the records field's bytes inside the body, not sliced out first.
    data = with_base_offset(build_v2("kafka", 0, transactional=False, pid=1, pepoch=0, bseq=0), 7)
    body = b"\x01\x02" + data + b"\x03"
    got, want = summarize_span(body, 2, 2 + len(data)), summarize(data)
    assert got.to_dict() == want.to_dict() and got.data == data
    assert summarize_span(body, 2, 2).to_dict() == summarize(b"").to_dict()
    for start, end in ((3, 2), (-1, 2), (0, len(body) + 1)):
        with pytest.raises(IndexError):
            summarize_span(body, start, end)

def test_several_batches_and_codecs_in_one_field():
    parts = [with_base_offset(build_v2("aiokafka", c, recs=RECS[:2]), 10 * c) for c in range(5)]
    data = b"".join(parts)
    rs = decode_records(data)
    assert [b.codec for b in rs] == CODECS
    assert [r.offset for r in rs.records()] == [o for c in range(5) for o in (10 * c, 10 * c + 1)]
    s = summarize(data)
    assert (s.batch_count, s.record_count, s.codec, s.first_offset, s.last_offset) == (5, 10, "mixed", 0, 41)


def test_summarize_never_decompresses_v2_batches(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("summarize decompressed")

    for name in ("decompress", "gunzip", "snappy_decompress", "lz4_decompress", "zstd_decompress"):
        monkeypatch.setattr(codecs_mod, name, boom)
    for mod in (cramjam.gzip, cramjam.snappy, cramjam.lz4, cramjam.zstd):
        for fn in [n for n in dir(mod) if n.startswith("decompress")]:
            monkeypatch.setattr(mod, fn, boom)
    monkeypatch.setattr(zlib, "decompressobj", boom)
    monkeypatch.setattr(zlib, "decompress", boom)
    data = b"".join(build_v2("aiokafka", c) for c in range(1, 5))
    s = summarize(data)
    assert s.error is None and (s.batch_count, s.record_count) == (4, 20)
    # (A legacy wrapper has no count in any header: the summary opens that one; see below.)
    with pytest.raises(AssertionError, match="summarize decompressed"):  # the patch does bite
        decode_records(data)


# --------------------------------------------------------------------------
# Control batches, LogAppendTime, delete horizon

def test_control_batches_commit_and_abort():
    data = control_batch(1, 17, base_offset=50) + control_batch(0, 18, base_offset=51)
    rs = decode_records(data)
    commit, abort = rs[0], rs[1]
    assert commit.control and commit.transactional and commit.producer_id == 9
    c = commit.records[0].control
    assert (c.version, c.type, c.type_name, c.value_version, c.coordinator_epoch) == (0, 1, "COMMIT", 0, 17)
    assert abort.records[0].control.type_name == "ABORT" and abort.records[0].control.coordinator_epoch == 18
    assert commit.records[0].offset == 50
    s = summarize(data)
    assert s.control and s.transactional and s.record_count == 2 and s.last_offset == 51


def test_kraft_control_record_value_left_opaque():
    rec = enc_record(0, 0, struct.pack(">hh", 0, 2), b"\x00\x00opaque")
    rs = decode_records(enc_batch(rec, 1, attrs=0x20))
    ctl = rs[0].records[0].control
    assert (ctl.type_name, ctl.coordinator_epoch) == ("LEADER_CHANGE", None)
    assert rs[0].records[0].value == b"\x00\x00opaque"


def test_log_append_time_uses_max_timestamp():
    recs = enc_record(0, 1, b"a", b"1") + enc_record(1, 2, b"b", b"2")
    rs = decode_records(enc_batch(recs, 2, attrs=0x08 | 0x40, base_ts=1000, max_ts=9999))
    b = rs[0]
    assert b.timestamp_type == "log_append_time" and b.delete_horizon
    assert [r.timestamp for r in b.records] == [9999, 9999]
    assert [r.timestamp_delta for r in b.records] == [1, 2]


def test_empty_batch_after_compaction():
    data = enc_batch(b"", 0, base_offset=7, lod=3)
    rs = decode_records(data)
    assert rs[0].records == [] and rs[0].last_offset == 10
    s = summarize(data)
    assert (s.record_count, s.first_offset, s.last_offset) == (0, 7, 10)


def test_xerial_snappy_batch():
    recs = b"".join(enc_record(i, i, b"k%d" % i, b"v" * 200) for i in range(50))
    framed = bytearray(XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(recs), 1000):
        block = bytes(cramjam.snappy.compress_raw(recs[i:i + 1000]))
        framed += struct.pack(">i", len(block)) + block
    rs = decode_records(enc_batch(bytes(framed), 50, attrs=2))
    assert rs[0].codec == "snappy" and rs[0].crc_valid
    assert [r.key for r in rs[0].records] == [b"k%d" % i for i in range(50)]


# --------------------------------------------------------------------------
# Legacy message sets

def build_legacy(lib: str, magic: int, codec: int, n: int, keys=True) -> bytes:
    mod = klegacy if lib == "kafka" else alegacy
    b = mod.LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 22)
    for i in range(n):
        b.append(i, timestamp=5000 + i, key=(b"k%d" % i) if keys and i % 2 == 0 else None, value=b"v%d" % i * 20)
    return bytes(b.build())


# aiokafka refuses lz4 in magic 0 message sets (Kafka 0.8/0.9 had none), so that pair is not built.
LEGACY_CASES = [(lib, magic, codec) for lib in ("kafka", "aiokafka") for magic in (0, 1) for codec in range(4)
                if not (lib == "aiokafka" and magic == 0 and codec == 3)]


@pytest.mark.parametrize("lib, magic, codec", LEGACY_CASES,
                         ids=[f"{lib}-m{magic}-{CODECS[codec]}" for lib, magic, codec in LEGACY_CASES])
def test_legacy_builder_roundtrip(lib, magic, codec):
    if not has_codec(lib, codec):
        pytest.skip(f"{lib} lacks {CODECS[codec]} (install the test extras)")
    raw = build_legacy(lib, magic, codec, 4)
    # As a broker serves it: a wrapper carries the absolute offset of its last inner message.
    data = with_base_offset(raw, 103 if magic == 1 else 0) if codec else raw
    rs = decode_records(data)
    assert rs.error is None and not rs.partial_tail
    leaves = list(rs.records())
    want_offsets = [100, 101, 102, 103] if (codec and magic == 1) else [0, 1, 2, 3]
    assert [m.offset for m in leaves] == want_offsets
    assert [m.key for m in leaves] == [b"k0", None, b"k2", None]
    assert [m.value for m in leaves] == [b"v%d" % i * 20 for i in range(4)]
    assert [m.timestamp for m in leaves] == ([5000, 5001, 5002, 5003] if magic == 1 else [None] * 4)
    assert all(m.crc_valid and m.magic == magic and m.headers == [] for m in leaves)
    top = rs[0]
    assert isinstance(top, LegacyMessage) and top.codec == CODECS[codec] and top.crc_valid
    s = summarize(data)
    assert s.error is None and s.magics == (magic,) and s.codec == CODECS[codec] and s.crc_failures == []
    if codec:
        # The summary opens the wrapper to count it; offsets as the full decode gives them.
        assert (s.batch_count, s.record_count, s.legacy_wrappers) == (1, 4, 1)
        assert (s.first_offset, s.last_offset) == ((100, 103) if magic == 1 else (0, 3))
        # As the producer sent it: kafka-python's wrapper offset is 0, so the relative offsets stand.
        p = summarize(raw)
        assert (p.record_count, p.first_offset, p.last_offset) == (4, 0, 3)
    else:
        assert (s.batch_count, s.record_count, s.first_offset, s.last_offset) == (4, 4, 0, 3)
    json.dumps(rs.to_dict())


def test_legacy_lz4_broken_header_checksum_quirk():
    """Kafka < 0.10 wrote the lz4 frame header checksum over the wrong bytes for magic 0."""
    if not kcodec.has_lz4():
        pytest.skip("kafka-python has no lz4")
    try:
        data = build_legacy("kafka", 0, 3, 3)
    except RuntimeError as e:
        pytest.skip(str(e))
    top = decode_records(data)[0]
    frame = top.value
    with pytest.raises(cramjam.DecompressionError):  # a strict frame reader refuses it
        cramjam.lz4.decompress(frame)
    assert [m.value for m in top.leaves()] == [b"v%d" % i * 20 for i in range(3)]


def test_legacy_hand_built_wrappers_and_log_append_time():
    inner = b"".join(enc_legacy(i, 1, 0, None, b"m%d" % i, ts=10 + i) for i in range(3))
    lat = enc_legacy(502, 1, 1 | 0x08, None, gzip.compress(inner), ts=777)
    magic0_inner = b"".join(enc_legacy(40 + i, 0, 0, b"k", b"z") for i in range(2))
    m0 = enc_legacy(41, 0, 1, None, gzip.compress(magic0_inner))
    rs = decode_records(lat + m0)
    a, b = rs[0], rs[1]
    assert [(m.offset, m.wire_offset, m.timestamp, m.wire_timestamp) for m in a.inner] == [
        (500, 0, 777, 10), (501, 1, 777, 11), (502, 2, 777, 12)]
    assert a.timestamp_type == "log_append_time"
    assert [m.offset for m in b.inner] == [40, 41]  # magic 0: absolute as written
    s = summarize(lat + m0)
    assert s.magics == (0, 1) and s.first_timestamp == 777 and s.max_timestamp == 777


def test_legacy_nesting_depth_bound():
    leaf = enc_legacy(0, 1, 0, None, b"deep", ts=1)
    mid = enc_legacy(0, 1, 1, None, gzip.compress(leaf), ts=1)
    top = enc_legacy(9, 1, 1, None, gzip.compress(mid), ts=1)
    rs = decode_records(top)  # Kafka's own bound: a wrapper holds plain messages
    inner = rs[0].inner[0]
    assert inner.inner is None and "nesting depth 2" in inner.error
    assert list(rs.records()) == []
    rs3 = decode_records(top, max_depth=3)
    assert [(m.offset, m.value) for m in rs3.records()] == [(9, b"deep")]
    bomb = leaf
    for _ in range(50):  # absurd nesting: stops at the bound, no recursion blow-up
        bomb = enc_legacy(0, 1, 1, None, gzip.compress(bomb), ts=1)
    assert "nesting depth" in decode_records(bomb, max_depth=4)[0].inner[0].inner[0].inner[0].error


def test_mixed_legacy_and_v2():
    data = enc_legacy(3, 1, 0, b"a", b"b", ts=50) + enc_batch(enc_record(0, 0, None, b"c"), 1, base_offset=4)
    rs = decode_records(data)
    assert [type(b).__name__ for b in rs] == ["LegacyMessage", "RecordBatch"]
    assert [(r.offset, r.value) for r in rs.records()] == [(3, b"b"), (4, b"c")]
    s = summarize(data)
    assert (s.magics, s.batch_count, s.record_count, s.first_offset, s.last_offset) == ((1, 2), 2, 2, 3, 4)


# --------------------------------------------------------------------------
# Corruption, truncation, absurd values

def test_crc_corruption_is_flagged_not_fatal():
    good = build_v2("kafka", 0)
    bad = bytearray(good)
    i = bad.index(b"value-0")
    bad[i] ^= 0x20
    data = bytes(bad) + good
    rs = decode_records(data)
    assert [b.crc_valid for b in rs] == [False, True]
    assert rs[0].records[0].value == b"Value-0"
    s = summarize(data)
    assert s.crc_failures == [0] and s.batch_count == 2
    assert summarize(data, check_crc=False).crc_failures == []
    assert decode_records(data, check_crc=False)[0].crc_valid is None

    leg = bytearray(enc_legacy(0, 1, 0, b"k", b"value", ts=1))
    leg[-1] ^= 1
    assert decode_records(bytes(leg))[0].crc_valid is False
    assert summarize(bytes(leg)).crc_failures == [0]


@pytest.mark.parametrize("cut", [1, 5, 16, 17, 60, 61, 100])
def test_partial_tail(cut):
    one = with_base_offset(build_v2("aiokafka", 0), 0)
    two = with_base_offset(build_v2("aiokafka", 3), 301)
    third = with_base_offset(build_v2("aiokafka", 0), 602)
    data = one + two + third[:cut]
    rs = decode_records(data)  # strict: a short tail is not an error
    assert rs.partial_tail and rs.tail_bytes == cut and rs.error is None
    assert len(rs) == 2 and [r.offset for r in rs.records()][-1] == 601
    s = summarize(data)
    assert s.partial_tail and s.tail_bytes == cut and s.error is None
    assert (s.batch_count, s.record_count, s.last_offset) == (2, 10, 601)


def test_partial_tail_legacy():
    data = enc_legacy(0, 0, 0, None, b"a") + enc_legacy(1, 0, 0, None, b"bbbbbbbbbb")[:-3]
    rs = decode_records(data)
    assert rs.partial_tail and len(rs) == 1
    assert summarize(data).partial_tail


def test_absurd_record_count():
    data = enc_batch(enc_record(0, 0, b"k", b"v"), 2**31 - 1)
    t = time.perf_counter()
    with pytest.raises(RecordsBadLength, match="record count 2147483647"):
        decode_records(data)
    assert time.perf_counter() - t < 0.1
    s = summarize(data)
    assert "record count" in s.error and s.error_offset == 0 and s.batch_count == 0
    with pytest.raises(RecordsBadLength, match="negative record count"):
        decode_records(enc_batch(b"", -5))
    # Compressed: checked against the decompressed size.
    with pytest.raises(RecordsBadLength, match="record count"):
        decode_records(enc_batch(gzip.compress(enc_record(0, 0, None, b"v")), 10**9, attrs=1))


def test_record_count_below_content():
    recs = enc_record(0, 0, None, b"a") + enc_record(1, 0, None, b"b")
    with pytest.raises(RecordsBadLength, match="bytes left after the 1 declared records"):
        decode_records(enc_batch(recs, 1))


@pytest.mark.parametrize("body, exc, match", [
    (bytes([0]) + varint(0) + varint(0) + varint(-5) + varint(-1) + varint(0), RecordsBadLength, "key length -5"),
    (bytes([0]) + varint(0) + varint(0) + varint(100) + varint(-1) + varint(0), RecordsBadLength, "key length 100"),
    (bytes([0]) + varint(0) + varint(0) + varint(-1) + varint(-2) + varint(0), RecordsBadLength, "value length -2"),
    (bytes([0]) + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(-3), RecordsBadLength, "header count -3"),
    (bytes([0]) + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(1) + varint(-1) + varint(-1),
     RecordsBadLength, "header key length -1"),
    (bytes([0]) + b"\xff" * 12, RecordsBadVarint, "longer than 10 bytes"),
    (bytes([0]) + varint(0) + b"\xff" * 6, RecordsBadVarint, "longer than 5 bytes"),
])
def test_malformed_record(body, exc, match):
    data = enc_batch(varint(len(body)) + body, 1)
    with pytest.raises(exc, match=match):
        decode_records(data)
    rs = decode_records(data + enc_batch(enc_record(0, 0, None, b"ok"), 1, base_offset=1), strict=False)
    assert rs.error is None and match in rs[0].error and rs[0].records == []
    assert rs[1].records[0].value == b"ok"  # framing intact: the next batch still decodes


def test_error_classes_are_both_kinds():
    assert issubclass(RecordsBadLength, BadLength) and issubclass(RecordsBadLength, RecordsError)
    assert issubclass(RecordsBadVarint, BadVarint) and issubclass(RecordsUnderflow, Underflow)


def test_record_length_and_underflow():
    with pytest.raises(RecordsBadLength, match="record length -1"):
        decode_records(enc_batch(varint(-1) + b"\x00" * 10, 1))
    with pytest.raises(RecordsBadLength, match="record length 500"):
        decode_records(enc_batch(varint(500) + b"\x00" * 10, 1))
    rec = enc_record(0, 0, b"k", b"v")
    longer = varint(len(rec) - 1 + 2) + rec[1:] + b"\x00\x00"   # length says 2 more than the fields
    with pytest.raises(RecordsBadLength, match="but its fields take"):
        decode_records(enc_batch(longer, 1))
    # Compressed records ending mid-record: runs past the decompressed buffer.
    with pytest.raises(RecordsError):
        decode_records(enc_batch(gzip.compress(rec[:-1]), 1, attrs=1))


def test_bad_framing():
    with pytest.raises(RecordsBadLength, match="batch length -1"):
        decode_records(struct.pack(">qi", 0, -1) + b"\x00" * 4 + b"\x02" + b"\x00" * 60)
    with pytest.raises(RecordsError, match="unknown magic 7"):
        decode_records(struct.pack(">qi", 0, 60) + b"\x00" * 4 + b"\x07" + b"\x00" * 60)
    with pytest.raises(RecordsBadLength, match="size 3"):
        decode_records(struct.pack(">qi", 0, 3) + b"\x00" * 4 + b"\x01" + b"\x00" * 60)
    good = enc_batch(enc_record(0, 0, None, b"v"), 1)
    rs = decode_records(good + struct.pack(">qi", 0, 60) + b"\x00" * 4 + b"\x07" + b"\x00" * 60, strict=False)
    assert len(rs) == 1 and "unknown magic 7" in rs.error and rs.error_offset == len(good)
    s = summarize(good + struct.pack(">qi", 0, 60) + b"\x00" * 4 + b"\x07")
    assert s.batch_count == 1 and "unknown magic" in s.error and s.error_offset == len(good)


def test_legacy_malformed():
    msg = bytearray(enc_legacy(0, 0, 0, b"key", b"value"))
    struct.pack_into(">i", msg, 18, 1000)  # key length past the message
    with pytest.raises(RecordsBadLength, match="key length 1000"):
        decode_records(bytes(msg))
    wrapper = enc_legacy(5, 1, 1, None, None, ts=1)
    with pytest.raises(RecordsError, match="null value"):
        decode_records(wrapper)
    assert "null value" in decode_records(wrapper, strict=False)[0].error
    garbage = enc_legacy(5, 1, 1, None, gzip.compress(b"\x00" * 30), ts=1)
    with pytest.raises(RecordsError, match="wrapper at byte 0"):
        decode_records(garbage)
    corrupt = enc_legacy(5, 1, 2, None, b"\xff\xff\xff\xff\x0f", ts=1)
    with pytest.raises(DecompressionError):
        decode_records(corrupt)
    half = gzip.compress(enc_legacy(0, 1, 0, None, b"a", ts=1) + enc_legacy(1, 1, 0, None, b"b", ts=1)[:-2])
    rs = decode_records(enc_legacy(9, 1, 1, None, half, ts=1), strict=False)
    assert [m.value for m in rs[0].inner] == [b"a"] and "inner message at byte" in rs[0].error


def test_summary_counts_legacy_wrappers_within_the_cap():
    inner = b"".join(enc_legacy(i, 1, 0, None, b"v%d" % i, ts=1) for i in range(5))
    wrapper = enc_legacy(44, 1, 1, None, gzip.compress(inner), ts=1)       # as served: absolute 40..44
    plain = enc_legacy(45, 1, 0, None, b"x", ts=2)
    s = summarize(wrapper + plain)
    assert (s.batch_count, s.record_count, s.legacy_wrappers, s.first_offset, s.last_offset) == (2, 6, 1, 40, 45)
    # Nested compression (Kafka never writes it), a damaged inner set, or the cap: count unknown, not wrong.
    nested = enc_legacy(0, 1, 1, None, gzip.compress(wrapper), ts=1)
    cut = enc_legacy(0, 1, 1, None, gzip.compress(inner[:-3]), ts=1)
    for data in (nested, cut):
        s = summarize(data + plain)
        assert (s.record_count, s.legacy_wrappers, s.batch_count, s.error) == (None, 1, 2, None)
    bomb = enc_legacy(0, 0, 1, None, gzip.compress(bytes(4 << 20)), ts=None)
    s = summarize(bomb + plain, max_decompressed=1 << 20)
    assert (s.record_count, s.batch_count, s.last_offset) == (None, 2, 45)


def test_decompression_bomb_in_batch():
    zeros = bytes(8 << 20)
    recs = enc_record(0, 0, None, zeros)
    data = enc_batch(bytes(cramjam.zstd.compress(recs)), 1, attrs=4)
    assert len(data) < 10_000
    with pytest.raises(DecompressionLimit):
        decode_records(data, max_decompressed=1 << 20)
    assert len(decode_records(data)[0].records[0].value) == 8 << 20
    # The cap is for the whole call, not per batch.
    small = enc_batch(gzip.compress(enc_record(0, 0, None, bytes(600_000))), 1, attrs=1)
    decode_records(small, max_decompressed=1 << 20)
    with pytest.raises(DecompressionLimit):
        decode_records(small + small, max_decompressed=1 << 20)
    rs = decode_records(small + small, max_decompressed=1 << 20, strict=False)
    assert rs[0].error is None and "DecompressionLimit" in rs[1].error


def test_unknown_codec_in_batch():
    with pytest.raises(DecompressionError, match="unknown compression codec 6"):
        decode_records(enc_batch(b"xx", 1, attrs=6))
    assert summarize(enc_batch(b"xx", 1, attrs=6)).codec == "unknown(6)"


def test_inputs_other_than_bytes():
    data = build_v2("aiokafka", 0)
    for form in (bytearray(data), memoryview(data)):
        assert decode_records(form)[0].records[0].key == b"key-0"
        assert summarize(form).record_count == 5
    assert summarize(None) == RecordsSummary() and len(decode_records(None)) == 0
    assert summarize(b"").batch_count == 0
    assert summarize("not bytes").error.startswith("internal error")  # type: ignore[arg-type]


def test_to_dict_renders_bytes():
    rs = decode_records(enc_batch(enc_record(0, 0, b"\x00\x01", b"text", [("h", b"\xff")]), 1))
    d = rs.to_dict()
    rec = d["batches"][0]["records"][0]
    assert (rec["key"], rec["value"], rec["headers"]) == ("base64:AAE=", "text", [{"key": "h", "value": "base64:/w=="}])
    assert rs.to_dict("hex")["batches"][0]["records"][0]["key"] == "0001"
    assert rs.to_dict("raw")["batches"][0]["records"][0]["key"] == b"\x00\x01"
    json.dumps(d)
    # The bytes themselves, and a value left out of range (an anomaly of its own), are not in the body.
    assert set(summarize(b"").to_dict()) == {f.name for f in dataclasses.fields(RecordsSummary)} - {"data", "out_of_range"}
    raw = build_v2("aiokafka", 0)
    assert summarize(raw).data is raw  # kept by reference for a later full decode
    assert summarize(bytearray(raw)).data == raw


def test_ten_thousand_records_is_fast():
    recs = [(i, 1_700_000_000_000 + i, b"key-%d" % i, b'{"n": %d}' % i, []) for i in range(10_000)]
    data = build_v2("aiokafka", 3, recs=recs)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        rs = decode_records(data)
        times.append(time.perf_counter() - t)
    assert len(rs[0].records) == 10_000 and rs[0].records[-1].value == b'{"n": 9999}'
    assert min(times) < 1.0, times  # ~20 ms on an idle dev box; generous for a loaded CI


# --------------------------------------------------------------------------
# Real captures (shared/public-captures beside the repo): entries found by their CRC

CAPTURES = Path(__file__).resolve().parents[2].parent / "shared" / "public-captures"


def _crc_valid_entries(raw: bytes):
    """Every (start, end) in a capture file where a batch / legacy message with a valid CRC sits."""
    for p in range(len(raw) - 30):
        magic = raw[p + 16]
        if magic > 2:
            continue
        length = struct.unpack_from(">i", raw, p + 8)[0]
        end = p + 12 + length
        if length < 14 or end > len(raw):
            continue
        if magic == 2:
            if length >= 49 and crc32c.crc32c(raw[p + 21:end]) == struct.unpack_from(">I", raw, p + 17)[0]:
                yield p, end
        elif zlib.crc32(raw[p + 16:end]) == struct.unpack_from(">I", raw, p + 12)[0]:
            yield p, end


@pytest.mark.parametrize("name, magic, key, value_prefix, timestamp, headers", [
    ("ntop__nDPI__kafka-2024-05-rdkafka.pcapng", 2, None, b'{"timestamp":"1681878307"', 1681878307000, []),
    ("ntop__nDPI__kafka-2023-12-original.pcapng", 2, None, b"Hello world!", 1703132762073, []),
    ("deepflowio__deepflow__00-produce-v7-sw8.pcap", 2, b"MyKey", b"Hello Kafka", 1700037570325, ["sw8"]),
    ("deepflowio__deepflow__00-produce-v2.pcap", 1, None, b"Message without compression", 1479416797449, []),
    ("40t__go-sniffer__kafka.pcap", 0, None, b'{"agent": {', None, []),
])
def test_real_capture_records(name, magic, key, value_prefix, timestamp, headers):
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    raw = path.read_bytes()
    start, end = next(_crc_valid_entries(raw))
    data = raw[start:end]
    s = summarize(data)
    assert s.error is None and s.magics == (magic,) and s.crc_failures == [] and s.record_count == 1
    (rec,) = list(decode_records(data).records())
    assert rec.key == key and rec.value.startswith(value_prefix) and rec.timestamp == timestamp
    assert [k for k, _ in rec.headers] == headers


# --------------------------------------------------------------------------
# Fuzzing

VALID = [
    build_v2("aiokafka", 0),
    build_v2("aiokafka", 1),
    build_v2("aiokafka", 3, recs=RECS[:2]),
    control_batch(1, 3),
    enc_legacy(0, 1, 0, b"k", b"v", ts=5),
    enc_legacy(2, 1, 1, None, gzip.compress(enc_legacy(0, 1, 0, None, b"a", ts=1)), ts=1),
]


def _check(data: bytes) -> None:
    s = summarize(data)
    assert isinstance(s, RecordsSummary)
    json.dumps(s.to_dict())
    try:
        rs = decode_records(data, max_decompressed=1 << 20)
    except RecordsError:
        pass
    else:
        json.dumps(rs.to_dict())
    rs = decode_records(data, max_decompressed=1 << 20, strict=False)  # never raises
    json.dumps(rs.to_dict())


@settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data):
    _check(data)


@settings(max_examples=600, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       st.integers(0, 10_000))
def test_fuzz_mutated_batches(base, flips, cut):
    buf = bytearray(base)
    for i, v in flips:
        buf[i % len(buf)] = v
    _check(bytes(buf[: max(0, len(buf) - cut % (len(buf) + 1))]))
