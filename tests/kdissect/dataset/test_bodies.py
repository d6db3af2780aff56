"""The bodies' JSON: written in C (hotpath.speedups.plain_json, summary_json) as orjson writes them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from capture import read_capture
from dissector import records
from hotpath import is_compiled
from dissector.events import Exchange
from dissector.records import RecordsSummary
from hotpath import _speedups_pure
from hotpath.speedups import plain_json
from kdissect.dataset import bodies
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


def _sample_bodies() -> Iterator[dict[str, Any]]:
    """Every decoded body of the samples' exchanges."""
    for pcap in SAMPLES:
        for ce in read_capture(pcap):
            if isinstance(ce.event, Exchange):
                for msg in (ce.event.request, ce.event.response):
                    if msg is not None and msg.body is not None:
                        yield msg.body


def test_every_records_summary_of_the_samples_is_written_as_orjson_writes_its_dict() -> None:
    seen = 0
    for body in _sample_bodies():
        found = _summaries(body)
        for s in found:
            assert s.json_bytes() == orjson.dumps(s.to_dict())
        if found:
            assert body_bytes(body) == orjson.dumps(_as_dicts(body), option=orjson.OPT_PASSTHROUGH_DATACLASS)
        seen += len(found)
    assert seen > 100


def test_a_summary_whose_json_the_c_writer_declines_is_still_in_the_body() -> None:
    s = RecordsSummary(total_bytes=3, error='bad "quote"')
    assert body_bytes({"records": s}) == orjson.dumps({"records": s.to_dict()})
    if is_compiled(records):
        assert s.json_bytes() is None
    else:
        assert s.json_bytes() == orjson.dumps(s.to_dict())      # the pure twin writes what orjson writes


def _by_orjson(body: Any) -> bytes:
    """The body as orjson alone writes it, through bodies' default: body_bytes before plain_json."""
    try:
        return orjson.dumps(body, default=bodies._default, option=orjson.OPT_PASSTHROUGH_DATACLASS)
    except orjson.JSONEncodeError:
        return orjson.dumps(body, default=bodies._default,
                            option=orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_NON_STR_KEYS)


def test_every_body_of_the_samples_is_written_as_orjson_writes_it() -> None:
    """The C writer (plain_json) writes nearly every body, byte for byte as orjson; the rest go to orjson."""
    written = total = 0
    for body in _sample_bodies():
        assert body_bytes(body) == _by_orjson(body)
        total += 1
        written += plain_json(body, RecordsSummary, RecordsSummary.json_values) is not None
    assert total > 1000
    if plain_json is not _speedups_pure.plain_json:
        assert written > 0.9 * total, (written, total)
