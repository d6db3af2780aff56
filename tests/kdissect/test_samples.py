"""The recorded samples against what their clients reported (``samples/<name>.expected.json``)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import kdissect

from tests.kdissect.conftest import SAMPLES, read_table

EXPECTED = sorted(SAMPLES.glob("*.expected.json"))
pytestmark = pytest.mark.skipif(not EXPECTED, reason="no recorded samples yet")


@pytest.fixture(scope="module")
def samples_dataset(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("samples") / "out"
    pcaps = [SAMPLES / json.loads(p.read_text())["pcap"] for p in EXPECTED]
    kdissect.write_dataset([p for p in pcaps if p.exists()], out)
    return {t: read_table(out, t).to_pandas() for t in ("exchanges", "partitions", "anomalies")}


def _expected(name: str) -> dict:
    path = SAMPLES / f"{name}.expected.json"
    if not path.exists():
        pytest.skip(f"{path.name} not recorded")
    return json.loads(path.read_text())


def _delivered(ds: dict[str, pd.DataFrame], capture: str) -> pd.DataFrame:
    """Produce request partitions the broker acknowledged without error, or sent with acks=0."""
    ex = ds["exchanges"]
    parts = ds["partitions"]
    produce = parts[(parts.capture == capture) & (parts.api_name == "Produce")]
    keys = ["connection", "correlation_id", "topic", "partition"]
    req = produce[produce.direction == "request"]
    ok = produce[(produce.direction == "response") & (produce.error_code == 0)][keys + ["base_offset"]]
    acked = req.merge(ok, on=keys, suffixes=("", "_assigned"))
    fire_and_forget = ex[(ex.capture == capture) & (ex.status == "no_response_expected")]
    lone = req.merge(fire_and_forget[["connection", "correlation_id"]], on=["connection", "correlation_id"])
    # tansu answers some acks=0 requests anyway: count such a request once.
    return pd.concat([acked, lone], ignore_index=True).drop_duplicates(subset=keys)


@pytest.mark.parametrize("name", [p.name.removesuffix(".expected.json") for p in EXPECTED])
def test_client_ids_and_delivered_records(samples_dataset: dict[str, pd.DataFrame], name: str) -> None:
    exp = _expected(name)
    ex = samples_dataset["exchanges"]
    mine = ex[ex.capture == exp["pcap"]]
    assert set(exp["client_ids"]) <= set(mine.client_id.dropna())
    assert (mine[mine.status == "ok"].latency_ms > 0).all()
    delivered = _delivered(samples_dataset, exp["pcap"])
    got = delivered.groupby(["topic", "partition"]).record_count.sum().astype(int).to_dict()
    want = {(t, int(p)): s["count"] for t, parts in exp["delivered_totals"].items() for p, s in parts.items()}
    assert got == want
    acked = delivered.dropna(subset=["base_offset_assigned"])
    for (topic, part), rows in acked.groupby(["topic", "partition"]):
        s = exp["delivered_totals"][topic][str(part)]
        if s.get("min_offset") is not None:
            assert rows.base_offset_assigned.min() == s["min_offset"]
            assert (rows.base_offset_assigned + rows.record_count - 1).max() == s["max_offset"]


def test_mixed_sample_has_every_client(samples_dataset: dict[str, pd.DataFrame]) -> None:
    exp = _expected("mixed")
    ex = samples_dataset["exchanges"]
    mine = ex[ex.capture == "mixed.pcap"]
    assert set(mine.client_id.dropna()) >= set(exp["client_ids"])
    assert {"Produce", "Fetch", "JoinGroup", "SyncGroup", "OffsetCommit"} <= set(mine.api_name)


def test_fetch_by_topic_id_is_named_from_metadata(samples_dataset: dict[str, pd.DataFrame]) -> None:
    parts = samples_dataset["partitions"]
    fetch = parts[(parts.capture == "mock-transactions.pcap") & (parts.api_name == "Fetch")]
    assert len(fetch) and fetch.topic_id.notna().all()
    # Fetch v16 carries only topic ids; the names come from Metadata responses in the same capture.
    assert set(fetch.topic) == {"tx-topic"}
