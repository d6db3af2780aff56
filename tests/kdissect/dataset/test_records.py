"""The records table (--records): one row per Kafka record, from the raw bytes of records fields."""

from __future__ import annotations

from pathlib import Path

import kdissect

from tests.kdissect.conftest import public, read_table


def test_v2_record_with_headers(tmp_path: Path) -> None:
    kdissect.write_dataset([public("deepflowio__deepflow__00-produce-v7-sw8.pcap")], tmp_path, record_bytes=True)
    rows = read_table(tmp_path, "records").to_pylist()
    assert len(rows) == 1
    r = rows[0]
    assert (r["topic"], r["partition"], r["direction"], r["correlation_id"], r["api_key"]) == \
        ("quickstart-events", 0, "request", 1, 0)
    assert (r["key"], r["value"], r["key_size"], r["value_size"]) == (b"MyKey", b"Hello Kafka", 5, 11)
    assert r["header_count"] == 1 and r["magic"] == 2 and r["offset"] == 0
    assert (r["producer_id"], r["transactional"], r["control"]) == (-1, False, False)
    assert r["timestamp"].year == 2023 and str(r["timestamp"].tzinfo) == "UTC"
    assert r["connection"] == "10.32.10.221:54618-10.50.71.3:36333#1"


def test_legacy_message_set_without_bytes(tmp_path: Path) -> None:
    for name in ("deepflowio__deepflow__00-produce-v2.pcap", "40t__go-sniffer__kafka.pcap"):
        kdissect.write_dataset([public(name)], tmp_path, records=True)
    parts = read_table(tmp_path, "partitions").to_pandas()
    rows = read_table(tmp_path, "records").to_pandas()
    produced = parts[(parts.direction == "request") & (parts.api_name == "Produce")]
    assert len(rows) == produced.record_count.sum() >= 2
    assert set(rows.magic) == {0, 1}
    assert rows.key.isna().all() and rows.value.isna().all() and (rows.value_size > 0).all()
    assert rows.producer_id.isna().all() and not rows.transactional.any()
    assert rows[rows.magic == 0].timestamp.isna().all()


def test_fetch_response_records(public_dataset: Path) -> None:
    parts = read_table(public_dataset, "partitions").to_pandas()
    rows = read_table(public_dataset, "records").to_pandas()
    fetched = parts[(parts.api_name == "Fetch") & (parts.direction == "response")]
    fetched_rows = rows[(rows.api_key == 1) & (rows.direction == "response")]
    assert len(fetched_rows) == fetched.record_count.fillna(0).sum()
    # Every records row lines up with a partitions row of the same message.
    cols = ["capture", "connection", "correlation_id", "direction", "partition"]
    keys = set(parts[cols].itertuples(index=False, name=None))
    assert set(rows[cols].itertuples(index=False, name=None)) <= keys
