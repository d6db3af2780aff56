"""The Python API that notebooks use."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import kdissect
from kdissect.dataset.tables import EXCHANGES

from tests.kdissect.conftest import public


def test_read_pcap_yields_typed_exchanges() -> None:
    items = list(kdissect.read_pcap(public("ntop__nDPI__kafka-2023-12-original.pcapng")))
    assert [i.exchange.api_key for i in items] == [18, 22, 3, 0]
    first = items[0]
    assert isinstance(first, kdissect.CapturedExchange)
    assert first.capture == "ntop__nDPI__kafka-2023-12-original.pcapng"
    assert first.connection.broker_port == 9092
    assert first.exchange.request.client_id == "console-producer"
    assert first.exchange.latency_ns > 0
    assert first.row()["api_name"] == "ApiVersions"


def test_ports_restrict_detection() -> None:
    cap = public("deepflowio__deepflow__00-produce-v7-sw8.pcap")
    assert len(list(kdissect.read_pcap(cap, ports="36333"))) == 1
    assert list(kdissect.read_pcap(cap, ports="9092")) == []


def test_exchanges_frame_types() -> None:
    df = kdissect.exchanges_frame(public("ntop__nDPI__kafka-2024-05-rdkafka.pcapng"))
    assert list(df.columns) == EXCHANGES.names
    assert str(df.request_ts.dtype) == "datetime64[us, UTC]"
    assert (df.api_name == "Metadata").any() and len(df) >= 10


def test_write_dataset_returns_counts(tmp_path: Path) -> None:
    result = kdissect.write_dataset([public("ntop__nDPI__kafka-2023-12-original.pcapng")], tmp_path)
    assert result.counts.exchanges == 4 and result.counts.per_api["Produce"] == 1
    assert len(result.counts.connections) == 1
    assert {p.parent.name for p in result.files} == {"exchanges", "partitions", "anomalies"}
    df = pd.read_parquet(tmp_path / "exchanges")
    assert len(df) == 4


def test_errors_are_kdissect_errors(tmp_path: Path) -> None:
    with pytest.raises(kdissect.KdissectError, match="(?i)no such file"):
        list(kdissect.read_pcap(tmp_path / "missing.pcap"))
    with pytest.raises(kdissect.KdissectError, match="--ports"):
        kdissect.write_dataset([public("arkime__arkime__kafka.pcap")], tmp_path, ports="x")
