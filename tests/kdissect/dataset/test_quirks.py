"""Known quirks of real peers keep their anomaly rows, with who and why, on the bundled samples."""

from __future__ import annotations

import pyarrow.dataset as pads

from kdissect.commands.cli import main

from tests.kdissect.conftest import SAMPLES


def anomalies(tmp_path, sample: str, *args: str) -> list[dict]:  # type: ignore[no-untyped-def]
    out = tmp_path / sample
    assert main(["decode", str(SAMPLES / sample), "-o", str(out), "-q", *args]) == 0
    return pads.dataset(out / "anomalies").to_table().to_pylist()


def test_confluent_kafka_metadata_tail(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rows = [r for r in anomalies(tmp_path, "mixed.pcap") if r["kind"] == "trailing_bytes"]
    assert len(rows) == 1
    assert rows[0]["quirk_of"] == "librdkafka 2.16.0 (confluent-kafka-python)"
    assert "Metadata v12+ request" in rows[0]["quirk"] and rows[0]["direction"] == "request"


def test_mock_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for jobs in ("1", "2"):       # the same rows whichever process decodes a connection
        rows = anomalies(tmp_path / jobs, "mock-transactions.pcap", "--jobs", jobs)
        crc = [r for r in rows if r["kind"] == "crc_mismatch"]
        assert len(crc) == 10 and {r["quirk_of"] for r in crc} == {"librdkafka mock cluster"}
        tails = [r for r in rows if r["kind"] == "trailing_bytes"]
        assert {r["quirk_of"] for r in tails if r["direction"] == "response"} == {"librdkafka mock cluster"}
        assert all(r["quirk_of"] is not None for r in rows if r["kind"] in ("trailing_bytes", "crc_mismatch"))


def test_healthy_kafka_python_traffic_has_no_quirks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert all(r["quirk_of"] is None for r in anomalies(tmp_path, "tansu-kafka-python.pcap"))
