"""Seed corpora for the fuzz targets, made from the recorded samples (real clients, real brokers).

Seeds are rebuilt on demand (``write_corpus``), not stored: the samples are
their source. Record-batch and legacy seeds add what the samples lack, every
codec, through the client libraries' own builders (aiokafka's, pure Python).
The payload seeds are the keys, values, headers and ``_schemas`` records the
payload samples' producers sent (``samples/payloads/``), and values of the
payload targets' extra schemas written by the codecs' own writers (fastavro's,
protobuf's).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
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
from tests.dissector.test_records import varint   # the tests' one hand encoder of zigzag varints
from tests.fuzz.harness import pack_chunks
from tests.fuzz.payload_targets import AVRO_EXTRA_SCHEMAS, ID_STRIDE, PROTO_EXTRA_SCHEMAS, _sample_texts, avro_schemas, \
    json_schemas, payload_records, protobuf_decoders, protobuf_texts, sample_schemas
from tests.fuzz.targets import LINKTYPES, TARGETS

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


# -- record payloads ---------------------------------------------------------------------------

PAYLOADS = SAMPLES / "payloads"


def framed_payloads() -> Iterator[tuple[str, dict, bytes, int]]:
    """The samples' framed keys and values: (folder, the registry's JSON of their schema, the bytes, where
    the encoding starts), the schema named by the 4-byte id prefix or by the GUID of the record's
    ``__key_schema_id`` / ``__value_schema_id`` header."""
    from payloads.framing import KEY_HEADER, VALUE_HEADER, header_ref

    docs = {(folder, d["id"]): d for _, folder, d in sample_schemas()}
    guids = {d["guid"]: d for _, _, d in sample_schemas()}
    for folder, _topic, key, value, headers in payload_records():
        for data, name in ((key, KEY_HEADER), (value, VALUE_HEADER)):
            if not data:
                continue
            header = next((v for k, v in headers if k == name), None)
            ref = header_ref(header)
            if ref is not None and ref[1] in guids:
                yield folder, guids[ref[1]], data, 0
            elif data[0] == 0 and len(data) >= 5 and (folder, int.from_bytes(data[1:5], "big")) in docs:
                yield folder, docs[(folder, int.from_bytes(data[1:5], "big"))], data, 5


def _of_format(fmt: str) -> Iterator[tuple[dict, bytes]]:
    for _folder, doc, data, start in framed_payloads():
        if (doc.get("schemaType") or "AVRO").upper() == fmt:
            yield doc, data[start:]


def _avro_bytes(schema: object, value: object) -> bytes:
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


def _linked(depth: int) -> dict | None:
    node = None
    for _ in range(depth):
        node = {"next": node}
    return node


def avro_values() -> Iterator[bytes]:
    """The samples' Avro keys and values (their schema's selector, then their bytes after the framing),
    and values of each extra schema written by fastavro: linked lists up to past the depth limit, every
    field of ``Every`` and ``Logical`` set, nested."""
    import datetime as dt
    import decimal

    texts = avro_schemas()
    seen: set[bytes] = set()
    for doc, payload in _of_format("AVRO"):
        seed = bytes([texts.index(doc["schema"])]) + payload
        if seed not in seen and len(seed) <= TARGETS["avro_values"].max_len:
            seen.add(seed)
            yield seed
    extra = {json.dumps(s): s for s in AVRO_EXTRA_SCHEMAS}
    sel = {name: texts.index(json.dumps(s)) for name, s in
           zip(("list", "every", "logical", "map", "union"), AVRO_EXTRA_SCHEMAS)}
    assert len(extra) == len(AVRO_EXTRA_SCHEMAS)
    utc = dt.timezone.utc
    for depth in (0, 1, 2, 7, 64, 199, 201, 400):
        yield bytes([sel["list"]]) + _avro_bytes(AVRO_EXTRA_SCHEMAS[0], _linked(depth) or {"next": None})

    def every(i: int, tail: dict | None) -> dict:
        return {"nulls": [None] * i, "empties": [{}] * (i % 3), "grid": {f"k{j}✓": [None, j, "v" * j, j / 3][:j % 5]
                                                                      for j in range(i % 4)},
                "choice": [None, ("kd.fuzz.A", {"x": -i}), ("kd.fuzz.B", {"y": "b" * i}), "Q",
                           b"\x00\xff", "text"][i % 6],
                "price": decimal.Decimal(f"-{i}.{i:04d}"), "rate": decimal.Decimal(f"{i}.000000001"),
                "at_ms": dt.datetime(2024, 5, 1, tzinfo=utc) + dt.timedelta(milliseconds=i * 1001),
                "at_us": dt.datetime(1969, 12, 31, tzinfo=utc) + dt.timedelta(microseconds=i * 7),
                "day": dt.date(2000, 2, 29) + dt.timedelta(days=i), "flag": bool(i & 1), "f": i / 7, "d": -i * 1e300,
                "blob": bytes(range(i)), "nested": {"a": {"x": None, "y": ("kd.fuzz.A", {"x": i})}} if i % 2 else {},
                "tail": tail}
    for i in range(6):
        value = every(i, every(i + 1, None) if i % 2 else None)
        yield bytes([sel["every"]]) + _avro_bytes(AVRO_EXTRA_SCHEMAS[1], value)
    for i in range(4):
        logical = {"id": f"6ba7b810-9dad-11d1-80b4-00c04fd430c{i}", "t_ms": dt.time(12, i, 5, 123000),
                   "t_us": dt.time(23, 59, 59, i), "local_ms": dt.datetime(2024, 1, 2, 3, 4, 5, 6000 * i),
                   "local_us": dt.datetime(1, 1, 1, 0, 0, 0, i), "unknown": "raw",
                   "maybe_id": None if i % 2 else "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
                   "amounts": [decimal.Decimal(f"{j}.{j:02d}") for j in range(i)], "dur": bytes(12)}
        yield bytes([sel["logical"]]) + _avro_bytes(AVRO_EXTRA_SCHEMAS[2], logical)
    yield bytes([sel["map"]]) + _avro_bytes(AVRO_EXTRA_SCHEMAS[3], {"a": [None] * 5, "": [], "✓": [None]})
    for v in (None, -(1 << 63), "s", b"\x00", [1.5, float("nan")]):
        yield bytes([sel["union"]]) + _avro_bytes(AVRO_EXTRA_SCHEMAS[4], v)
    # Hand-made: a block with a negative count and its size, a count of nulls past any value's.
    yield bytes([sel["map"]]) + bytes([0x01, 0x06, 0x02, 0x61, 0x05, 0x02, 0x00, 0x00])
    yield bytes([sel["map"]]) + bytes([0x02, 0x02, 0x61, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x00, 0x00])


def protobuf_values() -> Iterator[bytes]:
    """The samples' Protobuf values (message indexes and message) under their schema as text and as a
    serialized descriptor, and messages of the extra schemas built through their own classes."""
    from google.protobuf import json_format

    decoders = protobuf_decoders()
    half = len(decoders) // 2
    sample = list(_of_format("PROTOBUF"))
    for i, (doc, payload) in enumerate(sample):
        if len(payload) >= TARGETS["protobuf_values"].max_len:
            continue
        yield bytes([protobuf_texts().index(doc["schema"]) + (half if i % 2 else 0)]) + payload
        if i % 5 == 0:
            yield bytes([0x80]) + payload[2:]            # the sample's indexes ([1]) left out: read as message 0
    tree = {"name": "root", "children": [{"name": "kid", "s": "x"}, {"name": "kid2", "leaf": {
                "z": -5, "f": "18446744073709551615", "sf": -1, "x": 1.5, "ok": True,
                "deep": {"u": "7", "back": {"name": "back", "d": 2.5}}}}],
            "n": "-9223372036854775808", "by_id": {"3": {"name": "three"}}, "attrs": {"k": [1, "a", None, {"z": True}]},
            "meta": {"a": {"b": [1.0, 2.0]}}, "any": {"@type": "type.googleapis.com/kd.fuzz.Second", "names": ["n"]},
            "mask": "a.b,c", "packed": [1, -1, 300], "colors": ["GREEN", "BLUE"], "at": "2024-05-01T12:00:00.25Z",
            "ttl": "1.5s", "blob": "AAEC", "big": "18446744073709551615", "list": [1, "two"], "nothing": {},
            "maybe": ""}
    messages = [(1, [0], tree), (1, [0], {"name": "bare"}), (1, [1], {"names": ["a", "b"], "tree": tree,
                                                                      "blobs": {"1": "AA=="}}),
                (1, [0, 0], {"z": 1, "deep": {"u": "1"}}), (1, [0, 0, 0], {"u": "18446744073709551615"}),
                (2, [0], {"id": 7, "label": "l", "item": [{"sku": "s", "qty": 2}], "kind": "B",
                          "packed": ["-3", "4"], "[kd.legacy.note]": "n"}),
                (2, [0], {"id": -1})]
    base = len(protobuf_texts()) - len(PROTO_EXTRA_SCHEMAS) - 1      # Tree is 1, Old 2 above
    for n, (index, path, value) in enumerate(messages):
        index += base
        dec = decoders[index + (half if n % 2 else 0)]
        msg = dec.message_class(path)()
        json_format.ParseDict(value, msg, descriptor_pool=dec.pool)
        indexes = b"\x00" if path == [0] else varint(len(path)) + b"".join(varint(i) for i in path)
        yield bytes([index + (half if n % 2 else 0)]) + indexes + msg.SerializeToString()


def json_values() -> Iterator[bytes]:
    """The samples' JSON Schema values, validated and not, and values of the extra schemas (valid ones,
    and ones each keyword rejects)."""
    n = len(json_schemas())
    sample = list(_of_format("JSON"))
    for i, (doc, payload) in enumerate(sample):
        if i % 3 == 0 and len(payload) < TARGETS["json_values"].max_len:
            yield bytes([json_schemas().index(doc["schema"]) << 1 | i % 2]) + payload
    extra = len(_sample_texts("JSON"))
    values = [
        (0, {"name": "root", "kids": [{"name": "a-1", "n": 3, "x": 0.05}, {"name": "b", "kind": None}],
             "either": 4, "any": {"k": 1}, "not": 5, "when": 2, "x-note": "x", "fixed": {"k": [1, 2]}}),
        (0, {"name": "Root", "kids": [{"name": "a"}, {"name": "a"}], "n": 4, "when": -1, "extra": 1}),
        (0, {"name": "r", "either": 1.5, "any": {}, "not": "s", "when": "w", "kind": [1], "n": 999}),
        (1, ["a", 1, True, False]), (1, ["a", "b", False]), (1, []),
        (2, {"v": 9.5, "more": [1]}), (2, {"v": 10, "more": []}), (2, {"w": 1}),
        (3, [1, {"a": None}, "✓", -0.0, 1e300, 18446744073709551615]),
    ]
    for sel, value in values:
        for validate in (0, 1):
            yield bytes([((extra + sel) % n) << 1 | validate]) + json.dumps(value).encode()
    yield bytes([1]) + b'  {"id": 1, "kind": "buy", "user": "u", "flags": [true]}  \n'
    yield bytes([1]) + b'{"id": 1, "kind": "sell", "user": 5}'


def framing() -> Iterator[bytes]:
    """Every key, value and schema id header the payload samples' producers sent, as they are."""
    seen: set[bytes] = set()
    max_len = TARGETS["framing"].max_len
    for _folder, _topic, key, value, headers in payload_records():
        for data in (key, value, *(v for _, v in headers)):
            if data and data not in seen and len(data) <= max_len:
                seen.add(data)
                yield data
    yield from (b"", b"\x00\x00\x00\x00\x00", b"\x00\x80\x00\x00\x00\x02\x02\x02", b"\x01" * 17,
                b"\x00\x00\x00\x00\x01" + b"\xff" * 11, b'[1, 2.5e15, "\\u00e9"]', b"\t plain text \r\n")


