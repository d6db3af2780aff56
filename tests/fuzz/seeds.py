"""Seed corpora for the fuzz targets, made from the recorded samples (real clients, real brokers).

Seeds are rebuilt on demand (``write_corpus``), not stored: the samples are
their source. Record-batch and legacy seeds add what the samples lack, every
codec, through the client libraries' own builders (aiokafka's, pure Python).
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path

from capture import read_capture
from capture.pipeline import CaptureOptions, Pipeline
from dissector.connection import Connection, Options
from dissector.embedded import ASSIGNMENT, SUBSCRIPTION
from dissector.encoder import encode_data
from dissector.events import Direction, Exchange
from dissector.views import partition_rows
from tests.capture import pcaptools as pt
from tests.fuzz.targets import LINKTYPES, TARGETS, pack_chunks

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"


def sample_paths() -> list[Path]:
    return sorted(SAMPLES.glob("*.pcap"))


def _fit(items: list[tuple[int, bytes]], max_len: int) -> Iterator[bytes]:
    """Chunked seeds no longer than ``max_len``: consecutive runs of items."""
    run: list[tuple[int, bytes]] = []
    size = 0
    for tag, b in items:
        for i in range(0, max(len(b), 1), 0xFFFF):
            piece = b[i:i + 0xFFFF]
            if size + len(piece) + 3 > max_len and run:
                yield pack_chunks(run)
                run, size = [], 0
            run.append((tag, piece))
            size += len(piece) + 3
    if run:
        yield pack_chunks(run)


def capture_readers() -> Iterator[bytes]:
    max_len = TARGETS["capture_readers"].max_len
    for path in sample_paths():
        lt, records = pt.read_records(path)
        small = records[:40]
        yield pt.pcap_bytes(small, lt)[:max_len]
        yield pt.pcap_bytes(small, lt, order=">", nanos=True)[:max_len]
        ng = pt.shb() + pt.idb(lt, tsresol=9) + b"".join(pt.epb(0, ts, data, wire) for ts, _, data, wire in small)
        yield ng[:max_len]
        yield gzip.compress(pt.pcap_bytes(records[:20], lt), mtime=0)


def packets() -> Iterator[bytes]:
    max_len = TARGETS["packets"].max_len
    for path in sample_paths():
        lt, records = pt.read_records(path)
        li = LINKTYPES.index(lt) if lt in LINKTYPES else 0
        for start in range(0, len(records), 60):
            window = records[start:start + 80]
            yield from list(_fit([(li | 1 << 3, data) for _, _, data, _ in window], max_len))[:1]


class _Recorder:
    """A dissector Connection that also records what capture fed it, as chunks."""

    def __init__(self, mid_stream: bool, log: list[list[tuple[int, bytes]]]) -> None:
        self.conn = Connection(Options(), mid_stream=mid_stream)
        self.items: list[tuple[int, bytes]] = []
        log.append(self.items)

    def feed(self, direction: Direction, data: bytes, ts: int) -> list:
        self.items.append((int(direction == Direction.TO_CLIENT), data))
        return self.conn.feed(direction, data, ts)

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list:
        self.items.append((int(direction == Direction.TO_CLIENT) | 2, bytes(min(nbytes or 0, 0xFFFF))))
        return self.conn.gap(direction, ts, nbytes)

    def close(self, ts: int) -> list:
        return self.conn.close(ts)


def connection_streams() -> Iterator[list[tuple[int, bytes]]]:
    """Per Kafka connection of each sample: what capture fed the dissector, in order."""
    for path in sample_paths():
        lt, records = pt.read_records(path)
        log: list[list[tuple[int, bytes]]] = []
        pipe = Pipeline(CaptureOptions(), connection_factory=lambda mid: _Recorder(mid, log))
        for _ in pipe.run(records):
            pass
        yield from log


def dissector_connection() -> Iterator[bytes]:
    max_len = TARGETS["dissector_connection"].max_len
    for items in connection_streams():
        yield from list(_fit(items, max_len))[:3]


def dataset_writer() -> Iterator[bytes]:
    from dissector.encoder import request_frame

    max_len = TARGETS["dataset_writer"].max_len
    for items in connection_streams():
        yield from list(_fit(items, max_len))[:1]
    # Produce requests whose record batches' offsets and timestamps leave int64 (the records seeds').
    for corr, batch in enumerate(_edge_batches(), 1):
        yield pack_chunks([(0, request_frame(0, 3, corr, "c", {"acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}))])


def amplification() -> Iterator[bytes]:
    """The connection streams, and frames of many small array entries (the budget's case) of a few apis."""
    from dissector.encoder import request_frame, response_frame

    max_len = TARGETS["amplification"].max_len
    for items in connection_streams():
        yield from list(_fit(items, max_len))[:1]
    dense = [
        (0, request_frame(3, 9, 1, "c", {"topics": [{"name": ""}] * 20_000})),
        (0, request_frame(8, 8, 2, "c", {"groups": [{"group_id": "g", "topics": [{"name": "", "partitions": [
            {"partition_index": i} for i in range(3000)]}]}]})),
        (0, request_frame(11, 5, 3, "c", {"group_id": "g", "protocol_type": "consumer", "protocols": [
            {"name": "range", "metadata": encode_data(SUBSCRIPTION, 1, {"topics": [""] * 2000},
                                                      version_prefix=True)}] * 3})),
        (0, request_frame(3, 1, 4, "c", {"topics": [{"name": "t"}] * 5})),
        (1, response_frame(3, 1, 4, {"topics": [{"name": "t", "partitions": [{}] * 800}] * 2})),
    ]
    for tag, frame in dense:
        yield from list(_fit([(tag, frame)], max_len))[:1]


def detection() -> Iterator[bytes]:
    """Each sample connection's first client and broker bytes on every port, and what no client at hand sends:
    a first request one byte short, other protocols, noise."""
    import struct

    max_len = TARGETS["detection"].max_len
    starts = []
    for items in connection_streams():
        first = [(tag & 1, b) for tag, b in items if not tag & 2][:6]
        if first:
            starts.append(first)
    bad = pt.metadata_request(1, ["topic-a"])
    short = struct.pack(">i", len(bad) - 5) + bad[4:-1]
    starts += [[(0, short), (0, pt.api_versions_request(2)), (1, pt.api_versions_response(2))],
               [(0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), (1, b"HTTP/1.1 200 OK\r\n\r\n")],
               [(0, b"*1\r\n$4\r\nPING\r\n"), (1, b"+PONG\r\n")],
               [(0, bytes(range(256)) * 4), (1, bytes(range(255, -1, -1)) * 4)]]
    for i, first in enumerate(starts):
        for flags in (i % 6, 8 | (i + 3) % 6):
            yield (bytes([flags]) + pack_chunks(first))[:max_len]


def _legacy_and_v2_every_codec() -> Iterator[bytes]:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

    for codec in range(5):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(5):
            b.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i if i % 2 else None, value=b"v" * (i * 40),
                     headers=[("h", b"x")] if i == 1 else [])
        yield bytes(b.build())
    for magic in (0, 1):
        for codec in range(4):
            if magic == 0 and codec == 3:
                continue        # aiokafka refuses lz4 in magic 0 (Kafka 0.8/0.9 had none)
            lb = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
            for i in range(4):
                lb.append(i, timestamp=5000 + i, key=b"k" if i % 2 else None, value=b"v%d" % i * 30)
            yield bytes(lb.build())


