"""0.7 message sets: CRCs, codecs, nesting, byte-position offsets, the bomb cap."""

from __future__ import annotations

import gzip

from dissector.v07.messages import decode_message_set, summarize
from tests.dissector.v07.build import gzip_wrapper, message, snappy_wrapper


def test_plain_messages_get_byte_position_offsets_from_the_fetch_offset():
    data = message(b"hello") + message(b"world!")          # 14 + 15 bytes
    s = summarize(data, 1000)
    assert (s.batch_count, s.record_count, s.codec, s.crc_failures) == (2, 2, "none", [])
    assert (s.first_offset, s.last_offset, s.base_offset) == (1000, 1014, 1000)
    ms = decode_message_set(data, 1000)
    assert [(m.offset, m.payload, m.magic, m.crc_valid) for m in ms.leaves()] == [
        (1000, b"hello", 0, True), (1014, b"world!", 0, True)]


def test_produce_sets_have_no_offsets():
    s = summarize(message(b"x"))
    assert s.first_offset is None and s.last_offset is None
    assert [m.offset for m in decode_message_set(message(b"x")).leaves()] == [None]


def test_gzip_and_snappy_wrappers_open_inner_messages_at_the_wrapper_offset():
    inner = message(b"a") + message(b"b")
    data = message(b"first") + gzip_wrapper(inner) + snappy_wrapper(message(b"c")) + snappy_wrapper(
        message(b"d"), xerial=False)
    s = summarize(data, 0)
    assert s.codec == "mixed" and s.legacy_wrappers == 3 and s.batch_count == 4
    assert s.record_count == 5                          # wrappers opened to count what they hold
    ms = decode_message_set(data, 0)
    gz_at = len(message(b"first"))
    sn_at = gz_at + len(gzip_wrapper(inner))
    assert [(m.offset, m.payload) for m in ms.leaves()] == [
        (0, b"first"), (gz_at, b"a"), (gz_at, b"b"), (sn_at, b"c"),
        (sn_at + len(snappy_wrapper(message(b"c"))), b"d")]
    assert [m.codec for m in ms.messages] == ["none", "gzip", "snappy", "snappy"]


def test_nested_compression_is_followed():
    data = gzip_wrapper(snappy_wrapper(message(b"deep") + message(b"er")))
    ms = decode_message_set(data, 50)
    assert [(m.offset, m.payload) for m in ms.leaves()] == [(50, b"deep"), (50, b"er")]
    assert ms.messages[0].inner[0].codec == "snappy"


def test_nesting_past_the_limit_is_reported_not_followed():
    data = message(b"z")
    for _ in range(6):
        data = gzip_wrapper(data)
    ms = decode_message_set(data, 0)
    deepest = ms.messages[0]
    while deepest.inner:
        deepest = deepest.inner[0]
    assert "nesting depth" in deepest.error


def test_crc_mismatch_is_found_and_the_message_kept():
    data = message(b"ok") + message(b"bad", bad_crc=True)
    s = summarize(data, 0)
    assert s.crc_failures == [len(message(b"ok"))]
    ms = decode_message_set(data, 0)
    assert [m.crc_valid for m in ms.messages] == [True, False]
    assert ms.messages[1].payload == b"bad"


def test_a_cut_last_message_is_a_partial_tail():
    data = message(b"whole") + message(b"cut off here")[:-3]
    s = summarize(data, 0)
    assert s.partial_tail and s.batch_count == 1 and s.error is None
    ms = decode_message_set(data, 0)
    assert ms.partial_tail and len(ms.messages) == 1


def test_bad_magic_stops_with_an_error():
    data = message(b"ok") + b"\x00\x00\x00\x06\x07" + b"\x00" * 5
    s = summarize(data, 0)
    assert s.batch_count == 1 and "magic 7" in s.error
    assert "magic 7" in decode_message_set(data, 0).error


def test_a_gzip_bomb_stops_at_the_cap():
    bomb = message(gzip.compress(message(b"\x00" * (4 << 20))), 1)
    ms = decode_message_set(bomb, 0, max_decompressed=1 << 20)
    assert ms.messages[0].inner == [] and "DecompressionLimit" in ms.messages[0].error
    s = summarize(bomb, 0, max_decompressed=1 << 20)
    assert s.record_count is None and s.batch_count == 1    # the count is unknown, not a guess


def test_garbage_never_raises():
    import random
    rng = random.Random(7)
    base = message(b"hello") + gzip_wrapper(message(b"x"))
    for _ in range(2000):
        b = bytearray(base)
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        summarize(bytes(b), 0)
        decode_message_set(bytes(b[: rng.randrange(len(b) + 1)]), 0)
