"""hotpath's C helpers (_speedups.pyx) and their pure twins (_speedups_pure.py): the same results.

Both run here side by side in one process, whichever build the rest of the run uses. CI sets
``KDISSECT_REQUIRE_COMPILED=1``: there a missing compiled module fails instead of skipping.
"""

from __future__ import annotations

import importlib
import os
import sys

import crc32c as package
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture.packet import IPV4_AT, fast_ipv4
from capture import shard
from capture.shard import share_of
from dissector.records import RecordsSummary
from hotpath import _speedups_pure
from tests.capture import pcaptools as pt


def _compiled():
    try:
        return importlib.import_module("hotpath._speedups")
    except ImportError:
        if os.environ.get("KDISSECT_REQUIRE_COMPILED"):
            pytest.fail("hotpath._speedups is not compiled: the install fell back to Python")
        pytest.skip("hotpath._speedups is not compiled")


@pytest.fixture(params=["compiled", "pure"])
def impl(request):
    return _compiled() if request.param == "compiled" else _speedups_pure


# Hypothesis tests take the implementation's name: a fixture is not reset between examples.
BOTH = ["compiled", "pure"]


def _impl(name: str):
    return _compiled() if name == "compiled" else _speedups_pure


def _frame_share(name: str):
    """The C frame hash, or its Python twin: capture.shard's, which is fast_ipv4 and share_of."""
    return _compiled().frame_share if name == "compiled" else shard.frame_share


@pytest.mark.parametrize("name", BOTH)
@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=5000), cut=st.tuples(st.integers(0, 5000), st.integers(0, 5000)))
def test_crc32c_of_a_slice_is_the_crc32c_packages(name: str, data: bytes, cut: tuple[int, int]) -> None:
    """Compiled, slices up to 4 KiB are summed by a table loop, larger ones by the package."""
    impl = _impl(name)
    start, end = sorted(min(c, len(data)) for c in cut)
    assert impl.crc32c_of(data, start, end) == package.crc32c(data[start:end])
    with pytest.raises(ValueError):
        impl.crc32c_of(data, start, len(data) + 1)
    with pytest.raises(ValueError):
        impl.crc32c_of(data, -1, end)


def test_crc32c_of_a_large_slice(impl) -> None:
    data = bytes(range(256)) * 100
    assert impl.crc32c_of(data, 7, len(data) - 3) == package.crc32c(data[7:-3])
    assert impl.crc32c_of(b"123456789", 0, 9) == 0xE3069283      # the algorithm's check value


_ADDR = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))


@pytest.mark.parametrize("name", BOTH)
@settings(max_examples=200, deadline=None)
@given(src=_ADDR, dst=_ADDR, sport=st.integers(0, 65535), dport=st.integers(0, 65535),
       count=st.integers(1, 9), framing=st.sampled_from([(1, pt.ether), (113, pt.sll), (276, pt.sll2),
                                                         (101, lambda ip: ip)]),
       options=st.sampled_from([b"", b"\x01\x01\x08\x0a" + bytes(8)]), cut=st.integers(0, 3))
def test_the_frame_hash_is_share_of_on_the_key_fast_ipv4_reads(name: str, src: str, dst: str, sport: int,
                                                               dport: int, count: int, framing: tuple,
                                                               options: bytes, cut: int) -> None:
    """Addresses and ports no test capture has, against share_of; -1 where fast_ipv4 does not read
    the frame (a cut IP header, a frame shorter than its IP length)."""
    frame_share = _frame_share(name)
    linktype, wrap = framing
    data = wrap(pt.ipv4(src, dst, pt.tcp(sport, dport, 1, 2, payload=b"kafka", options=options)))
    data = data[:len(data) - cut * 20]
    l3, et_at = IPV4_AT[linktype]
    seg = fast_ipv4(data, l3, et_at)
    want = -1 if seg is None else share_of(seg[0], count)
    padded = b"xy" + data + b"z"
    assert frame_share(padded, 2, len(data), l3, et_at, count) == want
    assert (seg is None) == (cut > 0)
    # Offsets no link type has (an IP header before the frame, an ethertype inside it) read nothing,
    # nor does a frame past the buffer's end or a share count of none.
    assert frame_share(padded, 2, len(data), -1, -1, count) == -1
    assert frame_share(padded, 2, len(data), 14, 13, count) == -1
    assert frame_share(padded, 2, len(data) + 2, l3, et_at, count) == -1
    assert frame_share(padded, 2, len(data), l3, et_at, 0) == -1


