"""Other projects' published Kafka captures decode field by field.

Java, librdkafka, kafka-python and franz-go clients, recorded by DeepFlow, nDPI,
Arkime and go-sniffer (see ../shared/public-captures/README.md). Values asserted
here were read off the bytes by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from capture import read_capture
from dissector.events import Exchange, Status
from dissector.records import decode_records
from dissector.schema import error_name
from dissector.views import partition_rows

PUBLIC = Path(__file__).resolve().parents[3] / "shared" / "public-captures"
pytestmark = pytest.mark.skipif(not PUBLIC.is_dir(), reason="../shared/public-captures is not beside the repository")


def exchanges(name: str) -> list[Exchange]:
    return [ce.event for ce in read_capture(str(PUBLIC / name)) if isinstance(ce.event, Exchange)]


def test_produce_v2_legacy_magic1_message():
    [ex] = exchanges("deepflowio__deepflow__00-produce-v2.pcap")
    assert (ex.api_key, ex.api_version, ex.correlation_id, ex.request.client_id) == (0, 2, 1, "console-producer")
    [row] = partition_rows(0, "request", 2, ex.request.body)
    assert (row.topic, row.partition, row.record_count) == ("topic2", 0, 1)
    assert row.records.magics == (1,)
    [message] = decode_records(row.records.data).batches
    assert message.magic == 1 and message.crc_valid and message.key is None
    assert ex.response.body["responses"][0]["partition_responses"][0]["base_offset"] == 0


def test_produce_v7_record_headers_from_kafka_python():
    [ex] = exchanges("deepflowio__deepflow__00-produce-v7-sw8.pcap")
    assert ex.request.client_id == "kafka-python-producer-1"
    [row] = partition_rows(0, "request", 7, ex.request.body)
    [record] = decode_records(row.records.data).records()
    assert [k for k, _ in record.headers] == ["sw8"]
    assert ex.response.body["responses"][0]["partition_responses"][0]["base_offset"] == 7


def test_produce_v9_flexible_request_and_response():
    [ex] = exchanges("deepflowio__deepflow__00-produce-v9.pcap")
    assert (ex.api_version, ex.correlation_id, ex.status) == (9, 47, Status.OK)
    part = ex.response.body["responses"][0]["partition_responses"][0]
    assert (part["base_offset"], part["log_start_offset"], part["record_errors"]) == (35, 16, [])


def test_request_without_response():
    [ex] = exchanges("deepflowio__deepflow__produce-v9.pcap")
    assert (ex.api_key, ex.api_version, ex.correlation_id, ex.status) == (0, 9, 5, Status.NO_RESPONSE)


def test_fetch_v12_with_an_error_code_kafka_does_not_have():
    [ok] = exchanges("deepflowio__deepflow__01-fetch-v12-ok.pcap")
    assert ok.request.body["topics"][0]["topic"] == "zqy-test"
    assert ok.request.body["topics"][0]["partitions"][0]["fetch_offset"] == 36
    [odd] = exchanges("deepflowio__deepflow__01-fetch-v12-unknown.pcap")
    assert odd.status == Status.OK and odd.response.body["error_code"] == 5120
    assert error_name(5120) == "UNKNOWN_ERROR_CODE(5120)"


def test_join_and_sync_group_carry_the_consumer_protocol():
    [join] = exchanges("deepflowio__deepflow__11-join-group-v7.pcap")
    protocols = join.request.body["protocols"]
    assert [p["name"] for p in protocols] == ["range", "cooperative-sticky"]
    assert protocols[0]["metadata"]["topics"] == ["zqy-topic1"]
    assert join.response.body["error_code"] == -1
    [sync] = exchanges("deepflowio__deepflow__14-sync-group-v5.pcap")
    assignment = sync.request.body["assignments"][0]["assignment"]
    assert assignment["assigned_partitions"] == [{"topic": "zqy-topic1", "partitions": [0, 1, 2]}]


def test_api_versions_v3_lists_the_brokers_keys():
    [ex] = exchanges("deepflowio__deepflow__18-api-versions-v3.pcap")
    assert ex.request.body == {"client_software_name": "apache-kafka-java", "client_software_version": "3.0.0"}
    keys = [k["api_key"] for k in ex.response.body["api_keys"]]
    assert max(keys) == 67 and keys[0] == 0


def test_ndpi_java_producer_start_learns_topic_ids():
    exs = exchanges("ntop__nDPI__kafka-2023-12-original.pcapng")
    assert [(e.api_key, e.api_version) for e in exs] == [(18, 3), (22, 4), (3, 12), (0, 9)]
    topic = exs[2].response.body["topics"][0]
    assert (topic["name"], topic["topic_id"]) == ("sampleTopic", "xKTA33FfQbecpJXGJ0TVbA")


def test_arkime_list_offsets_v0_inside_a_vlan():
    [ex] = exchanges("arkime__arkime__kafka.pcap")
    assert (ex.api_key, ex.api_version, ex.status) == (2, 0, Status.NO_RESPONSE)
    [row] = partition_rows(2, "request", 0, ex.request.body)
    assert (row.topic, row.partition) == ("integration.test.topic1475007069352", 0)


def test_go_sniffer_produce_v1_magic0_despite_the_broken_writer():
    metadata, produce = exchanges("40t__go-sniffer__kafka.pcap")
    assert metadata.response.body["brokers"] == [{"node_id": 0, "host": "VM_9_227_centos", "port": 9092}]
    [row] = partition_rows(0, "request", 1, produce.request.body)
    assert row.records.magics == (0,) and row.records.crc_failures == []
    assert produce.response.body["responses"][0]["partition_responses"][0]["base_offset"] == 17


def test_rdkafka_orphan_responses_are_inferred():
    exs = exchanges("ntop__nDPI__kafka-2024-05-rdkafka.pcapng")
    orphans = [e for e in exs if e.status == Status.ORPHAN_RESPONSE]
    assert orphans and all(e.response.inferred for e in orphans)
    assert {(e.response.api_key, e.response.api_version) for e in orphans} <= {(3, 2), (18, 0)}
