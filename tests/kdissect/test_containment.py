"""One bad message costs one exchange: row building contained, values beyond the dataset's types.

Hand-built captures (no real peer sends these): a Produce v3 batch whose last offset falls below
int64, record offsets and timestamps pushed past it, and failures injected into row building.
Each runs in both builds, compiled and pure, in a process of its own (``KDISSECT_PURE``).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

import hotpath as compiled
from dissector.events import Anomaly, DecodeFailure, Direction, Exchange, Request, Response, Status
from kdissect.dataset.writer import CaptureWriter, prepare_outdir
from kdissect.dataset.rows import RowOptions
from tests.capture import pcaptools as pt
from tests.kdissect import bombs

REPO = Path(__file__).resolve().parents[2]
I64_MIN = -(1 << 63)


def produce_v3(corr: int, records: bytes, topic: str = "t") -> bytes:
    body = struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic.encode()
    body += struct.pack(">ii", 1, 0) + struct.pack(">i", len(records)) + records
    return pt.kafka_request(0, 3, corr, "hostile", body)


def produce_response_v3(corr: int, topic: str = "t") -> bytes:
    body = struct.pack(">ii", corr, 1) + struct.pack(">h", len(topic)) + topic.encode()
    body += struct.pack(">iihqq", 1, 0, 0, 42, -1) + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def v2_batch(base_offset: int, last_offset_delta: int, base_ts: int = 1_700_000_000_000,
             deltas: tuple[tuple[int, int], ...] = ((0, 0),)) -> bytes:
    """A v2 batch whose records have these (offset delta, timestamp delta) pairs."""
    recs = b""
    for off_delta, ts_delta in deltas:
        rec = (b"\x00" + bombs._varint(ts_delta) + bombs._varint(off_delta) + bombs._varint(-1)
               + bombs._varint(1) + b"x" + bombs._varint(0))
        recs += bombs._varint(len(rec)) + rec
    import crc32c
    body = struct.pack(">hiqqqhii", 0, last_offset_delta, base_ts, base_ts, -1, -1, -1, len(deltas)) + recs
    return (struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(body), 0, 2) + struct.pack(">I", crc32c.crc32c(body))
            + body)


def hostile_capture(path: Path, batch: bytes) -> Path:
    """ApiVersions, a Produce v3 carrying ``batch`` (answered), then a Metadata exchange: three exchanges."""
    c = pt.Conversation().handshake()
    c.send(True, pt.api_versions_request(1)).send(False, pt.api_versions_response(1))
    c.send(True, produce_v3(2, batch)).send(False, produce_response_v3(2))
    c.send(True, pt.metadata_request(3)).close()
    path.write_bytes(pt.pcap_bytes(c.records))
    return path


def decode_in(build: str, capture: Path, out: Path, *args: str, patch: str = "") -> dict:
    """``kdissect decode`` in a process of its own and build; the tables read back, and its exit status."""
    if build == "compiled" and not compiled.available():
        if os.environ.get("KDISSECT_REQUIRE_COMPILED"):
            pytest.fail("no compiled module")
        pytest.skip("no compiled build")
    env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"}
    if build == "pure":
        env["KDISSECT_PURE"] = "1"
    code = (f"import sys\n{patch}\nfrom kdissect.commands.cli import main\n"
            f"sys.exit(main(['decode', '-q', '--jobs', '1', '-o', {str(out)!r}, {str(capture)!r}, *{list(args)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    tables = {}
    for t in ("exchanges", "partitions", "anomalies", "records"):
        if (out / t).is_dir():
            tables[t] = ds.dataset(out / t, format="parquet").to_table().to_pylist()
    return {"status": proc.returncode, "stderr": proc.stderr, **tables}


BUILDS = ["compiled", "pure"]


@pytest.mark.parametrize("build", BUILDS)
def test_a_last_offset_below_int64_is_null_with_an_anomaly_not_a_lost_capture(tmp_path: Path, build: str) -> None:
    """Base offset -2^63, last offset delta -1: `kdissect decode` ended in a TypeError, no dataset."""
    cap = hostile_capture(tmp_path / "p.pcap", v2_batch(I64_MIN, -1))
    got = decode_in(build, cap, tmp_path / "out", "--records")
    assert got["status"] == 0, got["stderr"][-2000:]
    assert [(x["api_name"], x["status"]) for x in got["exchanges"]] == \
        [("ApiVersions", "ok"), ("Produce", "ok"), ("Metadata", "no_response")]
    produce = got["exchanges"][1]
    records = json.loads(produce["request"])["topic_data"][0]["partition_data"][0]["records"]
    assert records["first_offset"] == I64_MIN and records["last_offset"] is None       # the JSON bodies
    (req_row,) = [p for p in got["partitions"] if p["direction"] == "request"]
    assert req_row["base_offset"] == I64_MIN and req_row["last_offset"] is None        # the Parquet columns
    assert [r["offset"] for r in got["records"]] == [I64_MIN]                         # the records table
    kinds = [(a["kind"], a["direction"]) for a in got["anomalies"]]
    assert kinds == [("out_of_range", "request")]
    assert "last offset delta -1" in got["anomalies"][0]["detail"] and "t[0]" in got["anomalies"][0]["detail"]


@pytest.mark.parametrize("build", BUILDS)
def test_record_offsets_and_timestamps_beyond_their_types_are_null(tmp_path: Path, build: str) -> None:
    """--records: base offset + offset delta past int64; base timestamp + delta past int64, and a timestamp
    in int64 milliseconds but past what microseconds (timestamp[us]) hold."""
    top = (1 << 63) - 1
    deltas = ((0, 0), (1, 0), (0, 1 << 62), (0, top // 1000 + 1 - 1_700_000_000_000))
    cap = hostile_capture(tmp_path / "r.pcap", v2_batch(top, 1, base_ts=1_700_000_000_000 + (1 << 62),
                                                         deltas=deltas))
    got = decode_in(build, cap, tmp_path / "out", "--records")
    assert got["status"] == 0, got["stderr"][-2000:]
    assert len(got["exchanges"]) == 3
    offsets = [r["offset"] for r in got["records"]]
    assert offsets == [top, None, top, top]
    stamps = [r["timestamp"] for r in got["records"]]
    assert stamps[0] is None and stamps[2] is None and stamps[3] is None    # past timestamp[us]; past int64
    details = [a["detail"] for a in got["anomalies"] if a["kind"] == "out_of_range"]
    assert any("2 record offset(s) or timestamp(s) beyond int64" in d for d in details)
    assert any("record timestamps past the year 294,000" in d for d in details)
    (req_row,) = [p for p in got["partitions"] if p["direction"] == "request"]
    assert req_row["last_offset"] is None


# Fails while writing the JSON of the one records summary whose first offset is 777: an exception
# in row building, wherever it comes from (compiled, bodies.body_bytes looks its helpers up each call).
# The C writer's summary hook fails first (it then leaves the body to orjson), then orjson's default.
_FAIL_ONE = """
import kdissect.dataset.bodies as b
def _failing(real):
    def hook(value):
        if getattr(value, "first_offset", None) == 777:
            raise RuntimeError("injected")
        return real(value)
    return hook