@pytest.mark.parametrize("name", BOTH)
def test_a_frame_that_is_not_tcp_over_plain_ipv4_has_no_share(name: str) -> None:
    frame_share = _frame_share(name)
    tcp = pt.tcp(9092, 40000, 1, 2, payload=b"kafka")
    frame = pt.ether(pt.ipv4("10.0.0.1", "10.0.0.2", tcp))
    assert frame_share(frame, 0, len(frame), 14, 12, 4) >= 0
    for at, value in ((14, 0x46), (23, 17), (20, 0x20)):        # IP options, UDP, a fragment
        changed = bytearray(frame)
        changed[at] = value
        assert frame_share(bytes(changed), 0, len(frame), 14, 12, 4) == -1
    assert frame_share(b"\x86\xdd" + frame[2:], 0, len(frame), 14, 0, 4) == -1


_INT = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 70), 1 << 70), st.sampled_from([0, -1]))
_ANY = st.one_of(st.none(), st.booleans(), _INT, st.text(max_size=8), st.floats(allow_nan=False))
_TEXT = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["zstd", "mixed", 'a"b', "a\\b", "t\tab", "é"]))


def test_the_summary_keys_are_a_records_summarys(impl) -> None:
    assert impl.SUMMARY_KEYS == tuple(RecordsSummary().to_dict())


@pytest.mark.parametrize("name", BOTH)
@settings(max_examples=300, deadline=None)
@given(ints=st.lists(st.one_of(st.none(), _INT), min_size=14, max_size=14),
       flags=st.lists(_ANY, min_size=4, max_size=4), texts=st.lists(_TEXT, min_size=2, max_size=2),
       magics=st.lists(_INT, max_size=3), failures=st.lists(st.one_of(_INT, _ANY), max_size=60),
       tuple_magics=st.booleans())
def test_a_summary_is_written_as_orjson_writes_its_dict_or_left_to_orjson(
        name: str, ints: list, flags: list, texts: list, magics: list, failures: list, tuple_magics: bool) -> None:
    """Values no decoder makes (ints past 64 bits, escaped text, floats where ints belong): the C
    writer declines them (None) rather than write them otherwise, and always writes plain values;
    the twin writes what orjson writes."""
    s = RecordsSummary()
    for key, value in zip(("total_bytes", "batch_count", "record_count", "legacy_wrappers", "first_offset",
                           "last_offset", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                           "base_sequence", "first_crc", "tail_bytes", "error_offset"), ints):
        setattr(s, key, value)
    s.transactional, s.control, s.crc_checked, s.partial_tail = flags
    s.codec, s.error = texts
    s.magics = tuple(magics) if tuple_magics else magics
    s.crc_failures = failures
    try:
        want = orjson.dumps(s.to_dict())
    except orjson.JSONEncodeError:
        want = None                                  # ints past 64 bits: orjson refuses them too
    text = _impl(name).summary_json(tuple(getattr(s, key) for key in _speedups_pure.SUMMARY_KEYS))
    if name == "pure":
        assert text == want
        return
    if text is not None:
        assert text == want
    plain = (all(type(v) is int and -(1 << 63) <= v < (1 << 63) for v in [*magics, *failures])
             and all(type(getattr(s, n)) is int and -(1 << 63) <= getattr(s, n) < (1 << 63)
                     for n in ("total_bytes", "batch_count", "legacy_wrappers", "tail_bytes"))
             and all(v is None or (type(v) is int and -(1 << 63) <= v < (1 << 63)) for v in ints)
             and all(type(v) is bool for v in flags)
             and all(v is None or (v.isascii() and v.isprintable() and '"' not in v and "\\" not in v)
                     for v in texts))
    assert (text is not None) == plain


def test_the_c_summary_json_takes_only_a_summarys_values() -> None:
    impl = _compiled()
    assert impl.summary_json((1, 2, 3)) is None
    assert impl.summary_json([0] * 22) is None


