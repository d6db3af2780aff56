"""Kafka 0.7 captures through the whole product: detection, tables, records, show -V, forcing."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.dataset as ds

from kdissect import write_dataset
from kdissect.run.decode import decode_files
from kdissect.commands.show import ShowOptions, show
from kdissect.run.source import DecodeOptions, protocol_option
from tests.capture.pcaptools import Conversation, read_records, write_pcap
from tests.dissector.v07.build import (
    fetch,
    fetch_response,
    gzip_wrapper,
    message,
    multifetch,
    multifetch_response,
    multiproduce,
    offsets,
    offsets_response,
    produce,
    snappy_wrapper,
)

from tests.kdissect.golden import COLUMNS, SAMPLES, render

SET = message(b"hello") + message(b"world!")
BROKER = ("10.7.0.2", 9092)


def every_request_type(ts: int = 1_700_000_000_000_000_000, client: tuple[str, int] = ("10.7.0.1", 40000),
                       mss: int = 1400) -> Conversation:
    c = Conversation(client=client, server=BROKER, ts=ts, mss=mss).handshake()
    c.send(True, produce("events", 0, SET))
    c.send(True, produce("events", 1, gzip_wrapper(SET) + snappy_wrapper(gzip_wrapper(message(b"nested")))))
    c.send(True, offsets("events", 0, -2, 1)).send(False, offsets_response([0]))
    c.send(True, fetch("events", 0, 0)).send(False, fetch_response(SET + gzip_wrapper(message(b"a") + message(b"b"))))
    c.send(True, multifetch([("events", 0, 29, 100), ("other", 1, 7, 100)]))
    c.send(False, multifetch_response([(0, message(b"bad crc", bad_crc=True)), (1, b"")]))
    c.send(True, multiproduce([("events", 0, SET), ("other", 1, snappy_wrapper(SET))]))
    return c.close()


def rows(outdir: Path, table: str) -> list[dict]:
    return ds.dataset(outdir / table, format="parquet").to_table().to_pylist()


def test_every_request_type_into_the_tables(tmp_path):
    pcap = write_pcap(tmp_path / "v07.pcap", 1, every_request_type().records)
    write_dataset([pcap], tmp_path / "out", records=True)
    ex = rows(tmp_path / "out", "exchanges")
    assert [(r["api_key"], r["api_name"], r["api_version"], r["protocol"], r["correlation_id"], r["client_id"],
             r["status"], r["error_name"]) for r in ex] == [
        (0, "Produce", None, "0.7", 1, None, "no_response_expected", None),
        (0, "Produce", None, "0.7", 2, None, "no_response_expected", None),
        (2, "ListOffsets", None, "0.7", 3, None, "ok", "NONE"),
        (1, "Fetch", None, "0.7", 4, None, "ok", "NONE"),
        (1, "MultiFetch", None, "0.7", 5, None, "ok", "OFFSET_OUT_OF_RANGE"),
        (0, "MultiProduce", None, "0.7", 6, None, "no_response_expected", None),
    ]
    parts = rows(tmp_path / "out", "partitions")
    mf = [(p["topic"], p["partition"], p["error_name"], p["base_offset"]) for p in parts
          if p["api_name"] == "MultiFetch" and p["direction"] == "response"]
    assert mf == [("events", 0, "NONE", 29), ("other", 1, "OFFSET_OUT_OF_RANGE", None)]
    recs = rows(tmp_path / "out", "records")
    fetched = [(r["offset"], r["value_size"]) for r in recs if r["correlation_id"] == 4]
    gz_at = len(SET)
    assert fetched == [(0, 5), (14, 6), (gz_at, 1), (gz_at, 1)]
    nested = [r["value_size"] for r in recs if r["correlation_id"] == 2]
    assert nested == [5, 6, 6]                              # gzip(SET), snappy(gzip(nested))
    anomalies = rows(tmp_path / "out", "anomalies")
    assert [(a["kind"], a["direction"]) for a in anomalies] == [("crc_mismatch", "response")]
    assert "MultiFetch 0.7 response corr 5 events[0]" in anomalies[0]["detail"]


def test_show_prints_the_tree(tmp_path):
    pcap = write_pcap(tmp_path / "v07.pcap", 1, every_request_type().records)
    out = io.StringIO()
    show(pcap, out, ShowOptions(verbose=True))
    text = out.getvalue()
    assert "MultiFetch 0.7 response corr=5  OFFSET_OUT_OF_RANGE" in text
    assert "Kafka 0.7 Produce request" in text and "request_type: 0" in text
    assert "snappy wrapper of 1 messages" in text and "gzip wrapper of 1 messages" in text
    assert "payload 'nested'" in text and "CRC mismatch" in text


def test_a_capture_starting_mid_connection(tmp_path):
    c = every_request_type(mss=40)          # frames span several segments
    # no SYN, and the first bytes are the middle of the second PRODUCE (its first segments not captured)
    big = [i for i, r in enumerate(c.records) if len(r[2]) == 54 + 40]   # full-size data segments
    pcap = write_pcap(tmp_path / "late.pcap", 1, c.records[big[1] + 1:])
    write_dataset([pcap], tmp_path / "out")
    ex = rows(tmp_path / "out", "exchanges")
    assert {r["protocol"] for r in ex} == {"0.7"}
    assert [(r["api_name"], r["correlation_id"], r["status"]) for r in ex] == [
        ("ListOffsets", 1, "ok"), ("Fetch", 2, "ok"), ("MultiFetch", 3, "ok"),
        ("MultiProduce", 4, "no_response_expected")]
    assert "resync" in {a["kind"] for a in rows(tmp_path / "out", "anomalies")}


def test_side_by_side_with_0_8_connections_and_no_0_8_row_changes(tmp_path):
    lt, real = read_records(SAMPLES / "mixed.pcap")
    v07 = every_request_type(ts=real[10][0] + 1000, client=("127.0.0.1", 40777)).records
    v07 = [(ts, lt, data, wl) for ts, _, data, wl in v07]
    merged = sorted(real + v07, key=lambda r: r[0])
    pcap = write_pcap(tmp_path / "mixed.pcap", lt, merged)
    write_dataset([pcap], tmp_path / "out")
    text = render(tmp_path / "out")
    lines = text.splitlines()
    conn = COLUMNS.index("connection")
    ours = [ln for ln in lines[1:] if ln.split("\t")[conn].startswith("127.0.0.1:40777-")]
    assert len(ours) == 6
    others = "\n".join([lines[0]] + [ln for ln in lines[1:] if ln not in ours]) + "\n"
    assert others == (SAMPLES / "mixed.exchanges.tsv").read_text()
    protocols = {(r["connection"].startswith("127.0.0.1:40777-"), r["protocol"]) for r in rows(tmp_path / "out",
                                                                                                "exchanges")}
    assert protocols == {(True, "0.7"), (False, "0.8+")}


def test_protocol_forcing_by_port(tmp_path):
    # A 0.7 FETCH to a topic of 18 characters whose bytes also decode as... nothing else; force the other way.
    pcap = write_pcap(tmp_path / "v07.pcap", 1, every_request_type().records)
    opts = DecodeOptions(protocol=protocol_option(["0.8+=9092"]))
    decode_files([pcap], tmp_path / "out", opts)
    ex = rows(tmp_path / "out", "exchanges")
    assert {r["protocol"] for r in ex} == {"0.8+"}
    opts = DecodeOptions(protocol=protocol_option(["0.7=9092"]))
    decode_files([pcap], tmp_path / "out2", opts)
    assert {r["protocol"] for r in rows(tmp_path / "out2", "exchanges")} == {"0.7"}


def test_cli_protocol_option(tmp_path, capsys):
    from kdissect.commands.cli import main

    pcap = write_pcap(tmp_path / "v07.pcap", 1, every_request_type().records)
    assert main(["show", str(pcap), "--protocol", "0.7=9092", "-c", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all("Produce 0.7 request" in line for line in out)
    assert main(["decode", str(pcap), "-o", str(tmp_path / "o"), "--protocol", "0.6", "-q"]) == 2   # bad use
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--protocol: unknown protocol '0.6'" in err


def test_show_api_filter_on_0_7_names(tmp_path):
    from kdissect.commands.filters import MessageFilter, parse_apis

    pcap = write_pcap(tmp_path / "v07.pcap", 1, every_request_type().records)

    def lines(*apis: str) -> list[str]:
        out = io.StringIO()
        show(pcap, out, ShowOptions(filter=MessageFilter(apis=parse_apis(list(apis)))))
        return [" ".join(line.split()[5:7]) for line in out.getvalue().splitlines()]

    assert lines("MultiFetch") == ["MultiFetch 0.7", "MultiFetch 0.7"]
    assert lines("Fetch") == ["Fetch 0.7", "Fetch 0.7"]              # not MultiFetch, though it shares key 1
    assert lines("multiproduce,ListOffsets") == ["ListOffsets 0.7", "ListOffsets 0.7", "MultiProduce 0.7"]
