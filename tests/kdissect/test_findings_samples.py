"""The findings samples (``samples/findings/``) hold what their clients and the recording proxy reported."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import kdissect

from tests.kdissect.conftest import SAMPLES, read_table

FOLDER = SAMPLES / "findings"
EXPECTED = sorted(FOLDER.glob("*.expected.json"))
pytestmark = pytest.mark.skipif(not EXPECTED, reason="no findings samples recorded")


@pytest.fixture(scope="module")
def decoded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("findings-samples") / "out"
    kdissect.write_dataset([FOLDER / json.loads(p.read_text())["pcap"] for p in EXPECTED], out)
    return {t: read_table(out, t).to_pandas() for t in ("exchanges", "partitions")}


def _exp(name: str) -> dict:
    return json.loads((FOLDER / f"{name}.expected.json").read_text())


def _mine(decoded: dict[str, pd.DataFrame], name: str, table: str = "exchanges") -> pd.DataFrame:
    df = decoded[table]
    return df[df.capture == f"{name}.pcap"]


@pytest.mark.parametrize("path", EXPECTED, ids=[p.name.removesuffix(".expected.json") for p in EXPECTED])
def test_every_client_is_on_the_wire(decoded: dict[str, pd.DataFrame], path: Path) -> None:
    exp = json.loads(path.read_text())
    mine = _mine(decoded, exp["sample"])
    assert set(exp["client_ids"]) <= set(mine.client_id.dropna())
    assert exp["broker"]["ports"] == [9092]
    assert set(mine.broker_port) == {9092}  # only the port the clients used was captured


def test_acks0_answers_were_dropped_by_the_proxy(decoded: dict[str, pd.DataFrame]) -> None:
    exp = _exp("findings-acks0")
    produce = _mine(decoded, "findings-acks0").query("api_name == 'Produce'")
    dropped = {(d["correlation_id"]) for d in exp["proxy"]["dropped_responses"]}
    assert set(produce.status) == {"no_response_expected"}
    assert set(produce.correlation_id) == dropped
    records = _mine(decoded, "findings-acks0", "partitions").query("api_name == 'Produce'").record_count.sum()
    assert records == sum(
        s["count"] for parts in exp["delivered_totals"].values() for s in parts.values())


def test_duplicates_sample_holds_the_batch_twice(decoded: dict[str, pd.DataFrame]) -> None:
    exp = _exp("findings-duplicates")
    producer = next(c for c in exp["clients"] if c["client_id"] == "kd-find-dup-producer")
    reader = next(c for c in exp["clients"] if c["client_id"] == "kd-find-dup-reader")
    delivered = producer["delivered"]["find-dup"]["0"]
    ex = _mine(decoded, "findings-duplicates")
    produce = ex[(ex.api_name == "Produce")].sort_values("request_ts")
    # The first answer was withheld (never captured), the retry was answered.
    assert list(produce.status) == ["no_response", "ok"]
    assert len(exp["proxy"]["dropped_responses"]) == 1
    parts = _mine(decoded, "findings-duplicates", "partitions")
    answer = parts[(parts.api_name == "Produce") & (parts.direction == "response")]
    # The retry landed after the first copy: its offsets are the ones the client was told.
    assert answer.base_offset.tolist() == [delivered["min_offset"]] == [delivered["count"]]
    fetched = parts[(parts.api_name == "Fetch") & (parts.direction == "response")].record_count.sum()
    assert fetched == reader["consumed"]["find-dup"]["0"]["count"] == 2 * delivered["count"]


def test_session_timeout_sample_has_the_eviction(decoded: dict[str, pd.DataFrame]) -> None:
    exp = _exp("findings-session-timeout")
    stalled = next(c for c in exp["clients"] if c["client_id"] == "kd-find-stalled")
    assert stalled["resumed_at"] - stalled["stalled_at"] > stalled["config"]["session_timeout_ms"] / 1000
    ex = _mine(decoded, "findings-session-timeout")
    hb = ex[(ex.client_id == "kd-find-stalled") & (ex.api_name == "Heartbeat")]
    assert "UNKNOWN_MEMBER_ID" in set(hb.error_name)


def test_member_vanished_sample_has_the_kill_and_no_leave(decoded: dict[str, pd.DataFrame]) -> None:
    """The SIGKILLed member's last word precedes its kill, it never sends LeaveGroup, and the survivor
    learns of the rebalance from a heartbeat answer later than the killed member's session allows."""
    exp = _exp("findings-member-vanished")
    group = exp["groups"]["kd-find-gone"]
    killed, at = group["killed"]["member"], pd.Timestamp(group["killed"]["at"])
    assert next(c for c in exp["clients"] if c["client_id"] == killed)["role"] == "group-member (killed)"
    ex = _mine(decoded, "findings-member-vanished")
    gone = ex[ex.client_id == killed]
    assert "LeaveGroup" not in set(gone.api_name) and gone.request_ts.max() < at
    survivor = ex[(ex.client_id != killed) & (ex.api_name == "Heartbeat") & (ex.request_ts > at)]
    told = survivor[survivor.error_name == "REBALANCE_IN_PROGRESS"].request_ts.min()
    assert (told - gone.request_ts.max()).total_seconds() > 6.0   # session.timeout.ms 6000
    assert group["steps"][-2]["assignment"] == {m: group["partitions"] for m in group["members"] if m != killed}


def test_delivered_records_match_the_acknowledged_produce(decoded: dict[str, pd.DataFrame]) -> None:
    for name in ("findings-tiny-batches", "findings-commit-per-message", "findings-good",
                 "findings-metadata-storm", "findings-reconnect-loop", "findings-busy-polling",
                 "findings-member-vanished"):
        exp = _exp(name)
        parts = _mine(decoded, name, "partitions")
        ok = parts[(parts.api_name == "Produce") & (parts.direction == "response") & (parts.error_code == 0)]
        req = parts[(parts.api_name == "Produce") & (parts.direction == "request")]
        acked = req.merge(ok[["connection", "correlation_id", "topic", "partition"]])
        got = acked.groupby(["topic", "partition"]).record_count.sum().to_dict()
        want = {(t, int(p)): s["count"] for t, ps in exp["delivered_totals"].items() for p, s in ps.items()}
        assert got == want, name