# Body-like values: what the generated decoders make (dicts with str keys, lists, ints, text, flags,
# None, records summaries) and what plain_json must leave to orjson (floats, bytes, int keys, big ints,
# text needing escapes, tuples of them).
_PLAIN_TEXT = st.one_of(st.text(max_size=20), st.text(alphabet='ab"\\\t\x1f\x7fé€\U0001F600 ', max_size=20))
_PLAIN_LEAF = st.one_of(st.none(), st.booleans(), _INT, _PLAIN_TEXT, st.floats(allow_nan=False), st.binary(max_size=4),
                        st.builds(RecordsSummary, total_bytes=_INT, codec=_TEXT,
                                  first_offset=st.one_of(st.none(), _INT)))
_PLAIN = st.recursive(_PLAIN_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.one_of(_PLAIN_TEXT, st.integers(0, 9)), inner, max_size=4)), max_leaves=12)


def _plain(value) -> bool:
    """Whether plain_json's C writer must write ``value`` (not decline it)."""
    def text(t: str) -> bool:
        return not any(c < " " or c in '"\\' for c in t)
    if value is None or type(value) is bool:
        return True
    if type(value) is int:
        return -(1 << 63) <= value < (1 << 63)
    if type(value) is str:
        return text(value)
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and text(k) and _plain(v) for k, v in value.items())
    if type(value) is RecordsSummary:
        return _compiled().summary_json(value.json_values()) is not None
    return False


def _as_dicts(value):
    if type(value) is RecordsSummary:
        return value.to_dict()
    if type(value) is dict:
        return {k: _as_dicts(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return [_as_dicts(v) for v in value]
    return value


@pytest.mark.parametrize("name", BOTH)
@settings(max_examples=600, deadline=None)
@given(value=_PLAIN)
def test_plain_json_writes_what_orjson_writes_or_declines(name: str, value) -> None:
    """Where it writes, both write orjson's bytes (a summary as its dict); the C writer declines
    only what it must leave to orjson: floats, bytes, int keys, ints past 64 bits, escaped text."""
    text = _impl(name).plain_json(value, RecordsSummary, RecordsSummary.json_values)
    try:
        want = orjson.dumps(_as_dicts(value))
    except orjson.JSONEncodeError:
        want = None
    if text is not None:
        assert text == want
    if name == "compiled":
        assert (text is not None) == _plain(value)


def test_plain_json_declines_a_subclass_and_what_nests_past_orjsons_depth() -> None:
    impl = _compiled()
    values = RecordsSummary.json_values
    assert impl.plain_json(type("D", (dict,), {})(a=1), RecordsSummary, values) is None
    deep: list = []
    for _ in range(300):
        deep = [deep]
    assert impl.plain_json(deep, RecordsSummary, values) is None
    want = b'{"a":[1,[2,null],true,"\xc3\xa9"]}'
    assert impl.plain_json({"a": [1, (2, None), True, "é"]}, RecordsSummary, values) == want


@pytest.mark.parametrize("name", BOTH)
@settings(max_examples=300, deadline=None)
@given(text=st.binary(max_size=40), key=st.binary(max_size=4), start=st.integers(-3, 45))
def test_find_is_bytes_find_from_within_the_text(name: str, text: bytes, key: bytes, start: int) -> None:
    # Small alphabets make matches and near-misses common.
    text, key = bytes(b % 3 for b in text), bytes(b % 3 for b in key)
    want = text.find(key, start) if 0 <= start <= len(text) else -1
    assert _impl(name).find(text, key, start) == want


def test_a_list_keeps_its_cells_through_a_reserve_and_none_after_a_clear(impl) -> None:
    cells = [object() for _ in range(5)]
    held = [sys.getrefcount(c) for c in cells]
    values = list(cells)
    assert impl.reserve_list(values, 20_000) == 0
    assert values == cells
    values.extend(range(19_000))
    assert len(values) == 19_005
    impl.clear_keeping_capacity(values)
    assert values == []
    assert [sys.getrefcount(c) for c in cells] == held       # the cleared cells were released
    values.append(1)
    assert values == [1]


def test_the_c_reserve_keeps_the_storage_a_clear_would_free() -> None:
    impl = _compiled()
    values: list = []
    impl.reserve_list(values, 10_000)
    room = sys.getsizeof(values)
    impl.clear_keeping_capacity(values)
    assert sys.getsizeof(values) == room > 10_000 * 8
