"""Splitting one capture by connection: every connection in exactly one share, decoded the same."""

from __future__ import annotations

from collections import defaultdict

import pytest

from capture import CaptureOptions, Pipeline
from capture.packet import reverse_key
from capture.shard import Share, ShareFilter, share_of
from tests.capture import pcaptools as pt


def interleaved(connections: int) -> list:
    records = []
    for i in range(connections):
        c = pt.Conversation(client=("10.0.0.1", 40000 + i), ts=1_700_000_000_000_000_000 + i * 1500, mss=60)
        c.handshake()
        c.send(True, pt.api_versions_request(1)).send(False, pt.api_versions_response(1))
        c.send(True, pt.metadata_request(2)).close()
        records += c.records
    records.sort(key=lambda r: r[0])
    return records


def by_connection(records: list, share: Share | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for ce in Pipeline(CaptureOptions(share=share)).run(records):
        out[ce.conn.id if ce.conn is not None else ""].append(repr(ce.event))
    return dict(out)


def test_both_directions_of_a_connection_fall_in_one_share() -> None:
    key = bytes([10, 0, 0, 1, 10, 0, 0, 2]) + (50312).to_bytes(2, "big") + (9092).to_bytes(2, "big")
    for n in (2, 3, 7):
        assert share_of(key, n) == share_of(reverse_key(key), n)
    assert share_of(key, 7) == 6    # CRC-32: the same in every process and on every machine


def test_each_connection_is_decoded_by_exactly_one_share_as_a_whole_run_decodes_it() -> None:
    records = interleaved(30)
    whole = by_connection(records, None)
    assert len(whole) == 30
    seen: dict[str, list[str]] = {}
    for k in range(3):
        part = by_connection(records, Share(k, 3))
        assert part, "30 connections over 3 shares: none empty"
        assert not seen.keys() & part.keys()
        seen.update(part)
    assert seen == whole


def test_a_share_remembers_foreign_connections_within_its_limit() -> None:
    f = ShareFilter(Share(0, 2), limit=4)
    keys = [bytes(8) + p.to_bytes(2, "big") + (9092).to_bytes(2, "big") for p in range(1000, 1100)]
    foreign = [k for k in keys if f.foreign(k)]
    assert foreign and len(foreign) < len(keys)
    assert all(f.foreign(k) for k in foreign) and not any(f.foreign(k) for k in keys if k not in foreign)


def test_a_share_must_exist() -> None:
    with pytest.raises(ValueError):
        Share(3, 3)
