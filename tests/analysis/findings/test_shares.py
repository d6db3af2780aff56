"""Share group rules on the real share-group sample, held to what its clients did and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import findings
from analysis.findings import Inputs, load, shares

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "samples" / "mock-share-groups.pcap"
EXPECTED = json.loads(SAMPLE.with_suffix(".expected.json").read_text())
GROUP = EXPECTED["groups"]["kd-share"]
CLIENTS = {c["client_id"]: c for c in EXPECTED["clients"] if "acquired" in c}


@pytest.fixture(scope="module")
def found(spark, tmp_path_factory):
    import kdissect
    out = tmp_path_factory.mktemp("share")
    kdissect.write_dataset([str(SAMPLE)], out)
    inp = Inputs(spark.read.parquet(str(out / "exchanges")), spark.read.parquet(str(out / "partitions")))
    cfg = load(findings.RULES)
    rows = []
    for rule in shares.RULES:
        rows += [r.asDict() | {"ev": json.loads(r["evidence"])} for r in rule.run(inp, cfg.for_rule(rule.id)).collect()]
    return rows


def _of(found, rule):
    return [f for f in found if f["finding"] == rule]


def test_poison_records_name_the_rejected_and_the_record_released_to_the_limit(found):
    poison = {f["ev"]["topic_partition"]: f for f in _of(found, "share.poison_records")}
    rejected = {}
    for c in CLIENTS.values():
        for topic, parts in c["acks"].items():
            for p, acks in parts.items():
                if acks.get("REJECT"):
                    rejected[f"{topic}-{p}"] = rejected.get(f"{topic}-{p}", 0) + acks["REJECT"]
    assert {k: f["ev"]["rejected_records"] for k, f in poison.items()} == rejected
    assert sum(rejected.values()) == len(GROUP["poison_jobs"])
    # Job 14 (partition 2, the 4th job there: offset 3) was released each time, up to the mock's limit.
    hot = poison[f"{GROUP['topic']}-{GROUP['always_released_job'] % 4}"]
    assert hot["ev"]["redelivered_offsets"] == [GROUP["always_released_job"] // 4]
    assert hot["ev"]["max_delivery_count"] == GROUP["max_delivery_attempts"] == CLIENTS["kd-share-b"]["max_delivery_count"]
    assert all(f["subject"].startswith("kd-share ") and f["show"].startswith("kdissect show") for f in poison.values())
    assert "group.share.delivery.count.limit" in hot["advice"]


def test_the_stuck_members_locks_expired(found):
    (f,) = _of(found, "share.lock_expired")
    stuck = CLIENTS["kd-share-stuck"]
    (offsets,) = [a["offsets"] for parts in stuck["acquired"].values() for a in parts.values()]
    assert f["subject"] == "kd-share-stuck" and f["ev"]["records"] == len(offsets) == stuck["acks"]["share-jobs"]["3"]["UNACKNOWLEDGED"]
    assert f["ev"]["offsets"] == [f"{min(offsets)}-{max(offsets)}"] and f["ev"]["delivered_to"] == ["kd-share-a"]
    assert f["ev"]["lock_ms"] == GROUP["lock_duration_ms"] and "group.share.record.lock.duration.ms" in f["advice"]


def test_session_churn_and_the_member_that_took_most(found):
    (churn,) = _of(found, "share.session_churn")  # default: 5 errors or more
    assert churn["subject"] == "kd-share-a" and churn["ev"]["error_names"] == ["SHARE_SESSION_NOT_FOUND"]
    (most,) = _of(found, "share.unbalanced")
    acquired = sum(a["count"] for parts in CLIENTS["kd-share-a"]["acquired"].values() for a in parts.values())
    assert most["subject"] == "kd-share-a" and most["ev"]["acquired"] == acquired and most["severity"] == "info"
