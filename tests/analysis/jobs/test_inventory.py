from __future__ import annotations

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import inventory
from tests.analysis.conftest import at, exchange, table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exchanges(spark):
    orphan = {**exchange(3, "Produce", api_key=0, t=2, version=9), "client_id": None, "request_ts": None,
              "status": "orphan_response", "inferred": True, "latency_ms": None}
    return table(spark, "exchanges", [
        exchange(1, "ApiVersions", api_key=18, t=0, client="app", version=3,
                 request={"client_software_name": "librdkafka", "client_software_version": "2.3"},
                 response={"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9},
                                                         {"api_key": 18, "min_version": 0, "max_version": 3}]}),
        exchange(2, "Produce", api_key=0, t=1, client="app", version=7),
        orphan,
        exchange(4, "Produce", api_key=0, t=3, client="app", version=9, latency=None, status="no_response"),
        exchange(5, "Metadata", api_key=3, t=4, client="other", version=12, conn="k2"),
    ])


def test_summary(spark, exchanges):
    anomalies = table(spark, "anomalies", [{"capture": "cap", "ts": at(1), "kind": "gap"}])
    assertDataFrameEqual(inventory.summary(exchanges, anomalies).select(
        "first_ts", "last_ts", "duration_s", "captures", "connections", "clients", "brokers", "exchanges", "errors",
        "anomalies"), spark.createDataFrame([(at(0), at(4), 4.0, 1, 2, 2, 1, 5, 0, 1)],
        "first_ts timestamp, last_ts timestamp, duration_s double, captures long, connections long, clients long, "
        "brokers long, exchanges long, errors long, anomalies long"))


def test_summary_counts_each_capture_s_connections_with_a_row_as_decode_does(spark, tmp_path):
    """The same 4-tuple in two captures is two connections, and a TLS connection without its keys (an
    anomaly row only) is one: decode's summary and analyze's agree on real captures."""
    from pathlib import Path

    import kdissect
    from analysis import dataset

    samples = Path(__file__).resolve().parents[3] / "samples"
    tls = samples / "tls" / "tls13.pcap"
    # mixed.pcap twice under two names: every connection id repeats in the other capture.
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "mixed-again.pcap").write_bytes((samples / "mixed.pcap").read_bytes())
    result = kdissect.write_dataset([samples / "mixed.pcap", tmp_path / "again" / "mixed-again.pcap", tls],
                                    tmp_path / "ds")
    ds = dataset.load(spark, [str(tmp_path / "ds")])
    (row,) = inventory.summary(ds.exchanges, ds.anomalies).collect()
    # 17 in each copy of mixed.pcap; the 10 TLS connections, seen only as tls anomalies, count too.
    assert row.connections == len(result.counts.connections) == 17 + 17 + 10


def test_clients_attribute_orphans_through_their_connection(spark, exchanges):
    assertDataFrameEqual(inventory.clients(exchanges), spark.createDataFrame([
        ("app", "librdkafka", "2.3", 1, "ApiVersions v3, Produce v7, Produce v9", 2, 1, 1, 4),
        ("other", None, None, 1, "Metadata v12", 1, 0, 0, 1),
    ], "client_id string, client_software_name string, client_software_version string, connections long, "
       "apis string, paired long, unpaired long, orphans long, exchanges long"))


def test_api_versions_flag_what_is_older_than_the_broker_offered(spark, exchanges):
    assertDataFrameEqual(inventory.api_versions(exchanges).select(
        "client_id", "api_name", "api_version", "broker_max_version", "outdated", "count"), spark.createDataFrame([
        ("app", "ApiVersions", 3, 3, False, 1), ("app", "Produce", 7, 9, True, 1), ("app", "Produce", 9, 9, False, 1),
        ("other", "Metadata", 12, None, None, 1),
    ], "client_id string, api_name string, api_version int, broker_max_version int, outdated boolean, count long"))


def test_anomalies_by_kind(spark):
    anomalies = table(spark, "anomalies", [{"capture": "cap", "ts": at(1), "kind": "gap"},
                                           {"capture": "cap", "ts": at(3), "kind": "gap"},
                                           {"capture": "cap", "ts": None, "kind": "truncated"}])
    assertDataFrameEqual(inventory.anomalies_by_kind(anomalies), spark.createDataFrame(
        [("gap", 2, at(1), at(3), 1), ("truncated", 1, None, None, 1)],
        "kind string, count long, first_ts timestamp, last_ts timestamp, captures long"))


@pytest.mark.parametrize("engine", ["spark", "embedded"])
def test_summary_counts_the_captures_decode_read_and_says_why_some_have_no_exchanges(request, tmp_path, engine):
    """A capture of Kafka, one of TLS without its keys (anomaly rows only) and one of TLS on a port Kafka
    is not looked for, without keys (no row at all): decode read three, and so does analyze, saying why two
    hold no exchange."""
    import argparse
    import io
    from pathlib import Path

    import kdissect
    from analysis import cli
    from tests.analysis.engines import connect_mode

    samples = Path(__file__).resolve().parents[3] / "samples"
    inputs = [samples / "mixed.pcap", samples / "tls" / "tls13.pcap", samples / "tls" / "tls13-port19443.pcap"]
    decoded = kdissect.write_dataset(inputs, tmp_path / "ds")
    assert decoded.counts.captures == 3
    assert inventory.rowless_captures([str(tmp_path / "ds")]) == 1
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "ds"), "--json", str(tmp_path / "results.json")])
    printed, spark = io.StringIO(), request.getfixturevalue(engine)
    with connect_mode(engine == "embedded"):
        assert cli.run(args, printed, spark=spark) == 0
    (row,) = json.loads((tmp_path / "results.json").read_text())["summary"]
    assert (row["captures"], row["captures_without_exchanges"], row["captures_without_rows"],
            row["anomalies_without_exchanges"]) == (3, 2, 1, ["tls"])
    assert printed.getvalue().startswith(
        f"read 3 captures and 122 exchanges from {tmp_path / 'ds'} (2 captures without exchanges: 1 with anomalies "
        "only (tls), 1 with no Kafka found): ")
