from __future__ import annotations

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import versions
from tests.analysis.conftest import at, table

pytestmark = pytest.mark.slow

NAMES = {0: "Produce", 3: "Metadata", 18: "ApiVersions"}


def ex(conn, client, ip, key, version, t, request=None, *, inferred=False, request_seen=True):
    return {"capture": "cap", "connection": conn, "client_id": client, "client_ip": ip, "api_key": key,
            "api_name": NAMES[key], "api_version": version, "request_ts": at(t) if request_seen else None,
            "response_ts": at(t + 0.001), "request": json.dumps(request) if request else None,
            "inferred": inferred}


@pytest.fixture(scope="module")
def exchanges(spark):
    java = {"client_software_name": "apache-kafka-java", "client_software_version": "3.6.1"}
    return table(spark, "exchanges", [
        ex("k1", "app", "10.0.0.1", 18, 3, 0, java),
        ex("k1", "app", "10.0.0.1", 3, 12, 1),
        ex("k1", "app", "10.0.0.1", 0, 9, 2),
        ex("k1", "app", "10.0.0.1", 0, 9, 3),
        ex("k2", "app", "10.0.0.2", 0, 9, 4),          # joined mid-stream: software unknown
        ex("k3", "legacy", "10.0.0.3", 0, 2, 5),
        ex("k3", "legacy", "10.0.0.3", 3, 0, 6),
        # an orphan response's version is a guess and must not count
        ex("k4", "legacy", "10.0.0.4", 0, 7, 7, inferred=True, request_seen=False),
    ])


def test_client_versions_attach_software_from_apiversions(spark, exchanges):
    expected = spark.createDataFrame(
        [("app", "apache-kafka-java 3.6.1", 18, "ApiVersions", 3, 1, 1, ["10.0.0.1"], at(0), at(0)),
         ("app", "apache-kafka-java 3.6.1", 3, "Metadata", 12, 1, 1, ["10.0.0.1"], at(1), at(1)),
         ("app", "apache-kafka-java 3.6.1", 0, "Produce", 9, 2, 1, ["10.0.0.1"], at(2), at(3)),
         ("app", None, 0, "Produce", 9, 1, 1, ["10.0.0.2"], at(4), at(4)),
         ("legacy", None, 0, "Produce", 2, 1, 1, ["10.0.0.3"], at(5), at(5)),
         ("legacy", None, 3, "Metadata", 0, 1, 1, ["10.0.0.3"], at(6), at(6))],
        "client_id string, client_software string, api_key int, api_name string, api_version int, "
        "requests long, connections long, client_ips array<string>, first_seen timestamp, last_seen timestamp")
    assertDataFrameEqual(versions.client_versions(exchanges), expected)


def test_outdated_lists_clients_behind_the_newest_version_seen(spark, exchanges):
    found = versions.outdated(versions.client_versions(exchanges))
    expected = spark.createDataFrame(
        [("legacy", "Produce", 2, 9, 7), ("legacy", "Metadata", 0, 12, 12)],
        "client_id string, api_name string, api_version int, newest_seen int, behind int")
    assertDataFrameEqual(found.select("client_id", "api_name", "api_version", "newest_seen", "behind"), expected)
