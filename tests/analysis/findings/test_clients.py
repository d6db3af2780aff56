"""Client rules on hand-made rows, each threshold met by one subject and missed just by another."""

from __future__ import annotations

import json

import pytest

from tests.analysis.findings.rows import ex, produce_body, run, subjects

pytestmark = pytest.mark.slow


def test_error_storm(spark):
    # over: 10 errors in 18 s (0.55/s); under: 9 errors
    rows = [ex("Produce", i * 2, client="over", error="NOT_LEADER_OR_FOLLOWER") for i in range(10)]
    rows += [ex("Metadata", i, client="under", error="LEADER_NOT_AVAILABLE") for i in range(9)]
    rows += [ex("Produce", i, client="other-error", error="INVALID_RECORD") for i in range(12)]
    found = run(spark, "client.error_storm", rows)
    assert subjects(found) == {"over": "warning"}
    assert json.loads(found[0].evidence)["errors"] == 10
    assert found[0].show == "kdissect show cap.pcap --client-id over --errors"


def test_metadata_storm_rate_and_all_topics(spark):
    rows = [ex("Metadata", i * 0.5, client="over", request={"topics": [{"name": "t"}]}) for i in range(21)]  # 2.1/s
    rows += [ex("Metadata", i * 10 / 19, client="under", request={"topics": [{"name": "t"}]}) for i in range(20)]
    # all topics (null list) at 0.6/s, 20 requests
    rows += [ex("Metadata", i * 20 / 12, client="all", request={"topics": None}) for i in range(20)]
    found = run(spark, "client.metadata_storm", rows)
    assert subjects(found) == {"over": "warning", "all": "warning"}
    assert json.loads(next(r for r in found if r.subject == "all").evidence)["all_topics_requests"] == 20


def test_connection_churn(spark):
    rows = []
    for n, client in ((10, "churn"), (9, "fewer")):
        for i in range(n):
            rows += [ex("ApiVersions", i * 20, client=client, conn=f"{client}-{i}"),
                     ex("Produce", i * 20 + 10, client=client, conn=f"{client}-{i}")]   # 10 s each
    for i in range(10):   # long-lived connections are not churn
        rows += [ex("ApiVersions", i, client="long", conn=f"long-{i}"),
                 ex("Fetch", 100, client="long", conn=f"long-{i}")]
    found = run(spark, "client.connection_churn", rows)
    assert subjects(found) == {"churn": "warning"}
    assert json.loads(found[0].evidence)["median_connection_s"] == 10.0


def test_auth_failures(spark):
    rows = [ex("SaslAuthenticate", i, client="bad", conn=f"b{i}", error="SASL_AUTHENTICATION_FAILED") for i in range(3)]
    rows += [ex("SaslAuthenticate", i, client="twice", conn=f"t{i}", error="SASL_AUTHENTICATION_FAILED")
             for i in range(2)]
    found = run(spark, "client.auth_failures", rows)
    assert subjects(found) == {"bad": "critical"}
    assert json.loads(found[0].evidence)["connections"] == 3


def test_no_client_id(spark):
    rows = [ex("Metadata", 0, client=None), ex("Metadata", 1, client="rdkafka"),
            ex("Metadata", 2, client="kafka-python-2.0.2"), ex("Metadata", 3, client="orders-service-1"),
            ex("Metadata", 4, client="consumer-billing-3")]
    found = run(spark, "client.no_client_id", rows)
    assert subjects(found) == {"(none)": "info", "rdkafka": "info", "kafka-python-2.0.2": "info",
                               "consumer-billing-3": "info"}


def test_legacy_format(spark):
    rows = [ex("Produce", 0, client="v2", version=2, request=produce_body(magic=1)),
            ex("Produce", 1, client="magic1", version=3, request=produce_body(magic=1)),
            ex("Fetch", 2, client="fetch3", version=3),
            ex("Produce", 3, client="modern", version=3, request=produce_body(magic=2)),
            ex("Fetch", 4, client="modern", version=4)]
    assert set(subjects(run(spark, "client.legacy_format", rows))) == {"v2", "magic1", "fetch3"}


def test_old_versions_from_the_specs(spark):
    rows = [ex("Fetch", 0, client="old", version=3), ex("Produce", 1, client="old", version=2),
            ex("Fetch", 2, client="ok", version=4), ex("Produce", 3, client="ok", version=3),
            ex("JoinGroup", 4, client="ok", version=0),        # still accepted by 4.x
            ex("ControlledShutdown", 5, client="gone", version=3)]
    found = run(spark, "client.old_versions", rows)
    assert subjects(found) == {"old": "warning", "gone": "warning"}
    ev = json.loads(next(r for r in found if r.subject == "old").evidence)
    assert ev["removed_versions"] == ["Fetch v3 (4.x needs v4+)", "Produce v2 (4.x needs v3+)"]
    assert next(r for r in found if r.subject == "old").show == \
        "kdissect show cap.pcap --api Fetch,Produce --client-id old"