b._summary_values = _failing(b._summary_values)
b._default = _failing(b._default)
"""


@pytest.mark.parametrize("build", BUILDS)
def test_an_exception_building_one_exchange_costs_that_exchange_alone(tmp_path: Path, build: str) -> None:
    c = pt.Conversation().handshake()
    for corr, base in ((1, 5), (2, 777), (3, 9)):
        c.send(True, produce_v3(corr, v2_batch(base, 0))).send(False, produce_response_v3(corr))
    c.send(True, pt.api_versions_request(4)).send(False, pt.api_versions_response(4)).close()
    cap = tmp_path / "f.pcap"
    cap.write_bytes(pt.pcap_bytes(c.records))
    clean = decode_in(build, cap, tmp_path / "clean")
    got = decode_in(build, cap, tmp_path / "out", patch=_FAIL_ONE)
    assert got["status"] == 0, got["stderr"][-2000:]
    assert [x["correlation_id"] for x in got["exchanges"]] == [1, 3, 4]
    assert got["exchanges"] == [x for x in clean["exchanges"] if x["correlation_id"] != 2]
    assert got["partitions"] == [p for p in clean["partitions"] if p["correlation_id"] != 2]
    (bug,) = got["anomalies"]
    assert bug["kind"] == "dissector_error" and bug["connection"] == "10.0.0.1:50312-10.0.0.2:9092#1"
    # orjson reports the failure of its default hook as its own TypeError
    assert bug["detail"].startswith("Produce v3 correlation id 2: building its rows raised TypeError")


_FAIL_RECORDS = """
import kdissect.dataset.record_rows as r
_real = r.decode_records
class Broken:
    position = 99
    magic = 1
    error = None
    out_of_range = None
    def leaves(self):
        yield from _real(self.data).batches[0].leaves()
        raise RuntimeError("injected in a batch")
def decode_records(data, **kw):
    rs = _real(data, **kw)
    if rs.batches and rs.batches[0].base_offset == 777:
        broken = Broken()
        broken.data = data
        rs.batches.append(broken)           # a second batch whose rows fail half way
    if rs.batches and rs.batches[0].base_offset == 888:
        raise RuntimeError("injected in the field")
    return rs
