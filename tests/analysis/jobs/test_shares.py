"""Share group tables on the real share-group sample, held to its clients' own counts; the acknowledgement
batch forms no client of the sample sends (one type per offset, gaps) on hand-built bodies."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pytest

from analysis import derived, facts
from analysis.jobs import shares
from tests.analysis.conftest import exchange, table

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "mock-share-groups.pcap"
EXPECTED = json.loads(SAMPLE.with_suffix(".expected.json").read_text())
MEMBERS = [c for c in EXPECTED["clients"] if "acquired" in c]


@pytest.fixture(scope="module")
def dataset(spark, tmp_path_factory):
    import kdissect
    out = tmp_path_factory.mktemp("share")
    kdissect.write_dataset([str(SAMPLE)], out)
    ex = facts.typed(spark.read.parquet(str(out / "exchanges")))
    return ex, spark.read.parquet(str(out / "partitions"))


@pytest.fixture(scope="module")
def deliveries(dataset):
    return [r.asDict() for r in derived.share_deliveries(*dataset).collect()]


def test_deliveries_are_the_clients_own_counts(deliveries):
    got = {(r["client_id"], r["topic"], r["partition"]): r for r in deliveries}
    want = {}
    for c in MEMBERS:
        for topic, parts in c["acquired"].items():
            for p, a in parts.items():
                acks = c["acks"][topic][p]
                want[(c["client_id"], topic, int(p))] = {
                    "acquired": a["count"], "redelivered": a.get("redelivered", 0),
                    "accepted": acks.get("ACCEPT", 0), "released": acks.get("RELEASE", 0),
                    "rejected": acks.get("REJECT", 0)}
    assert {k: {f: r[f] for f in want[k]} for k, r in got.items()} == want
    for c in MEMBERS:
        mine = [r["max_delivery_count"] for r in deliveries if r["client_id"] == c["client_id"]]
        assert max(mine) == c["max_delivery_count"]
    assert {r["group_id"] for r in deliveries} == {"kd-share"}


def test_acquired_ranges_give_each_clients_offsets_and_delivery_counts(dataset):
    acq = derived.share_acquisitions(*dataset).collect()
    for c in MEMBERS:
        offsets = Counter()
        counts = Counter()
        for r in acq:
            if r["client_id"] == c["client_id"]:
                for o in range(r["first_offset"], r["last_offset"] + 1):
                    offsets[(r["topic"], str(r["partition"]))] += 1
                counts[str(r["delivery_count"])] += r["records"]
        want = Counter({(t, p): len(a["offsets"]) for t, parts in c["acquired"].items() for p, a in parts.items()})
        assert offsets == want, c["client_id"]
        assert dict(counts) == c["delivery_counts"], c["client_id"]
    assert {r["lock_timeout_ms"] for r in acq} == {EXPECTED["groups"]["kd-share"]["lock_duration_ms"]}


def test_the_stuck_members_records_expired_and_went_to_another(dataset):
    rows = [r.asDict() for r in derived.share_unacknowledged(*dataset).collect()]
    stuck = next(c for c in MEMBERS if "UNACKNOWLEDGED" in json.dumps(c["acks"]))
    held = sorted(o for parts in stuck["acquired"].values() for a in parts.values() for o in a["offsets"])
    assert [(r["client_id"], r["first_offset"], r["last_offset"], r["records"]) for r in rows] == \
        [(stuck["client_id"], held[0], held[-1], len(held))]
    (row,) = rows
    assert row["state"] == "lock_expired" and row["next_client_id"] == "kd-share-a" and row["next_delivery_count"] == 2
    assert row["lock_expires_ts"] - row["acquired_ts"] == dt.timedelta(milliseconds=3000)
    assert row["next_ts"] >= row["lock_expires_ts"]


def _when(member: dict, event: str) -> dt.datetime:
    at = next(e["at"] for e in member["events"] if e["event"] == event)
    # Spark hands timestamps back naive, in the session's time zone (UTC in the tests).
    return dt.datetime.fromisoformat(at.replace("Z", "+00:00")).replace(tzinfo=None)


def test_members_join_and_leave_when_the_clients_did(dataset):
    rows = {r["client_id"]: r.asDict() for r in derived.share_members(*dataset).collect()}
    assert set(rows) == set(EXPECTED["groups"]["kd-share"]["members"])
    for c in MEMBERS:
        r = rows[c["client_id"]]
        assert abs(r["joined_ts"] - _when(c, "subscribed")) < dt.timedelta(seconds=1)
        assert dt.timedelta(0) <= r["left_ts"] - _when(c, "leaving") < dt.timedelta(seconds=1)
        assert r["heartbeat_errors"] == [] and r["member_epoch"] <= r["group_epoch"]
    # The stuck member's partition went to a when both others had left.
    assert rows["kd-share-a"]["assigned_partitions"] == [f"share-jobs-{p}" for p in range(4)]
    assert rows["kd-share-stuck"]["assignments"][0].endswith(": share-jobs-3")


def test_session_errors_count_the_failed_answers(dataset):
    ex, _ = dataset
    failed = Counter((r["client_id"], r["api_name"], r["error_name"]) for r in ex.where(
        derived.api(78, 79) & (ex.error_code != 0)).collect())
    got = Counter()
    for r in derived.share_session_errors(*dataset).collect():
        got[(r["client_id"], r["api_name"], r["error"])] += r["count"]
    assert got == failed and set(e for _, _, e in got) == {"SHARE_SESSION_NOT_FOUND"}


def test_the_job_names_its_tables(dataset):
    class Ds:
        exchanges, partitions = dataset

    assert set(shares.tables(Ds(), None)) == {"share_groups", "share_deliveries", "share_in_flight",
                                              "share_session_errors"}


def _ack(cid, t, batches, client="c", member="m"):
    return exchange(cid, "ShareAcknowledge", api_key=79, t=t, client=client, request={
        "group_id": "g", "member_id": member, "share_session_epoch": 1,
        "topics": [{"topic_id": "T", "partitions": [{"partition_index": 0, "acknowledgement_batches": batches}]}]},
        response={"error_code": 0, "responses": [{"topic_id": "T", "partitions": [
            {"partition_index": 0, "error_code": 0}]}]})


def test_a_batch_with_one_type_per_offset_and_gaps(spark):
    ex = table(spark, "exchanges", [
        _ack(1, 0.0, [{"first_offset": 10, "last_offset": 13, "acknowledge_types": [1, 0, 2, 3]},
                      {"first_offset": 14, "last_offset": 16, "acknowledge_types": [1]},
                      {"first_offset": 17, "last_offset": 18, "acknowledge_types": [0]}])])
    parts = table(spark, "partitions", [])
    rows = sorted((r["first_offset"], r["last_offset"], r["ack_type"], r["records"], r["ack_error_code"])
                  for r in derived.share_acknowledgements(ex, parts).collect())
    assert rows == [(10, 10, "ACCEPT", 1, 0), (12, 12, "RELEASE", 1, 0), (13, 13, "REJECT", 1, 0),
                    (14, 16, "ACCEPT", 3, 0)]


def _fetch(cid, t, client, member, acquired, lock_ms=1000):
    return exchange(cid, "ShareFetch", api_key=78, t=t, latency=1.0, client=client, request={
        "group_id": "g", "member_id": member, "share_session_epoch": cid, "topics": []},
        response={"error_code": 0, "acquisition_lock_timeout_ms": lock_ms, "responses": [{"topic_id": "T", "partitions": [
            {"partition_index": 0, "error_code": 0, "acknowledge_error_code": 0,
             "acquired_records": [{"first_offset": f, "last_offset": last, "delivery_count": d}
                                  for f, last, d in acquired]}]}]})


def test_unacknowledged_records_in_flight_released_or_expired(spark):
    ex = table(spark, "exchanges", [
        _fetch(1, 0.0, "c1", "m1", [(0, 4, 1)]),
        _ack(2, 0.5, [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}], client="c1", member="m1"),
        _fetch(3, 0.8, "c2", "m2", [(2, 3, 2)]),    # before c1's lock ran out (1.001 s): its session ended
        _fetch(4, 2.0, "c2", "m2", [(4, 4, 2)]),    # after it
    ])
    rows = sorted((r["client_id"], r["first_offset"], r["last_offset"], r["state"], r["next_client_id"])
                  for r in derived.share_unacknowledged(ex, table(spark, "partitions", [])).collect())
    assert rows == [("c1", 2, 3, "released", "c2"), ("c1", 4, 4, "lock_expired", "c2"),
                    ("c2", 2, 3, "in_flight", None), ("c2", 4, 4, "in_flight", None)]


def test_forged_ranges_are_not_counted_and_long_ones_are_followed_only_so_far(spark):
    """Offsets no broker hands out (negative, past 2^62, a range of 2^40) count nothing and cannot
    overflow a sum or become a trillion rows; a long real-looking range counts whole in the deliveries
    but is followed record by record only for its first MAX_SHARE_RECORDS_FOLLOWED offsets."""
    top = (1 << 63) - 1
    ex = table(spark, "exchanges", [
        _fetch(1, 0.0, "c1", "m1", [(-5, 3, 1), (0, top, 1), (1 << 40, (1 << 41), 1), (top - 1, top, 1)]),
        _fetch(2, 0.1, "c1", "m1", [(10, 199_999, 1)]),
        _ack(3, 0.2, [{"first_offset": -1, "last_offset": top, "acknowledge_types": [1]},
                      {"first_offset": top - 2, "last_offset": top, "acknowledge_types": [1, 2, 3]},
                      {"first_offset": 10, "last_offset": 11, "acknowledge_types": [3]}], client="c1", member="m1"),
    ])
    parts = table(spark, "partitions", [])
    [d] = derived.share_deliveries(ex, parts).collect()
    assert (d["acquired"], d["accepted"], d["released"], d["rejected"]) == (199_990, 0, 0, 2)
    [run] = derived.share_unacknowledged(ex, parts).collect()
    assert (run["first_offset"], run["last_offset"], run["state"]) == (12, 10 + derived.MAX_SHARE_RECORDS_FOLLOWED - 1,
                                                                        "in_flight")