def _edge_batches() -> Iterator[bytes]:
    """v2 batches whose sums leave int64: base offset -2^63 with last offset delta -1, base offset 2^63-1
    with deltas past it, timestamps pushed past int64 by their deltas (no client sends these)."""
    import struct

    import crc32c

    from tests.kdissect.bombs import _varint

    top = (1 << 63) - 1
    for base, lod, base_ts, deltas in ((-(1 << 63), -1, 0, [(0, 0)]), (top, 2, 1_700_000_000_000, [(0, 0), (2, 0)]),
                                       (5, 0, top - 10, [(0, 100)]), (-(1 << 62), 0, -(1 << 63), [(0, -(1 << 62))])):
        recs = b""
        for off_delta, ts_delta in deltas:
            rec = b"\x00" + _varint(ts_delta) + _varint(off_delta) + _varint(-1) + _varint(1) + b"x" + _varint(0)
            recs += _varint(len(rec)) + rec
        body = struct.pack(">hiqqqhii", 0, lod, base_ts, base_ts, -1, -1, -1, len(deltas)) + recs
        yield (struct.pack(">qiib", base, 9 + len(body), 0, 2) + struct.pack(">I", crc32c.crc32c(body)) + body)


def records() -> Iterator[bytes]:
    max_len = TARGETS["records"].max_len - 1
    seen: set[bytes] = set()
    for data in _edge_batches():
        yield b"\x01" + data
    for data in _legacy_and_v2_every_codec():
        yield b"\x01" + data
    for path in sample_paths():
        for ce in read_capture(path):
            ex = ce.event
            if not isinstance(ex, Exchange) or ex.api_key not in (0, 1):
                continue
            for kind, msg in (("request", ex.request), ("response", ex.response)):
                if msg is None or msg.body is None:
                    continue
                for r in partition_rows(ex.api_key, kind, ex.api_version, msg.body):
                    data = r.records.data if r.records is not None else None
                    if data and len(data) <= max_len and data not in seen:
                        seen.add(data)
                        yield b"\x01" + data


def embedded() -> Iterator[bytes]:
    for path in sample_paths():
        for ce in read_capture(path):
            ex = ce.event
            if not isinstance(ex, Exchange) or ex.api_key not in (11, 14) or ex.request is None:
                continue
            bodies = [ex.request.body, ex.response.body if ex.response is not None else None]
            for body in bodies:
                if not body:
                    continue
                found = [(SUBSCRIPTION, p.get("metadata")) for p in body.get("protocols") or ()]
                found += [(SUBSCRIPTION, m.get("metadata")) for m in body.get("members") or ()]
                found += [(ASSIGNMENT, a.get("assignment")) for a in body.get("assignments") or ()]
                found += [(ASSIGNMENT, body.get("assignment"))]
                for name, d in found:
                    if isinstance(d, dict):
                        fields = {k: v for k, v in d.items() if k != "version"}
                        raw = encode_data(name, d["version"], fields, version_prefix=True)
                        yield bytes([name == SUBSCRIPTION]) + raw


