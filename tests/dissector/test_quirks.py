"""Which anomalies are known quirks of real peers: the rules, on the values the dissector hands them."""

from __future__ import annotations

from dissector import quirks

CK = "confluent-kafka-python 2.16.1-rdkafka-2.16.0"      # as confluent-kafka names itself in ApiVersions


def test_client_software_from_api_versions() -> None:
    assert quirks.client_software({"client_software_name": "confluent-kafka-python",
                                   "client_software_version": "2.16.1-rdkafka-2.16.0"}) == CK
    assert quirks.client_software({"client_software_name": "librdkafka", "client_software_version": ""}) == "librdkafka"
    assert quirks.client_software({}) is None and quirks.client_software(None) is None


def test_librdkafka_metadata_request_tail() -> None:
    q = quirks.trailing_bytes(3, 12, "request", 3, {}, CK)
    assert q is not None and q.of == "librdkafka 2.16.0 (confluent-kafka-python)"
    assert quirks.trailing_bytes(3, 12, "request", 3, {}, "librdkafka 2.3.0").of == "librdkafka 2.3.0"  # type: ignore[union-attr]
    # Another client, another length, an older version: not the known quirk.
    assert quirks.trailing_bytes(3, 12, "request", 3, {}, "apache-kafka-java 3.9.0") is None
    assert quirks.trailing_bytes(3, 12, "request", 4, {}, CK) is None
    assert quirks.trailing_bytes(3, 11, "request", 3, {}, CK) is None
    assert quirks.trailing_bytes(3, 12, "request", 3, {}, None) is None


def test_mock_cluster_responses() -> None:
    api_versions = {"error_code": 35, "api_keys": []}
    assert quirks.trailing_bytes(18, 3, "response", 5, api_versions, CK).of == "librdkafka mock cluster"  # type: ignore[union-attr]
    assert quirks.trailing_bytes(18, 3, "response", 5, {"error_code": 0, "api_keys": []}, CK) is None
    metadata = {"cluster_id": "mockCluster156d9e91c560"}
    assert quirks.trailing_bytes(3, 13, "response", 1, metadata, None) is not None
    assert quirks.trailing_bytes(3, 13, "response", 1, {"cluster_id": "prod-eu-1"}, None) is None
    assert quirks.trailing_bytes(3, 13, "response", 2, metadata, None) is None


def test_control_batch_crc() -> None:
    assert quirks.control_batch_crc(True) is not None and quirks.control_batch_crc(False) is None


def test_mock_share_group_heartbeat_byte() -> None:
    heartbeat = {"error_code": 0, "member_epoch": 2, "assignment": None}
    assert quirks.trailing_bytes(76, 1, "response", 1, heartbeat, None).of == "librdkafka mock cluster"  # type: ignore[union-attr]
    assert quirks.trailing_bytes(76, 1, "response", 2, heartbeat, None) is None
    assert quirks.trailing_bytes(76, 1, "request", 1, heartbeat, CK) is None


def test_every_trailing_byte_of_the_share_sample_is_a_known_quirk(tmp_path) -> None:
    from pathlib import Path

    import pyarrow.parquet as pq

    from kdissect import write_dataset
    write_dataset([Path(__file__).resolve().parents[2] / "samples" / "mock-share-groups.pcap"], tmp_path)
    rows = pq.read_table(tmp_path / "anomalies").to_pylist()
    assert {r["detail"] for r in rows if r["kind"] == "trailing_bytes" and not r["quirk_of"]} == set()
