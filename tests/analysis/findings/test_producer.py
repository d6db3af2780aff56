"""Producer rules on hand-made rows, each threshold met exactly on one subject and missed just by another."""

from __future__ import annotations

import json

import pytest

from tests.analysis.findings.rows import ex, part, produce_body, run, subjects

pytestmark = pytest.mark.slow


def test_tiny_batches_fires_just_over_the_rate_at_the_median_and_the_records_floor(spark):
    rows = []
    # over: 50 requests in 4.9 s (10.2/s > 10), 2 records per batch (median 2 <= 2), 100 records in all
    rows += [ex("Produce", i * 0.1, client="over", request=produce_body(records=2)) for i in range(50)]
    # under on rate: 50 requests in 5 s (10/s is not above 10)
    rows += [ex("Produce", i * 5 / 49, client="slow", request=produce_body(records=2)) for i in range(50)]
    # under on batching: 3 records per batch
    rows += [ex("Produce", i * 0.1, client="batched", request=produce_body(records=3)) for i in range(50)]
    # under on traffic: the same rate and median, 99 records in all
    rows += [ex("Produce", i * 0.1, client="few", request=produce_body(records=1 if i == 0 else 2))
             for i in range(50)]
    found = run(spark, "producer.tiny_batches", rows)
    assert subjects(found) == {"over": "warning"}
    ev = json.loads(found[0].evidence)
    assert ev["produce_requests"] == 50 and ev["median_records_per_batch"] == 2.0 and ev["requests_per_s"] == 10.2
    assert ev["records"] == 100
    assert found[0].show == "kdissect show cap.pcap --api Produce --client-id over"


def test_tiny_batches_threshold_is_overridable(spark):
    rows = [ex("Produce", i * 0.1, client="c", request=produce_body(records=3)) for i in range(50)]
    assert run(spark, "producer.tiny_batches", rows, max_median_records_per_batch=3)
    few = [ex("Produce", i * 0.1, client="c", request=produce_body(records=1)) for i in range(21)]
    assert not run(spark, "producer.tiny_batches", few)
    assert run(spark, "producer.tiny_batches", few, min_records=21)


def test_uncompressed_needs_volume_rate_and_share(spark):
    rows, parts = [], []
    for topic, sizes, codec in (("big", [16384, 16384], "none"), ("small", [16384, 16383], "none"),
                                ("mostly-lz4", [16384, 16384], "lz4")):
        for i, size in enumerate(sizes):
            e = ex("Produce", i * 1.0, client=f"p-{topic}")
            rows.append(e)
            parts.append(part(e, "request", topic=topic, bytes=size, record_count=10, batch_count=1,
                              compression=codec))
    e = ex("Produce", 0.5, client="p-mostly-lz4")
    rows.append(e)
    parts.append(part(e, "request", topic="mostly-lz4", bytes=100, record_count=1, batch_count=1, compression="none"))
    found = run(spark, "producer.uncompressed", rows, parts)
    assert subjects(found) == {"big": "warning"}
    ev = json.loads(found[0].evidence)
    assert ev["uncompressed_bytes"] == 32768 and ev["producers"] == ["p-big"] and ev["uncompressed_share"] == 1.0


def test_large_batches_near_the_limit_and_rejected(spark):
    a, b, c = ex("Produce", 0, client="near"), ex("Produce", 1, client="under"), ex("Produce", 2, client="rejected")
    parts = [part(a, "request", bytes=943718 * 2, batch_count=2, record_count=2),
             part(b, "request", bytes=943717, batch_count=1, record_count=1),
             part(c, "request", bytes=2000, batch_count=1, record_count=1),
             part(c, "response", error_name="MESSAGE_TOO_LARGE", error_code=10)]
    found = run(spark, "producer.large_batches", [a, b, c], parts)
    assert subjects(found) == {"near": "warning", "rejected": "critical"}


def test_acks_zero_warns_one_informs_all_is_fine(spark):
    rows = [ex("Produce", 0, client="zero", request=produce_body(acks=0), status="no_response_expected"),
            ex("Produce", 1, client="one", request=produce_body(acks=1, topic="t1")),
            ex("Produce", 2, client="all", request=produce_body(acks=-1))]
    found = run(spark, "producer.acks", rows)
    assert subjects(found) == {"zero": "warning", "one": "info"}
    assert json.loads(next(r for r in found if r.subject == "one").evidence)["topics"] == ["t1"]


def _sent_twice(client: str, first_status: str, first_error: str | None, *, producer_id: int = -1,
                first_ts: int = 1000) -> tuple[list[dict], list[dict]]:
    body = produce_body(records=8, size=900, producer_id=producer_id, base_sequence=0 if producer_id >= 0 else -1,
                        first_ts=first_ts)
    a = ex("Produce", 0, client=client, conn=f"{client}-1", request=body, status=first_status,
           error=first_error or "NONE")
    b = ex("Produce", 3, client=client, conn=f"{client}-2", request=body)
    parts = [part(b, "response", error_name="NONE", error_code=0, base_offset=8)]
    if first_status == "ok":
        parts.append(part(a, "response", error_name=first_error, error_code=6, base_offset=-1))
    return [a, b], parts


def test_duplicates_and_not_idempotent(spark):
    rows, parts = [], []
    for r, p in (_sent_twice("lost-answer", "no_response", None),                 # written twice: warning
                 _sent_twice("idempotent", "no_response", None, producer_id=7),    # de-duplicated: info
                 _sent_twice("rejected-first", "ok", "NOT_LEADER_OR_FOLLOWER")):   # one copy kept: no duplicate
        rows += r
        parts += p
    # Two different batches (other timestamps) are not a re-send.
    rows += [ex("Produce", 0, client="distinct", request=produce_body(first_ts=1)),
             ex("Produce", 1, client="distinct", request=produce_body(first_ts=2))]
    dup = run(spark, "producer.duplicates", rows, parts)
    assert {(r.subject, json.loads(r.evidence)["client_id"], r.severity) for r in dup} == {
        ("t-0", "lost-answer", "warning"), ("t-0", "idempotent", "info")}
    sends = json.loads(next(r for r in dup if r.severity == "warning").evidence)["sends"]
    assert [s["outcome"] for s in sends] == ["no answer", "NONE"] and sends[1]["assigned_offset"] == 8
    # Idempotence off and retrying: both non-idempotent clients, whatever the outcome.
    assert subjects(run(spark, "producer.not_idempotent", rows, parts)) == {
        "lost-answer": "warning", "rejected-first": "warning"}


def test_same_size_same_millisecond_batches_with_other_content_are_not_resends(spark):
    # Two one-record batches in the same millisecond, same size: only the CRC tells them apart.
    a = produce_body(records=1, size=198, first_ts=5)
    b = json.loads(json.dumps(a))
    b["topic_data"][0]["partition_data"][0]["records"]["first_crc"] = produce_body(records=1, size=198, first_ts=6)[
        "topic_data"][0]["partition_data"][0]["records"]["first_crc"]
    rows = [ex("Produce", 0, client="c", request=a), ex("Produce", 0.001, client="c", request=b)]
    assert run(spark, "producer.not_idempotent", rows) == []