def _v07_streams() -> Iterator[list[tuple[int, bytes]]]:
    """0.7 conversations: the recorded clients' sample (samples/v07/, through the pipeline),
    and hand-built ones with what no client at hand sends (compression, errors, bad CRCs)."""
    from tests.dissector.v07 import build as b

    sets = [b.message(b"hello") + b.message(b"world"), b.gzip_wrapper(b.message(b"a") + b.message(b"b")),
            b.snappy_wrapper(b.gzip_wrapper(b.message(b"nested"))), b.message(b"bad", bad_crc=True)]
    for flags in (0, 4, 8):
        items = [(flags, b.produce("events", 0, sets[0]))]
        for i, ms in enumerate(sets):
            items += [(0, b.fetch("events", 0, i * 100)), (1, b.fetch_response(ms))]
        items += [(0, b.offsets("events", 0, -1, 2)), (1, b.offsets_response([0, 99]))]
        items += [(0, b.multifetch([("events", 0, 0, 99), ("x", 1, 5, 99)])),
                  (1, b.multifetch_response([(0, sets[1]), (1, b"")]))]
        items += [(0, b.multiproduce([("events", 0, sets[2]), ("x", 1, sets[0])]))]
        yield items
        yield items[:3] + [(3, b"\0" * 20)] + items[5:]        # response bytes lost
        yield items[:2] + [(2, b"\0" * 30)] + items[3:]        # request bytes lost
        yield [(tag, data[i:i + 7]) for tag, data in items for i in range(0, len(data), 7)]
    for path in sorted((SAMPLES / "v07").glob("*.pcap")):
        lt, records = pt.read_records(path)
        log: list[list[tuple[int, bytes]]] = []
        pipe = Pipeline(CaptureOptions(), connection_factory=lambda mid: _Recorder(mid, log))
        for _ in pipe.run(records):
            pass
        yield from log


def v07_connection() -> Iterator[bytes]:
    max_len = TARGETS["v07_connection"].max_len
    for items in _v07_streams():
        yield from list(_fit(items, max_len))[:3]


def v07_messages() -> Iterator[bytes]:
    for items in _v07_streams():
        for tag, data in items:
            if tag & 1 and len(data) > 6:
                yield data[6:]            # a FETCH response's message set (or a MULTIFETCH's bytes)


def tls_records() -> Iterator[bytes]:
    """Each TLS sample connection's two streams in capture order (retransmitted bytes once),
    whole, cut after the handshake, and with one side's bytes lost."""
    from capture.packet import parser_for

    max_len = TARGETS["tls_records"].max_len
    for path in sorted((SAMPLES / "tls").glob("*.pcap")):
        if path.name.endswith(".plain.pcap"):
            continue
        lt, records = pt.read_records(path)
        parse = parser_for(lt)
        conns: dict[bytes, list[tuple[int, bytes]]] = {}
        nexts: dict[bytes, int] = {}
        for _, _, data, wire in records:
            seg = parse(data, wire) if parse else None
            if not isinstance(seg, tuple):
                continue
            key, sport, _dport, seq, _ack, _flags, payload, _missing = seg
            if not payload:
                continue
            server = sport in (9093, 19443)
            conn = key if not server else key[4:8] + key[0:4] + key[10:12] + key[8:10]
            if nexts.get(key, seq) != seq:
                continue                                  # out of order or retransmitted: keep it simple
            nexts[key] = seq + len(payload)
            conns.setdefault(conn, []).append((int(server), payload))
        for items in conns.values():
            yield from list(_fit(items, max_len))[:1]
            yield pack_chunks(items[:4] + [(4, b"")])[:max_len]
            yield pack_chunks([(tag | (2 if i == 6 else 0), b) for i, (tag, b) in enumerate(items)])[:max_len]


SEEDS = {
    "capture_readers": capture_readers,
    "packets": packets,
    "dissector_connection": dissector_connection,
    "records": records,
    "embedded": embedded,
    "dataset_writer": dataset_writer,
    "v07_connection": v07_connection,
    "v07_messages": v07_messages,
    "tls_records": tls_records,
    "amplification": amplification,
    "detection": detection,
}


def regression_inputs(target: str) -> list[Path]:
    d = REGRESSIONS / target
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def write_corpus(target: str, directory: Path) -> int:
    """Write the seeds of ``target`` (and its regression inputs) into ``directory``; how many."""
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    inputs = list(SEEDS[target]()) + [p.read_bytes() for p in regression_inputs(target)]
    for data in inputs:
        (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
        n += 1
    return n
