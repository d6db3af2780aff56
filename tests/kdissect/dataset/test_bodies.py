"""The bodies' JSON: a records summary written by its own C writer reads as orjson writes its dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture import read_capture
from dissector import records
from hotpath import is_compiled
from dissector.events import Exchange
from dissector.records import RecordsSummary
from kdissect.dataset.bodies import body_bytes

SAMPLES = sorted((Path(__file__).resolve().parents[3] / "samples").glob("*.pcap"))


def _summaries(value: Any) -> list[RecordsSummary]:
    if isinstance(value, RecordsSummary):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _summaries(v)]
    if isinstance(value, list):
        return [s for v in value for s in _summaries(v)]
    return []


def _as_dicts(value: Any) -> Any:
    """The body with each summary replaced by its dict: what orjson was given before the C writer."""
    if type(value) is RecordsSummary:
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _as_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_dicts(v) for v in value]
    return value


def test_every_records_summary_of_the_samples_is_written_as_orjson_writes_its_dict() -> None:
    seen = 0
    for pcap in SAMPLES:
        for ce in read_capture(pcap):
            if not isinstance(ce.event, Exchange):
                continue
            for msg in (ce.event.request, ce.event.response):
                body = msg.body if msg is not None else None
                found = _summaries(body)
                for s in found:
                    text = s.json_bytes()
                    assert text is None if not is_compiled(records) else text == orjson.dumps(s.to_dict())
                if found:
                    assert body_bytes(body) == orjson.dumps(_as_dicts(body), option=orjson.OPT_PASSTHROUGH_DATACLASS)
                seen += len(found)
    assert seen > 100


_INT = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 70), 1 << 70), st.sampled_from([0, -1]))
_ANY = st.one_of(st.none(), st.booleans(), _INT, st.text(max_size=8), st.floats(allow_nan=False))
_TEXT = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["zstd", "mixed", 'a"b', "a\\b", "t\tab", "é"]))


@settings(max_examples=400, deadline=None)
@given(ints=st.lists(st.one_of(st.none(), _INT), min_size=14, max_size=14),
       flags=st.lists(_ANY, min_size=4, max_size=4), texts=st.lists(_TEXT, min_size=2, max_size=2), magics=st.lists(_INT, max_size=3),
       failures=st.lists(st.one_of(_INT, _ANY), max_size=60), tuple_magics=st.booleans())
def test_any_summary_is_written_as_orjson_writes_its_dict_or_left_to_orjson(
        ints: list, flags: list, texts: list, magics: list, failures: list, tuple_magics: bool) -> None:
    """Values no decoder makes (ints past 64 bits, escaped text, floats where ints belong): the C
    writer declines them (None) rather than write them otherwise; plain values it always writes."""
    s = RecordsSummary()
    for name, value in zip(("total_bytes", "batch_count", "record_count", "legacy_wrappers", "first_offset",
                            "last_offset", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                            "base_sequence", "first_crc", "tail_bytes", "error_offset"), ints):
        setattr(s, name, value)
    s.transactional, s.control, s.crc_checked, s.partial_tail = flags
    s.codec, s.error = texts
    s.magics = tuple(magics) if tuple_magics else magics
    s.crc_failures = failures
    try:
        want = orjson.dumps(s.to_dict())
    except orjson.JSONEncodeError:
        want = None                                  # ints past 64 bits: orjson refuses them too
    text = s.json_bytes()
    if not is_compiled(records):
        assert text is None
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


def test_a_summary_whose_json_the_c_writer_declines_is_still_in_the_body() -> None:
    s = RecordsSummary(total_bytes=3, error='bad "quote"')
    assert body_bytes({"records": s}) == orjson.dumps({"records": s.to_dict()})
    if is_compiled(records):
        assert s.json_bytes() is None
    else:
        pytest.skip("pure Python: the dict path only")
