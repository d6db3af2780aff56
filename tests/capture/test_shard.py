"""Splitting one capture by connection: every connection in exactly one share, decoded the same."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from capture import CaptureOptions, Pipeline, pcapfile
from capture.packet import IPV4_AT, fast_ipv4, reverse_key
from capture.rotation import open_captures
from capture.shard import Share, ShareFilter, share_of
from hotpath import is_compiled
from tests.capture import pcaptools as pt
from tests.capture.test_rotation import need

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


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


def _dropped(records: list, share: Share) -> list:
    """Which of ``records`` a reader dropping ``share``'s foreign packets drops (None) and keeps, worked
    out in Python: fast-path TCP/IPv4 frames of another share's connections, never a 4096th record."""
    out = []
    for i, rec in enumerate(records, 1):
        at = IPV4_AT.get(rec[1])
        seg = fast_ipv4(rec[2], *at) if at is not None else None
        out.append(None if i & 4095 and seg is not None and share_of(seg[0], share.count) != share.index else rec)
    return out


def _expanded(got: list) -> list:
    return [x for r in got for x in ([None] * r if type(r) is int else [r])]


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("shares", [2, 3])
def test_a_compiled_reader_drops_exactly_the_other_shares_packets(shares: int, fmt: str, tmp_path: Path) -> None:
    """Over a rotated set (so the record count runs on across files and passes 4096), sample captures
    of real clients: the C hash of the frame agrees with share_of, runs come as their length, and the
    counts and the last timestamp are those of reading everything. pcapng as Wireshark writes it."""
    files = [str(SAMPLES / "group-rebalance.pcap"), str(SAMPLES / "mixed.pcap"), str(SAMPLES / "group-rebalance.pcap")]
    if fmt == "pcapng":
        for i, f in enumerate(files):
            files[i] = str(tmp_path / f"{i}.pcapng")
            subprocess.run([need("editcap"), "-F", "pcapng", f, files[i]], check=True)
    plain = open_captures(files)
    records = list(plain)
    assert len(records) > 4096
    for k in range(shares):
        source = open_captures(files)
        if not source.drop_foreign(Share(k, shares)):
            assert not is_compiled(pcapfile)
            pytest.skip("only the compiled reader drops packets")
        got = list(source)
        assert _expanded(got) == _dropped(records, Share(k, shares))
        assert all(type(r) is tuple or r > 0 for r in got)
        assert len(got) < 0.8 * len(records)
        assert (source.records, source.last_ts) == (plain.records, plain.last_ts) == (len(records), records[-1][0])


def test_a_share_decodes_the_same_whether_its_reader_drops_packets_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    pcap = str(SAMPLES / "mixed.pcap")

    def share_events(k: int) -> list[str]:
        return [repr(ce.event) for ce in Pipeline(CaptureOptions(share=Share(k, 2))).run(open_captures([pcap]))]

    dropping = [share_events(k) for k in range(2)]
    monkeypatch.setattr(pcapfile.PcapReader, "drop_foreign", lambda self, share, seen=0: False)
    assert [share_events(k) for k in range(2)] == dropping
    assert all(dropping)
