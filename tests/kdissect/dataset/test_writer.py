"""The Parquet dataset written from the public captures, read back with pyarrow."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

import kdissect
from kdissect.dataset.tables import SCHEMAS

from tests.kdissect.conftest import PUBLIC, SAMPLES, public, read_table

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
PCAP_HEADER = bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000")  # no packets


def _one(df, capture: str):
    rows = df[df.capture == capture]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_every_capture_has_a_file_per_table(public_dataset: Path) -> None:
    captures = sorted(p.name for p in PUBLIC.iterdir() if ".pcap" in p.name)
    for table in ("exchanges", "partitions", "anomalies", "records"):
        files = sorted((public_dataset / table).glob("*.parquet"))
        assert len(files) == len(captures), table
        assert all(f.name.startswith(tuple(captures)) for f in files)
        assert not list((public_dataset / table).glob(".*")), "temporary files left behind"


def test_schemas_are_the_contract(public_dataset: Path) -> None:
    for table, schema in SCHEMAS.items():
        got = read_table(public_dataset, table).schema
        assert got.names == schema.names
        assert [f.type for f in got] == [f.type for f in schema], table
        for name in got.names:
            assert SNAKE.match(name)
    ts = read_table(public_dataset, "exchanges").schema.field("request_ts").type
    assert ts == pa.timestamp("us", tz="UTC")


def test_produce_v7_exchange(exchanges) -> None:
    r = _one(exchanges, "deepflowio__deepflow__00-produce-v7-sw8.pcap")
    assert (r.api_key, r.api_name, r.api_version) == (0, "Produce", 7)
    assert r.correlation_id == 1
    assert r.client_id == "kafka-python-producer-1"
    assert r.status == "ok" and not r.inferred
    assert (r.client_ip, r.client_port, r.broker_ip, r.broker_port) == ("10.32.10.221", 54618, "10.50.71.3", 36333)
    assert r.connection == "10.32.10.221:54618-10.50.71.3:36333#1"
    assert r.latency_ms > 0
    assert abs((r.response_ts - r.request_ts).total_seconds() * 1000 - r.latency_ms) < 1
    assert 2015 <= r.request_ts.year <= 2030 and str(r.request_ts.tz) == "UTC"
    assert (r.error_code, r.error_name, r.throttle_ms) == (0, "NONE", 0)
    assert r.request_bytes == 312 and r.response_bytes == 69
    req = json.loads(r.request)
    assert req["acks"] == 1
    part = req["topic_data"][0]["partition_data"][0]
    assert req["topic_data"][0]["name"] == "quickstart-events"
    assert part["records"]["record_count"] == 1 and part["records"]["crc_failures"] == []
    assert isinstance(part["records"]["first_crc"], int)
    resp = json.loads(r.response)
    assert resp["responses"][0]["partition_responses"][0]["base_offset"] == 7


def test_produce_v7_partitions(partitions) -> None:
    rows = partitions[partitions.capture == "deepflowio__deepflow__00-produce-v7-sw8.pcap"]
    req = rows[rows.direction == "request"].iloc[0]
    resp = rows[rows.direction == "response"].iloc[0]
    assert (req.topic, req.partition, req.record_count, req.batch_count, req.compression) == \
        ("quickstart-events", 0, 1, 1, "none")
    assert req.bytes == 232 and req.base_offset == 0 and req.last_offset == 0
    assert (resp.topic, resp.partition, resp.error_name, resp.base_offset, resp.offset) == \
        ("quickstart-events", 0, "NONE", 7, 7)
    assert req.api_name == resp.api_name == "Produce" and req.correlation_id == resp.correlation_id == 1


def test_unknown_error_code_is_named_not_crashed(exchanges, partitions) -> None:
    r = _one(exchanges, "deepflowio__deepflow__01-fetch-v12-unknown.pcap")
    assert (r.api_name, r.api_version, r.status) == ("Fetch", 12, "ok")
    assert r.error_code == 5120 and r.error_name == "UNKNOWN_ERROR_CODE(5120)"


def test_group_errors(exchanges) -> None:
    for name, api, version in (("11-join-group-v7", "JoinGroup", 7), ("14-sync-group-v5", "SyncGroup", 5)):
        r = _one(exchanges, f"deepflowio__deepflow__{name}.pcap")
        assert (r.api_name, r.api_version, r.correlation_id) == (api, version, 120)
        assert (r.error_code, r.error_name) == (-1, "UNKNOWN_SERVER_ERROR")


def test_lone_request_and_statuses(exchanges) -> None:
    r = _one(exchanges, "deepflowio__deepflow__produce-v9.pcap")
    assert (r.api_name, r.api_version, r.status, r.correlation_id) == ("Produce", 9, "no_response", 5)
    assert pd.isna(r.response) and pd.isna(r.response_ts) and pd.isna(r.latency_ms) and pd.isna(r.error_code)
    assert json.loads(r.request)["topic_data"]
    rd = exchanges[exchanges.capture == "ntop__nDPI__kafka-2024-05-rdkafka.pcapng"]
    orphans = rd[rd.status == "orphan_response"]
    assert len(orphans) >= 1 and orphans.inferred.all() and orphans.client_id.isna().all()
    assert set(rd.status) >= {"ok", "orphan_response", "no_response"}
    assert set(rd.client_id.dropna()) == {"rdkafka"}


def test_idempotent_producer_start(exchanges) -> None:
    rows = exchanges[exchanges.capture == "ntop__nDPI__kafka-2023-12-original.pcapng"].sort_values("correlation_id")
    assert list(zip(rows.api_name, rows.api_version, strict=True)) == \
        [("ApiVersions", 3), ("InitProducerId", 4), ("Metadata", 12), ("Produce", 9)]
    assert list(rows.correlation_id) == [3, 4, 5, 6]
    assert set(rows.client_id) == {"console-producer"} and (rows.latency_ms > 0).all()
    assert (rows.status == "ok").all()


def test_records_fields_carry_their_summary_not_the_records(tmp_path: Path) -> None:
    """Record payloads reach the dataset only with --records/--record-bytes, never inside a body's JSON."""
    from dissector.records import RecordsSummary
    kdissect.write_dataset([SAMPLES / "mock-produce-consume.pcap"], tmp_path, record_bytes=True)
    exchanges = read_table(tmp_path, "exchanges").to_pandas()
    summary_keys = set(RecordsSummary().to_dict())

    def records_fields(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "records" and isinstance(v, dict):
                    yield v
                else:
                    yield from records_fields(v)
        elif isinstance(node, list):
            for v in node:
                yield from records_fields(v)
    seen = {"Produce": 0, "Fetch": 0}
    for r in exchanges[exchanges.api_name.isin(list(seen))].itertuples():
        for text in (r.request, r.response):
            for rec in records_fields(json.loads(text) if text else None):
                assert set(rec) == summary_keys, set(rec) ^ summary_keys
                seen[r.api_name] += 1
    assert seen["Produce"] and seen["Fetch"], seen


def test_json_bodies_parse_with_snake_case_names(exchanges) -> None:
    def keys(node):
        if isinstance(node, dict):
            for k, v in node.items():
                yield k
                yield from keys(v)
        elif isinstance(node, list):
            for v in node:
                yield from keys(v)
    n = 0
    for text in list(exchanges.request.dropna()) + list(exchanges.response.dropna()):
        body = json.loads(text)
        assert isinstance(body, dict)
        bad = [k for k in keys(body) if not SNAKE.match(k)]
        assert not bad, bad
        n += 1
    assert n >= 50


def test_partition_rows_come_from_the_schema(partitions) -> None:
    rows = partitions[partitions.capture == "deepflowio__deepflow__mixed-with-unsupported.pcap"]
    # OffsetCommit v8: request and response both list orders[0]; the incremental Fetch v13 lists none.
    assert sorted(zip(rows.api_name, rows.direction, strict=True)) == \
        [("OffsetCommit", "request"), ("OffsetCommit", "response")]
    req = rows[rows.direction == "request"].iloc[0]
    assert (req.topic, req.partition, req.offset, req.base_offset) == ("orders", 0, 0, 0)
    assert pd.isna(req.record_count)


def test_capture_level_anomaly_has_no_connection(anomalies) -> None:
    rows = anomalies[anomalies.capture == "40t__go-sniffer__kafka.pcap"]
    assert "caplen_exceeds_wirelen" in set(rows.kind)
    assert rows[rows.kind == "caplen_exceeds_wirelen"].connection.isna().all()
    gaps = anomalies[anomalies.kind == "gap"]
    assert gaps.connection.notna().all() and gaps.direction.isin(["request", "response"]).all()


def test_redecode_replaces_rows(tmp_path: Path) -> None:
    src = public("deepflowio__deepflow__00-produce-v7-sw8.pcap")
    out = tmp_path / "out"
    kdissect.write_dataset([src], out)
    kdissect.write_dataset(src, out)
    assert read_table(out, "exchanges").num_rows == 1
    assert len(list((out / "exchanges").iterdir())) == 1
    copy = tmp_path / "elsewhere" / src.name
    copy.parent.mkdir()
    shutil.copy(src, copy)
    kdissect.write_dataset([copy], out)  # same name, other path: its own file
    assert read_table(out, "exchanges").num_rows == 2
    kdissect.write_dataset([copy, src], out, records=True)
    kdissect.write_dataset([copy, src], out)  # records files of an earlier --records run go away
    assert read_table(out, "exchanges").num_rows == 2
    assert not list((out / "records").glob("*.parquet"))


def test_empty_capture_writes_typed_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(PCAP_HEADER)
    result = kdissect.write_dataset([empty], tmp_path / "out", records=True)
    assert result.counts.exchanges == 0
    for table, schema in SCHEMAS.items():
        files = list((tmp_path / "out" / table).glob("*.parquet"))
        assert len(files) == 1
        t = pq.read_table(files[0])
        assert t.num_rows == 0 and t.schema.equals(schema, check_metadata=False)


def test_crc_mismatch_becomes_an_anomaly(tmp_path: Path) -> None:
    data = bytearray(public("deepflowio__deepflow__00-produce-v7-sw8.pcap").read_bytes())
    at = data.find(b"Hello Kafka")
    data[at] ^= 0x01  # the pipeline does not check TCP checksums; the record batch CRC catches it
    bad = tmp_path / "flipped.pcap"
    bad.write_bytes(bytes(data))
    kdissect.write_dataset([bad], tmp_path / "out")
    rows = read_table(tmp_path / "out", "anomalies").to_pandas()
    crc = rows[rows.kind == "crc_mismatch"]
    assert len(crc) == 1
    assert crc.iloc[0].direction == "request" and "quickstart-events[0]" in crc.iloc[0].detail
    assert crc.iloc[0].connection == "10.32.10.221:54618-10.50.71.3:36333#1"


def test_row_groups_and_compression(public_dataset: Path) -> None:
    f = next((public_dataset / "exchanges").glob("ntop__nDPI__kafka-2024*.parquet"))
    md = pq.ParquetFile(f).metadata
    assert md.num_row_groups >= 1
    assert md.row_group(0).column(0).compression == "ZSTD"


def test_gzipped_capture_and_progress(tmp_path: Path) -> None:
    import gzip
    import io

    from kdissect.run.progress import ProgressLine

    src = public("ntop__nDPI__kafka-2023-12-original.pcapng")
    gz = tmp_path / (src.name + ".gz")
    gz.write_bytes(gzip.compress(src.read_bytes()))
    screen = io.StringIO()
    bar = ProgressLine(screen, force=True)
    result = kdissect.write_dataset([gz, src], tmp_path / "out", progress=bar)
    bar.clear()
    assert result.counts.exchanges == 8 and result.counts.captures == 2
    df = read_table(tmp_path / "out", "exchanges").to_pandas()
    assert sorted(df.capture.unique()) == sorted([gz.name, src.name])
    assert "[1/2]" in screen.getvalue() and "exchanges" in screen.getvalue()
    assert screen.getvalue().endswith("\r")  # cleared: the summary starts on a clean line


def test_nested_error_is_the_first_non_zero_one_and_not_text_inside_a_value():
    from kdissect.dataset.bodies import body_error
    body = {"throttle_time_ms": 0, "responses": [
        {"name": 'x"error_code":5', "partitions": [{"partition_index": 0, "error_code": 0},
                                                  {"partition_index": 1, "error_code": 6}]},
        {"name": "y", "partitions": [{"partition_index": 0, "error_code": 3}]}]}
    assert body_error(body) == (6, "NOT_LEADER_OR_FOLLOWER")
    assert body_error({"error_code": 0, "topics": []}) == (0, "NONE")
    assert body_error({"error_code": 27}) == (27, "REBALANCE_IN_PROGRESS")


_JSON_PARTS = st.sampled_from([b'"error_code":', b"0", b"-", b"1", b"9", b"x", b",", b"{", b"}", b"null", b'"'])


@settings(max_examples=400, deadline=None)
@given(st.lists(_JSON_PARTS, max_size=14).map(b"".join))
def test_a_rows_nested_error_is_the_patterns_first_match(text: bytes) -> None:
    # The rows look for the pattern only from a key whose value does not start with 0.
    from kdissect.dataset.rows import _NESTED_ERROR, _nested_error
    m = _NESTED_ERROR(text)
    assert _nested_error(text) == (int(m.group(1)) if m else 0)


def test_the_files_are_the_bytes_pyarrow_parquets_writer_makes(tmp_path: Path, monkeypatch) -> None:
    # kdissect.dataset.writer writes through pyarrow's inner writer, to spare a decode the import of
    # pyarrow.parquet (and its filesystems); pyarrow.parquet.ParquetWriter is its fallback.
    from kdissect.dataset import writer as dataset

    writer = dataset.parquet_writer(tmp_path / "empty.parquet", "anomalies", SCHEMAS["anomalies"])
    writer.close()
    assert type(writer) is dataset.LocalParquetFile
    assert pq.read_table(tmp_path / "empty.parquet").schema.equals(SCHEMAS["anomalies"])
    captures = [SAMPLES / "mixed.pcap", SAMPLES / "group-rebalance.pcap"]
    kdissect.write_dataset(captures, tmp_path / "inner", records=True)

    def moved(*args, **kwargs):
        raise ImportError("as if pyarrow had moved its inner writer")

    monkeypatch.setattr(dataset, "LocalParquetFile", moved)
    kdissect.write_dataset(captures, tmp_path / "public", records=True)
    files = sorted(p.relative_to(tmp_path / "inner") for p in (tmp_path / "inner").rglob("*.parquet"))
    assert len(files) == 8
    assert files == sorted(p.relative_to(tmp_path / "public") for p in (tmp_path / "public").rglob("*.parquet"))
    for f in files:
        assert (tmp_path / "inner" / f).read_bytes() == (tmp_path / "public" / f).read_bytes(), f


def test_partition_rows_carry_their_exchanges_client_id(tmp_path: Path) -> None:
    # Real captures of several clients (producers, a consumer group, admin calls; legacy versions) and of
    # 0.7 clients, whose protocol has no client id.
    kdissect.write_dataset([SAMPLES / "mixed.pcap", SAMPLES / "legacy-clients.pcap", SAMPLES / "v07" / "clients.pcap"],
                           tmp_path)
    keys = ["capture", "connection", "correlation_id"]
    ex = read_table(tmp_path, "exchanges").to_pandas()[[*keys, "client_id"]]
    parts = read_table(tmp_path, "partitions").to_pandas()
    joined = parts.merge(ex, on=keys, how="left", suffixes=("", "_of_exchange"), validate="many_to_one")
    assert len(joined) == len(parts) and len(parts) > 100
    same = (joined.client_id == joined.client_id_of_exchange) | (joined.client_id.isna()
                                                                & joined.client_id_of_exchange.isna())
    assert same.all(), joined[~same]
    assert joined.client_id.notna().sum() > 100 and joined.client_id.nunique() >= 3
    assert joined[joined.capture == "clients.pcap"].client_id.isna().all()
