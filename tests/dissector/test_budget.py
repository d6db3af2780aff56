"""The decoding budget (dissector/budget.py): what a decoded body may cost, and that the estimate holds.

The estimate is checked against what decoding really allocates, for every array at the top of every
message of the schema, so that the bound holds for any api; the bound itself on the issue's frame, a
16 MB Metadata v9 request of 8,000,000 empty topic entries (1,955 MB decoded before the budget).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from dissector import budget, schema
from dissector.connection import Connection
from dissector.decoders import Decoders, compile_message, default_decoders
from dissector.encoder import EncodeError, encode_body, request_frame, response_frame, uvarint
from dissector.events import Anomaly, Direction, Exchange, Status
from dissector.framing import parse_request_header
from dissector.records import summarize

REPO = Path(__file__).resolve().parents[2]


def every_message():
    for key in schema.api_keys():
        lo, hi = schema.version_range(key)
        for v in range(lo, hi + 1):
            for kind in ("request", "response"):
                msg = schema.message(key, kind, v)
                if msg is not None:
                    yield (key, kind, v), msg


def test_no_message_is_denser_than_the_bound_the_unchecked_size_rests_on() -> None:
    densest = max(budget.density(msg.fields) for _, msg in every_message())
    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment"):
        lo, hi = schema.data_versions(name)
        for v in range(lo, hi + 1):
            densest = max(densest, budget.density(schema.data_message(name, v).fields))
    assert 50 < densest <= budget.MAX_DENSITY


_DEFAULT = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0, "float64": 0.0, "bool": False,
            "string": "", "bytes": b"", "uuid": bytes(16)}


def test_the_estimate_of_every_top_level_array_is_not_below_what_decoding_allocates() -> None:
    """Per element, for each top-level array of each message: tracemalloc's count of what the decoder
    allocated, against element_cost (elements at their defaults: the smallest on the wire)."""
    n = 400
    checked = 0
    short = []
    tracemalloc.start()
    try:
        for (key, kind, v), msg in every_message():
            for f in msg.fields:
                if not f.type.startswith("[]") or f.tag is not None:
                    continue
                elem = f.type[2:]
                item = {} if elem == "struct" else _DEFAULT.get(elem)
                if item is None:
                    continue
                try:
                    frame = encode_body(key, kind, v, {f.name: [item] * n})
                except EncodeError:
                    continue
                fn = compile_message(msg, summarize)
                r: dict = {}
                before = tracemalloc.get_traced_memory()[0]
                fn(frame, 0, r)
                used = tracemalloc.get_traced_memory()[0] - before
                del r
                if used / n > budget.element_cost(f):
                    short.append((key, kind, v, f.name, used / n, budget.element_cost(f)))
                checked += 1
    finally:
        tracemalloc.stop()
    assert checked > 500
    assert not short, short[:10]


def metadata_v9(corr: int, topics: int) -> bytes:
    """A Metadata v9 request of ``topics`` empty topic entries (two bytes each: name "", no tags)."""
    return request_frame(3, 9, corr, "c", uvarint(topics + 1) + b"\x01\x00" * topics + b"\x01\x00\x00\x00")


def test_a_small_frame_is_decoded_unchecked_and_a_large_legit_one_whole() -> None:
    d = default_decoders()
    small = metadata_v9(1, 1000)
    assert d.unchecked(len(small) - 4)
    got = d.decode(3, "request", 9, small[4:], parse_request_header(small[4:]).body_offset)
    assert got.failure is None and len(got.body["topics"]) == 1000
    # 1.3 MB of Produce request: large, but its records cost nothing like its size decoded.
    records = b"\x00" * 64 + b"x" * (1300 << 10)
    frame = request_frame(0, 9, 2, "c", {"acks": 1, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]})
    assert not d.unchecked(len(frame) - 4)
    got = d.decode(0, "request", 9, frame[4:], parse_request_header(frame[4:]).body_offset)
    assert got.failure is None and got.end == len(frame) - 4


def test_past_the_budget_the_body_keeps_what_it_allows_and_says_where_it_stopped() -> None:
    frame = metadata_v9(7, 2_000_000)                  # 4 MB: past the floor's worth of empty entries
    d = Decoders()
    start = parse_request_header(frame[4:]).body_offset
    got = d.decode(3, "request", 9, frame[4:], start)
    assert got.failure is not None and got.failure.error == "DecodeLimit"
    kept = len(got.body["topics"])
    topic = schema.message(3, "request", 9).fields[0]
    assert kept == budget.FLOOR // budget.element_cost(topic)       # as many as the budget holds, no more
    assert got.failure.offset == start + 3 + 2 * kept               # the topics read so far, after the count
    assert "of 2000000 elements decoded within the budget" in got.failure.detail


def test_the_connection_reports_a_decode_limit_and_pairs_the_exchange() -> None:
    conn = Connection()
    req = metadata_v9(7, 2_000_000)
    events = conn.feed(Direction.TO_BROKER, req, 1) + conn.feed(Direction.TO_CLIENT, response_frame(3, 9, 7, {}), 2)
    limits = [e for e in events if isinstance(e, Anomaly) and e.kind == "decode_limit"]
    assert len(limits) == 1 and limits[0].direction == Direction.TO_BROKER
    assert limits[0].extra["bytes"] == len(req)
    assert not [e for e in events if isinstance(e, Anomaly) and e.kind == "malformed"]
    (ex,) = [e for e in events if isinstance(e, Exchange)]
    assert ex.status is Status.OK and ex.request.failure.error == "DecodeLimit"   # a budget cut is not the peer's fault
    assert ex.request.size == len(req) and ex.request.correlation_id == 7 and ex.request.client_id == "c"


# The peak of this process alone: VmHWM belongs to the memory exec made, where ru_maxrss keeps the forking
# process's (pytest's, hundreds of MB late in a run) across exec.
_DECODE_16MB = """
import sys
from kdissect.commands.cli import main
status = main(['decode', '-q', '--jobs', '1', '-o', sys.argv[2], sys.argv[1]])
print(next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:')))
sys.exit(status)
"""


@pytest.mark.slow
@pytest.mark.parametrize("build", ["compiled", "pure"])
def test_a_16_mb_metadata_request_of_empty_entries_decodes_within_400_mb(tmp_path: Path, build: str) -> None:
    import hotpath as compiled
    from tests.capture import pcaptools as pt
    import pyarrow.dataset as ds

    if build == "compiled" and not compiled.available():
        pytest.skip("no compiled build")
    c = pt.Conversation(mss=60000).handshake()
    c.send(True, pt.api_versions_request(1)).send(False, pt.api_versions_response(1))
    big = metadata_v9(2, 8_000_000)
    c.send(True, big)
    c.send(True, pt.api_versions_request(3)).send(False, pt.api_versions_response(3)).close()
    cap = tmp_path / "meta16.pcap"
    cap.write_bytes(pt.pcap_bytes(c.records))
    env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"}
    if build == "pure":
        env["KDISSECT_PURE"] = "1"
    proc = subprocess.run([sys.executable, "-c", _DECODE_16MB, str(cap), str(tmp_path / "out")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak_mb = int(proc.stdout.split()[-1]) / 1024
    assert peak_mb <= 400, peak_mb
    ex = ds.dataset(tmp_path / "out" / "exchanges", format="parquet").to_table().to_pylist()
    an = ds.dataset(tmp_path / "out" / "anomalies", format="parquet").to_table().to_pylist()
    assert [(x["api_name"], x["correlation_id"], x["status"]) for x in ex] == \
        [("ApiVersions", 1, "ok"), ("Metadata", 2, "no_response"), ("ApiVersions", 3, "ok")]
    assert ex[1]["request_bytes"] == len(big) and ex[1]["decode_error"].startswith("request: DecodeLimit")
    assert [a["kind"] for a in an] == ["decode_limit"]