r.decode_records = decode_records
"""


@pytest.mark.parametrize("build", BUILDS)
def test_an_exception_building_one_batch_costs_that_batch_alone(tmp_path: Path, build: str) -> None:
    c = pt.Conversation().handshake()
    for corr, base in ((1, 5), (2, 777), (3, 888), (4, 9)):
        c.send(True, produce_v3(corr, v2_batch(base, 0))).send(False, produce_response_v3(corr))
    c.close()
    cap = tmp_path / "b.pcap"
    cap.write_bytes(pt.pcap_bytes(c.records))
    got = decode_in(build, cap, tmp_path / "out", "--records", patch=_FAIL_RECORDS)
    assert got["status"] == 0, got["stderr"][-2000:]
    assert [x["correlation_id"] for x in got["exchanges"]] == [1, 2, 3, 4]
    assert len(got["partitions"]) == 8
    # corr 2 keeps its good batch's record, loses the broken one's (half written, taken back); corr 3
    # loses its field's records; the others keep theirs.
    assert [(r["correlation_id"], r["offset"]) for r in got["records"]] == [(1, 5), (2, 777), (4, 9)]
    bugs = sorted((a["kind"], a["detail"].split(" raised ")[0]) for a in got["anomalies"])
    assert bugs == [("dissector_error", "Produce v3 request corr 2 t[0]: building the rows of the batch at byte 99"),
                    ("dissector_error", "Produce v3 request corr 3 t[0]: decoding its records")]


def test_a_failure_half_way_through_a_row_takes_back_every_cell(tmp_path: Path) -> None:
    """A body whose partitions are not a list: the exchange row is written, then its partitions fail. Every
    column must hold as many cells as every other afterwards, and the next exchange's rows line up."""
    from capture.flows import ConnectionInfo

    info = ConnectionInfo("10.0.0.1:40000-10.0.0.2:9092#1", "10.0.0.1", 40000, "10.0.0.2", 9092, 0, 0,
                          "kafka", True, "test")

    def produce(corr: int, partitions: object) -> Exchange:
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                "topic_data": [{"name": "t", "partition_data": partitions}]}
        req = Request(0, 3, corr, "c", 100, 1_000_000_000 * corr, 1_000_000_000 * corr, 1, body, None)
        resp = Response(corr, 50, 1_000_000_000 * corr + 5, 1_000_000_000 * corr + 5, 0, 3, 0,
                        {"responses": [], "throttle_time_ms": 0}, None)
        return Exchange(req, resp, Status.OK)

    outdir = prepare_outdir(tmp_path / "out")
    w = CaptureWriter(outdir, "x.pcap", "x", RowOptions())
    w.event(info, produce(1, [{"index": 0, "records": None}]))
    w.event(info, produce(2, 12345))                      # not iterable: fails inside _partitions
    w.event(info, Anomaly("gap", Direction.TO_BROKER, 5, "a gap"))
    w.event(info, produce(3, [{"index": 1, "records": None}, {"index": 2, "records": None}]))
    tables = {t: table for t, (_, table) in w.take_tables().items()}
    w.abort()
    assert tables["exchanges"].column("correlation_id").to_pylist() == [1, 3]
    assert tables["partitions"].column("partition").to_pylist() == [0, 1, 2]
    assert tables["partitions"].column("correlation_id").to_pylist() == [1, 3, 3]
    assert tables["anomalies"].column("kind").to_pylist() == ["dissector_error", "gap"]
    assert w.counts.exchanges == 2 and w.counts.partitions == 3
    assert dict(w.counts.anomalies) == {"dissector_error": 1, "gap": 1}
    detail = tables["anomalies"].column("detail")[0].as_py()
    assert detail.startswith("Produce v3 correlation id 2: building its rows raised TypeError")


def test_a_value_no_row_builder_checked_is_fitted_at_the_write_not_the_file_lost(tmp_path: Path) -> None:
    """The last line: a cell its column's type cannot hold is null (clamped where the column takes no null),
    counted, and reported when the capture's files close."""
    from capture.flows import ConnectionInfo

    info = ConnectionInfo("c", "10.0.0.1", 40000, "10.0.0.2", 9092, 0, 0, "kafka", True, "test")
    req = Request(0, 3, 1 << 40, "c", 100, 1, 1, 1, {"topic_data": []}, None)      # a correlation id past int32
    outdir = prepare_outdir(tmp_path / "out")
    w = CaptureWriter(outdir, "x.pcap", "x", RowOptions())
    w.event(info, Exchange(req, None, Status.NO_RESPONSE))
    w.commit()
    ex = ds.dataset(outdir / "exchanges", format="parquet").to_table().to_pylist()
    an = ds.dataset(outdir / "anomalies", format="parquet").to_table().to_pylist()
    assert [x["correlation_id"] for x in ex] == [(1 << 31) - 1]
    assert [(a["kind"], a["connection"]) for a in an] == [("out_of_range", None)]
    assert "exchanges table's correlation_id column" in an[0]["detail"]


def test_failure_text_still_names_the_failure() -> None:
    from kdissect.dataset.failures import failure_text
    req = Request(0, 3, 1, "c", 100, 1, 1, 1, {}, DecodeFailure("DecodeLimit", "topics: 1 of 9", 12))
    assert failure_text(Exchange(req, None, Status.NO_RESPONSE)) == "request: DecodeLimit at byte 12: topics: 1 of 9"