def schema_learning() -> Iterator[bytes]:
    """The samples' own ``_schemas`` records (a registry's NOOP, CONFIG and SCHEMA records), and each
    sample folder's schemas made into records, with references between them, and values to decode."""
    max_len = TARGETS["schema_learning"].max_len
    values = [data[start:] for _folder, _doc, data, start in framed_payloads() if len(data) < 4096]
    group: list[tuple[int, bytes]] = []
    for _folder, topic, k, v, _ in payload_records():
        if topic != "_schemas" or len(k or b"") + len(v or b"") > max_len // 2:
            continue
        record = [(0, k or b""), (1, v) if v is not None else (7, b"")]
        if group and sum(3 + len(b) for _, b in group + record) > max_len - 1024:
            yield pack_chunks(group + [(5, v) for v in values[:6]])
            group = []
        group += record
    if group:
        yield pack_chunks(group + [(5, v) for v in values[:6]])
    by_folder: dict[str, list[dict]] = {}
    for _, folder, doc in sample_schemas():
        by_folder.setdefault(folder, []).append(doc)
    proto_descriptor = protobuf_decoders()[0].file.serialized_pb
    fmt_tag = {"AVRO": 2, "JSON": 3, "PROTOBUF": 4}
    for folder, docs in by_folder.items():
        for start in range(0, len(docs), 4):
            chunk_items = []
            for j, doc in enumerate(docs[start:start + 4]):
                kind = fmt_tag[(doc.get("schemaType") or "AVRO").upper()]
                text = proto_descriptor if kind == 4 else doc["schema"].encode()
                chunk_items.append((kind | (doc["id"] % 16) << 3 | (0x80 if j % 2 else 0), text))
            vals = [data[st:] for f, _doc, data, st in framed_payloads() if f == folder and len(data) < 4096]
            vals = vals[start:start + 4]
            yield pack_chunks(chunk_items + [(6, b"")] * (start % 2) + [(5, v) for v in vals])
    # A JSON Schema referring to another by its reference name; an Avro record using a referenced type.
    yield pack_chunks([(3, b'{"type": "object", "properties": {"n": {"type": "integer"}}}'),
                       (3 | 1 << 3 | 0x80, b'{"$ref": "ref1.json"}'), (6, b""), (5, b'{"n": 1}'), (5, b'{"n": "x"}')])
    yield pack_chunks([(2, b'{"type": "record", "name": "Ref", "fields": [{"name": "a", "type": "int"}]}'),
                       (2 | 1 << 3 | 0x80,
                        b'{"type": "record", "name": "Top", "fields": [{"name": "r", "type": "Ref"}]}'),
                       (5, b"\x02"), (5, b"\x04")])
    yield pack_chunks([(2, json.dumps(s).encode()) for s in AVRO_EXTRA_SCHEMAS[:3]] + [(5, b"\x00"), (5, b"\x02\x00")])


