"""Broker and load rules on hand-made rows."""

from __future__ import annotations

import json

import pytest

from tests.analysis.findings.rows import ex, part, run, subjects

pytestmark = pytest.mark.slow

B1, B2, B3 = ("10.0.0.1", 9092), ("10.0.0.2", 9092), ("10.0.0.3", 9092)


def test_slow_broker_against_its_peers(spark):
    rows = []
    for api, slow_ms in (("Produce", 60.0), ("Metadata", 59.0)):   # peers at 10 ms: 6x/50 ms vs 49 ms
        for broker, ms in ((B1, slow_ms), (B2, 10.0), (B3, 10.0)):
            rows += [ex(api, i, broker=broker, latency_ms=ms) for i in range(20)]
    rows += [ex("Fetch", i, broker=B1, latency_ms=500.0) for i in range(20)]   # a long poll is not slowness
    rows += [ex("Fetch", i, broker=B2, latency_ms=1.0) for i in range(20)]
    found = run(spark, "broker.slow", rows)
    assert [(r.subject, json.loads(r.evidence)["api_name"]) for r in found] == [("10.0.0.1:9092", "Produce")]
    assert found[0].show == "kdissect show cap.pcap --api Produce --slower-than 50"


def test_throttling(spark):
    rows = [ex("Produce", 0, client="quota", throttle_ms=1), ex("Produce", 1, client="free", throttle_ms=0),
            ex("ApiVersions", 2, client="mock", throttle_ms=1179648)]
    assert subjects(run(spark, "broker.throttling", rows)) == {"quota": "warning"}


def test_unanswered_in_the_middle_not_at_the_edge(spark):
    rows = [ex("Metadata", 0, conn="k1", status="no_response", broker=B1),    # skipped: a later one was answered
            ex("Metadata", 1, conn="k1", broker=B1),
            ex("Metadata", 5, conn="k2", broker=B2),
            ex("Metadata", 9.5, conn="k2", status="no_response", broker=B2)]   # in flight when the capture ended
    found = run(spark, "broker.unanswered", rows)
    assert subjects(found) == {"10.0.0.1:9092": "warning"}
    assert json.loads(found[0].evidence)["unanswered"] == 1


def test_hot_partition(spark):
    mib = 1 << 20
    rows, parts = [], []
    for topic, sizes in (("hot", [5 * mib, mib, mib]), ("even", [5 * mib - 1, mib, mib])):
        for p, size in enumerate(sizes):
            e = ex("Produce", p)
            rows.append(e)
            parts.append(part(e, "request", topic=topic, partition=p, bytes=size, record_count=10, batch_count=1))
    found = run(spark, "topic.hot_partition", rows, parts)
    assert subjects(found) == {"hot-0": "warning"}
    assert json.loads(found[0].evidence)["topic_median_bytes"] == mib
