"""The summary a decode ends with: its counts add up, and say what was not decoded and why."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

import kdissect
from kdissect.run.summary import format_summary, tls_advice

from tests.kdissect.conftest import SAMPLES, read_table

TLS = SAMPLES / "tls"


def _summary(result) -> str:  # type: ignore[no-untyped-def]
    return format_summary(result.counts, packets=result.packets, bytes_read=result.bytes_read, elapsed=1.0,
                          outdir=str(result.outdir), tables=["exchanges", "partitions", "anomalies"])


def _line(summary: str, name: str) -> str:
    return next(line for line in summary.splitlines() if line.startswith(name + " "))


def test_the_connections_line_adds_up_on_the_tls_samples(tmp_path: Path) -> None:
    """samples/tls: 80 plaintext Kafka connections and 10 decrypted with the keys a pcapng carries; 70 TLS
    ones without keys; 10 TLS ones off Kafka's ports (19443) without keys, not taken for Kafka."""
    result = kdissect.write_dataset(TLS, tmp_path / "out")
    text = _summary(result)
    assert _line(text, "connections") == ("connections  90 Kafka  (of 170 TCP connections with data; "
                                          "70 TLS not decoded, 10 not taken for Kafka)")
    assert _line(text, "tls") == f"tls          {tls_advice(result.counts)}"
    assert tls_advice(result.counts).startswith("70 TLS connections not decoded; decrypt with --tls-keylog FILE")
    # The parts, from the dataset: connections with exchanges; connections with a tls anomaly.
    exchanges = read_table(tmp_path / "out", "exchanges").select(["capture", "connection"]).to_pylist()
    anomalies = read_table(tmp_path / "out", "anomalies")
    tls = anomalies.filter(pc.equal(anomalies["kind"], "tls")).select(["capture", "connection"]).to_pylist()
    assert len({tuple(r.values()) for r in exchanges}) == 90 and len({tuple(r.values()) for r in tls}) == 70


def test_all_kafka_is_one_number_and_keys_make_tls_kafka(tmp_path: Path) -> None:
    plain = kdissect.write_dataset(SAMPLES / "mixed.pcap", tmp_path / "plain")
    assert _line(_summary(plain), "connections") == "connections  17 Kafka"
    keyed = kdissect.write_dataset(TLS / "tls13.pcap", tmp_path / "keyed", tls_keylog=TLS / "tls13.keys")
    text = _summary(keyed)
    assert _line(text, "connections") == "connections  10 Kafka" and "\ntls " not in text
    assert tls_advice(keyed.counts) == ""
    off_port = kdissect.write_dataset(TLS / "tls13-port19443.pcap", tmp_path / "off")
    assert _line(_summary(off_port), "connections") == ("connections  0 Kafka  (of 10 TCP connections with data; "
                                                        "10 not taken for Kafka)")
