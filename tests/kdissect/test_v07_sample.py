"""The recorded Kafka 0.7 clients (brod, samsa; ``samples/v07/``) against what they themselves reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdissect import write_dataset

from tests.kdissect.conftest import SAMPLES, read_table
from tests.kdissect.golden import render

V07 = SAMPLES / "v07"
EXPECTED = json.loads((V07 / "clients.expected.json").read_text())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("v07") / "out"
    write_dataset([V07 / EXPECTED["pcap"]], out, records=True, record_bytes=True)
    return out


def _client(library: str) -> dict:
    return next(c for c in EXPECTED["clients"] if c["library"] == library)


def _fetched(out: Path, topic: str) -> dict[int, list[list]]:
    """(offset, payload) of every record fetched, per request ordinal, in order."""
    recs = read_table(out, "records").to_pylist()
    got: dict[int, list[list]] = {}
    for r in recs:
        if r["direction"] == "response" and r["topic"] == topic:
            got.setdefault(r["correlation_id"], []).append([r["offset"], r["value"].decode()])
    return got


def test_golden_rows(dataset: Path) -> None:
    assert render(dataset) == (V07 / "clients.exchanges.tsv").read_text()


def test_every_connection_is_detected_as_0_7_without_ports(dataset: Path) -> None:
    ex = read_table(dataset, "exchanges").to_pylist()
    assert {r["protocol"] for r in ex} == {"0.7"} and len({r["connection"] for r in ex}) == 2
    assert not [r for r in ex if r["status"] not in ("ok", "no_response_expected")]
    assert not read_table(dataset, "anomalies").num_rows


def test_brod_fetches_offsets_and_errors(dataset: Path) -> None:
    brod = _client("brod")
    fetched = _fetched(dataset, "brod-events")
    # brod's fetches: partition 0, partition 1, partition 0 cut at 30 bytes (its partial tail dropped)
    assert [fetched[k] for k in sorted(fetched)] == [brod["fetched"], brod["fetched_p1"], brod["fetched_cut"]]
    ex = [r for r in read_table(dataset, "exchanges").to_pylist() if r["connection"].endswith("#1")
          and "brod" in (r["request"] or "")]
    offsets = [json.loads(r["response"])["offsets"] for r in ex if r["api_name"] == "ListOffsets"]
    assert offsets == [brod["earliest"], brod["latest"]]
    errors = [r["error_name"] for r in ex if r["api_name"] == "Fetch" and r["error_code"]]
    assert errors == ["OFFSET_OUT_OF_RANGE", "WRONG_PARTITION"]
    assert brod["errors"] == ["OffsetOutOfRange", "WrongPartitionCode"]


def test_samsa_multifetch_with_a_partition_error(dataset: Path) -> None:
    samsa = _client("samsa")
    parts = read_table(dataset, "partitions").to_pylist()
    mf = [(p["partition"], p["error_name"]) for p in parts
          if p["api_name"] == "MultiFetch" and p["direction"] == "response"]
    assert mf == [(0, "NONE"), (1, "NONE"), (7, "WRONG_PARTITION")]
    fetched = _fetched(dataset, "samsa-events")
    fetch_corr, multi_corr = sorted(fetched)
    assert fetched[fetch_corr] == samsa["fetched"]
    assert fetched[multi_corr] == samsa["multifetched"][0] + samsa["multifetched"][1]
    produced = [p for p in parts if p["topic"] == "samsa-events" and p["direction"] == "request"
                and p["api_key"] == 0]
    assert sum(p["record_count"] for p in produced) == 6


@pytest.mark.parametrize("seed", range(40))
def test_damaged_copies_never_pair_what_the_clean_capture_does_not(tmp_path: Path, seed: int) -> None:
    """Packets dropped, or the capture cut to start mid-stream: fewer pairs, never a different one."""
    from capture import read_capture
    from dissector.events import Exchange
    from tests.capture import pcaptools as pt

    def pairs(path: Path) -> set[tuple[int, int]]:
        out = set()
        for ce in read_capture(path):
            ex = ce.event
            if isinstance(ex, Exchange) and ex.request is not None and ex.response is not None:
                out.add((ex.request.first_ts, ex.response.first_ts))
            assert getattr(ex, "kind", None) != "dissector_error"
        return out

    lt, records = pt.read_records(V07 / EXPECTED["pcap"])
    clean = pairs(V07 / EXPECTED["pcap"])
    damaged = pt.drop(records, rate=0.08, seed=seed) if seed % 2 else pt.cut_start(records, 0.1 + 0.12 * seed)
    got = pairs(pt.write_pcap(tmp_path / "damaged.pcap", lt, damaged))
    assert got <= clean
    assert got or seed % 2 == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reordered_duplicated_and_skewed_copies_give_the_same_exchanges(tmp_path: Path, seed: int) -> None:
    """TCP-level reordering, duplicates, and replies stamped ahead of their requests (two capture
    points): the same exchanges, because nothing is lost and order on the connection decides."""
    from capture import read_capture
    from dissector.events import Exchange
    from tests.capture import pcaptools as pt

    def exchanges(path: Path) -> list[tuple]:
        out = []
        for ce in read_capture(path):
            ex = ce.event
            if isinstance(ex, Exchange):
                out.append((ce.conn.client_port, ex.request and (ex.request.correlation_id, ex.request.size),
                            ex.response and ex.response.size, ex.status.value))
        return sorted(out, key=repr)

    lt, records = pt.read_records(V07 / EXPECTED["pcap"])
    clean = exchanges(V07 / EXPECTED["pcap"])
    for name, recs in (("reordered", pt.reorder_and_duplicate(records, seed=seed)),
                       ("causal", pt.causal_shuffle(records, seed=seed))):
        assert exchanges(pt.write_pcap(tmp_path / f"{name}.pcap", lt, recs)) == clean, name