def payload_decoder() -> Iterator[bytes]:
    """The payload samples' records as their consumers meet them: each key and value with the schema id
    header it came with, framed ids moved as ``sample_decoder`` moved them, a few records per input,
    and some null ones."""
    from payloads.framing import KEY_HEADER, VALUE_HEADER

    folders = sorted(p.name for p in PAYLOADS.iterdir() if (p / "schemas").is_dir())
    known = {(folder, d["id"]) for _, folder, d in sample_schemas()}
    max_len = TARGETS["payload_decoder"].max_len

    def moved(folder: str, data: bytes | None) -> bytes | None:
        if data and len(data) >= 5 and data[0] == 0 and (folder, int.from_bytes(data[1:5], "big")) in known:
            sid = folders.index(folder) * ID_STRIDE + int.from_bytes(data[1:5], "big")
            return b"\x00" + sid.to_bytes(4, "big") + data[5:]
        return data

    per_record: list[list[tuple[int, bytes]]] = []
    for n, (folder, _topic, key, value, headers) in enumerate(payload_records()):
        items: list[tuple[int, bytes]] = []
        for data, name in ((key, KEY_HEADER), (value, VALUE_HEADER)):
            header = next((v for k, v in headers if k == name), None)
            if header is not None:
                items.append((1, header))
            data = moved(folder, data)
            items.append((2, b"") if data is None else (0, data))
        per_record.append(items)
    group: list[tuple[int, bytes]] = []
    for items in per_record:               # about three records an input, as many as fit
        size = sum(3 + len(b) for _, b in items)
        if group and (len(group) >= 6 or sum(3 + len(b) for _, b in group) + size > max_len):
            yield pack_chunks(group)
            group = []
        if size <= max_len:
            group += items
    if group:
        yield pack_chunks(group)


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
    "avro_values": avro_values,
    "protobuf_values": protobuf_values,
    "json_values": json_values,
    "framing": framing,
    "schema_learning": schema_learning,
    "payload_decoder": payload_decoder,
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
