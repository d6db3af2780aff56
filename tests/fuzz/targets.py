"""Fuzz targets, one per layer, each a function ``bytes -> None`` that raises only on a broken invariant.

Every target states its invariant in its docstring. Common to all of them:
the code under test parses its input or reports the documented problem (an
``Anomaly``, a ``RecordsError``, a ``CaptureError`` where the API says so),
and nothing else escapes; no input may take longer than ``Target.time_limit``
seconds or grow the process past ``Target.rss_mb`` (libFuzzer enforces both:
``-timeout`` and ``-rss_limit_mb``, see :mod:`tests.fuzz.run`). Secrets the
dissector redacts must never come out of it.

Structured inputs (the packet, connection and dataset targets) are a sequence
of chunks, ``tag u8, length u16 BE, bytes``, so that seeds built from the
samples and the fuzzer's mutations speak the same format.

The record payload targets are in :mod:`tests.fuzz.payload_targets`; what every target shares
(``Target``, ``chunks``, ``InvariantBroken``) in :mod:`tests.fuzz.harness`.
"""

from __future__ import annotations

import os
import struct
import tempfile

from capture import CaptureError, open_capture
from capture.flows import ConnectionEnd, ConnectionInfo
from capture.pipeline import CaptureOptions, Pipeline
from dissector.connection import Connection, Options
from dissector.decoders import default_decoders
from dissector.embedded import ASSIGNMENT, SUBSCRIPTION, decode_consumer_data, decode_group_payloads
from dissector.errors import RecordsError
from dissector.events import Anomaly, Direction, Event, Exchange, Request, Response, SaslToken
from dissector.records import decode_records, summarize
from dissector.redact import REDACTED
from tests.fuzz.harness import MAX_DECOMPRESSED, InvariantBroken, Target, chunks, rss
from tests.fuzz.payload_targets import (avro_values, framing, json_decoders, json_values, payload_decoder,
                                       protobuf_decoders, protobuf_values, sample_decoder, schema_learning, warm_avro,
                                       warm_schema_learning)


# Anomaly kinds the dissector and capture document (capture/__init__.py, dissector/connection.py).
DISSECTOR_ANOMALIES = frozenset({
    "gap", "resync", "truncated", "malformed", "bad_frame_size", "trailing_bytes", "unknown_api",
    "unsynced_tail", "negative_latency", "in_flight_limit", "frame_held_limit", "inference_limit", "decode_limit",
})
CAPTURE_ANOMALIES = DISSECTOR_ANOMALIES | frozenset({
    "capture_truncated", "capture_corrupt", "caplen_exceeds_wirelen", "caplen_exceeds_snaplen", "capture_drops",
    "no_timestamps", "unsupported_linktype", "ip_fragment", "truncated_header", "tcp_conflict",
    "tcp_out_of_window", "tls", "tls_decrypt_failed", "causal_order_limit", "flow_table_full", "topic_registry_full",
})
# Body fields the dissector redacts (dissector/redact.py), per api key.
SECRET_FIELDS = {36: {"auth_bytes"}, 38: {"hmac"}, 39: {"hmac"}, 40: {"hmac"}, 41: {"hmac"},
                 51: {"salt", "salted_password"}}


def _no_secrets(api_key: int | None, node: object) -> None:
    fields = SECRET_FIELDS.get(api_key or -1)
    if not fields:
        return
    stack = [node]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, item in v.items():
                if k in fields and item not in (None, REDACTED):
                    raise InvariantBroken(f"secret field {k!r} of api {api_key} left unredacted")
                stack.append(item)
        elif isinstance(v, list):
            stack.extend(v)


def check_events(events: list, allowed: frozenset[str]) -> None:
    """Events are the documented types and anomaly kinds; nothing secret leaves the dissector."""
    for ev in events:
        if isinstance(ev, Anomaly):
            if ev.kind not in allowed:
                raise InvariantBroken(f"undocumented anomaly kind {ev.kind!r}: {ev.detail}")
            if ev.kind == "dissector_error":
                raise InvariantBroken(ev.detail)
        elif isinstance(ev, SaslToken):
            if ev.token is not None:
                raise InvariantBroken("a SASL token's bytes were kept without keep_secrets")
        elif isinstance(ev, (Request, Response)):
            _no_secrets(ev.api_key, ev.body)
        elif not isinstance(ev, (Exchange, ConnectionEnd)):
            raise InvariantBroken(f"unexpected event {type(ev).__name__}")


# -- capture readers ---------------------------------------------------------------------------

_TMP = tempfile.gettempdir() if not os.path.isdir("/dev/shm") else "/dev/shm"


def capture_readers(data: bytes) -> None:
    """Whole-file bytes (pcap, pcapng, gzip of either, or anything): opening raises only
    ``CaptureError``; reading yields well-formed records and ends, never raises."""
    fd, path = tempfile.mkstemp(dir=_TMP, suffix=".cap")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            source = open_capture(path)
        except CaptureError as exc:
            if "\n" in str(exc):
                raise InvariantBroken(f"multi-line CaptureError: {exc!r}") from exc
            return
        try:
            for ts, lt, rec, wirelen in source:
                if not (isinstance(ts, int) and isinstance(lt, int) and isinstance(rec, bytes)
                        and isinstance(wirelen, int)):
                    raise InvariantBroken("a record of the wrong shape")
            for p in getattr(source, "problems", []):
                if p.kind not in CAPTURE_ANOMALIES:
                    raise InvariantBroken(f"undocumented capture problem {p.kind!r}")
        finally:
            source.close()
    finally:
        os.unlink(path)


# -- packets and TCP ---------------------------------------------------------------------------

LINKTYPES = (1, 113, 276, 0, 101, 228, 229)   # ethernet, SLL, SLL2, null, raw, raw IPv4, raw IPv6


def packets(data: bytes) -> None:
    """Packets through the whole capture pipeline (link layer, IP, TCP reassembly, detection,
    dissector): only events come out, of documented kinds, never a ``dissector_error``.

    Input: chunks, one per packet; tag bits 0-2 pick the link type, bits 3-6 advance the clock
    by that many ms, bit 7 marks the packet as cut by a snaplen (wirelen > caplen)."""
    records = []
    ts = 1_700_000_000 * 1_000_000_000
    for tag, rec in chunks(data):
        ts += (tag >> 3 & 0x0F) * 1_000_000
        wirelen = len(rec) + (100 if tag & 0x80 else 0)
        records.append((ts, LINKTYPES[tag & 7 if tag & 7 < len(LINKTYPES) else 0], rec, wirelen))
    pipe = Pipeline(CaptureOptions(max_hole_age=0.5))
    events = []
    for ce in pipe.run(records):
        events.append(ce.event)
    check_events(events, CAPTURE_ANOMALIES)


# -- dissector connection ----------------------------------------------------------------------

def run_connection(data: bytes, options: Options | None = None) -> list[Event]:
    """Drive one dissector Connection from a chunked input; the events it gave.

    Tag bit 0: direction (0 to the broker); bit 1: a gap of len(chunk) bytes (or of unknown
    size if the chunk is empty) instead of data; bit 2 (first chunk only): joined mid-stream.
    """
    items = list(chunks(data))
    mid = bool(items and items[0][0] & 4)
    conn = Connection(options or Options(max_frame_size=1 << 20), mid_stream=mid)
    events: list[Event] = []
    ts = 1_000_000
    for tag, b in items:
        ts += 1000
        direction = Direction.TO_CLIENT if tag & 1 else Direction.TO_BROKER
        if tag & 2:
            events += conn.gap(direction, ts, len(b) or None)
        else:
            events += conn.feed(direction, b, ts)
    events += conn.close(ts + 1)
    return events


def dissector_connection(data: bytes) -> None:
    """Bytes per direction into the sans-IO Connection: events of documented kinds only, every
    request ends in exactly one exchange, nothing secret comes out."""
    events = run_connection(data)
    check_events(events, DISSECTOR_ANOMALIES)
    requests = {id(e) for e in events if isinstance(e, Request)}
    ended = [id(e.request) for e in events if isinstance(e, Exchange) and e.request is not None]
    if sorted(ended) != sorted(requests):
        raise InvariantBroken(f"{len(requests)} requests but {len(ended)} exchanges with a request")


# -- record batches and legacy message sets ----------------------------------------------------

_I64 = (-(1 << 63), (1 << 63) - 1)


def _int64(value: object, what: str) -> None:
    """Integers computed from wire values stay what the dataset's int64 columns hold, or are None."""
    if value is not None and not (isinstance(value, int) and _I64[0] <= value <= _I64[1]):
        raise InvariantBroken(f"{what} {value!r} outside int64")


def records(data: bytes) -> None:
    """A records field (v2 batches, legacy message sets, any codec): ``summarize`` never fails
    internally; ``decode_records`` raises only ``RecordsError`` (strict) and never in lenient
    mode; the decompression cap holds; the summary's count agrees with a clean full decode;
    every offset and timestamp computed from the wire (base + delta, shifted inner offsets) is
    an int64 or None."""
    if not data:
        return
    flags, body = data[0], data[1:]
    s = summarize(body, check_crc=bool(flags & 1), max_decompressed=MAX_DECOMPRESSED)
    if s.error is not None and s.error.startswith("internal error"):
        raise InvariantBroken(s.error)
    try:
        rs = decode_records(body, max_decompressed=MAX_DECOMPRESSED, check_crc=bool(flags & 1), strict=True)
    except RecordsError:
        rs = None
    lenient = decode_records(body, max_decompressed=MAX_DECOMPRESSED, check_crc=bool(flags & 1), strict=False)
    leaves = list(lenient.records())
    _int64(s.first_offset, "summary first offset")
    _int64(s.last_offset, "summary last offset")
    for b in lenient.batches:
        _int64(getattr(b, "last_offset", None), "batch last offset")
    for m in leaves:
        _int64(m.offset, "record offset")
        _int64(m.timestamp, "record timestamp")
    size = sum(len(m.value or b"") + len(m.key or b"") for m in leaves)
    if size > MAX_DECOMPRESSED + len(body):
        raise InvariantBroken(f"{size} bytes of keys and values out of {len(body)} input bytes")
    lenient.to_dict()
    if rs is not None and s.error is None and not s.partial_tail and s.record_count is not None:
        if len(list(rs.records())) != s.record_count:
            raise InvariantBroken(f"summary counts {s.record_count}, full decode {len(list(rs.records()))}")


# -- embedded consumer protocol ----------------------------------------------------------------

_DECODERS = default_decoders()


def embedded(data: bytes) -> None:
    """Consumer-protocol bytes (subscription / assignment, in JoinGroup, SyncGroup and
    DescribeGroups bodies): decoded to a dict with its version, or left as the same bytes."""
    if not data:
        return
    name = SUBSCRIPTION if data[0] & 1 else ASSIGNMENT
    raw = data[1:]
    got = decode_consumer_data(_DECODERS, name, raw)
    if not (got is raw or (isinstance(got, dict) and got.get("version") == struct.unpack_from(">h", raw)[0])):
        raise InvariantBroken(f"decode_consumer_data returned {type(got).__name__}")
    body = {"protocol_type": "consumer", "protocols": [{"name": "range", "metadata": raw}],
            "assignments": [{"member_id": "m", "assignment": raw}]}
    decode_group_payloads(_DECODERS, 11, "request", body, None)
    decode_group_payloads(_DECODERS, 14, "request", body, None)
    resp = {"groups": [{"protocol_type": "consumer",
                        "members": [{"member_metadata": raw, "member_assignment": raw}]}]}
    decode_group_payloads(_DECODERS, 15, "response", resp, None)


# -- dataset writer ----------------------------------------------------------------------------

_INFO = ConnectionInfo("10.0.0.1:40000-10.0.0.2:9092#1", "10.0.0.1", 40000, "10.0.0.2", 9092, 0, 0,
                       "kafka", True, "fuzz")


def dataset_writer(data: bytes) -> None:
    """The dataset writer fed a dissector connection's events (with ``--records``): never raises, and
    its tables (Arrow, with the dataset's schemas) hold as many rows as it counted; no row building
    raised (a ``dissector_error`` row: contained, but a bug), and no value reached the writer beyond
    its column's type (the writer's last-line fitting: an integer computed from the wire unchecked).

    The rows still waiting at the end are taken as Arrow tables rather than written: every input
    writing four Parquet files spends its time in pyarrow's encoder (about 13 ms, 70 inputs per
    second under instrumentation), which every decode test exercises anyway. Rows a large input
    made the writer flush mid-way are written for real, under a temporary directory."""
    from kdissect.dataset.writer import CaptureWriter, prepare_outdir
    from kdissect.dataset.rows import RowOptions
    from kdissect.dataset.tables import SCHEMAS

    events = run_connection(data)
    with tempfile.TemporaryDirectory(dir=_TMP) as tmp:
        outdir = prepare_outdir(tmp)
        w = CaptureWriter(outdir, "fuzz.pcap", "fuzz", RowOptions(records=True, record_bytes=True,
                                                                   max_decompressed=MAX_DECOMPRESSED))
        try:
            for ev in events:
                w.event(_INFO, ev)
            tables = w.take_tables()
        finally:
            w.abort()
        for name, (_, table) in tables.items():
            if table.schema != SCHEMAS[name]:
                raise InvariantBroken(f"{name}: schema {table.schema} is not the dataset's")
        rows = {name: written + table.num_rows for name, (written, table) in tables.items()}
        c = w.counts
        if (rows["exchanges"], rows["partitions"], rows["records"]) != (c.exchanges, c.partitions, c.records):
            raise InvariantBroken(f"rows {rows} differ from the counts {c}")
        bugs = [d for k, d in zip(tables["anomalies"][1].column("kind").to_pylist(),
                                  tables["anomalies"][1].column("detail").to_pylist()) if k == "dissector_error"]
        if bugs:
            raise InvariantBroken(f"row building raised: {bugs[0]}")
        fitted = {t: dict(tw.out_of_range) for t, tw in w._writers.items() if tw.out_of_range}
        if fitted:
            raise InvariantBroken(f"values beyond their column's type reached the writer: {fitted}")


# -- Kafka 0.7 ---------------------------------------------------------------------------------

def v07_connection(data: bytes) -> None:
    """Bytes per direction into a connection that picks its protocol (tag bit 3 of the first
    chunk: forced 0.7): as ``dissector_connection``, and an unsynced 0.7 side never holds more
    than the resync window."""
    from dissector.protocols import AutoConnection
    from dissector.v07.connection import V07Connection

    items = list(chunks(data))
    first = items[0][0] if items else 0
    options = Options(max_frame_size=1 << 20)
    conn = (V07Connection if first & 8 else AutoConnection)(options, mid_stream=bool(first & 4))
    events: list[Event] = []
    ts = 1_000_000
    for tag, b in items:
        ts += 1000
        direction = Direction.TO_CLIENT if tag & 1 else Direction.TO_BROKER
        events += conn.gap(direction, ts, len(b) or None) if tag & 2 else conn.feed(direction, b, ts)
        inner = getattr(conn, "inner", conn)
        if isinstance(inner, V07Connection) and any(len(side.buf) > (2 << 20) for side in inner._sides):
            raise InvariantBroken("a 0.7 side holds more than a frame plus the resync window")
    events += conn.close(ts + 1)
    check_events(events, DISSECTOR_ANOMALIES)
    requests = {id(e) for e in events if isinstance(e, Request)}
    ended = [id(e.request) for e in events if isinstance(e, Exchange) and e.request is not None]
    if sorted(ended) != sorted(requests):
        raise InvariantBroken(f"{len(requests)} requests but {len(ended)} exchanges with a request")


def v07_messages(data: bytes) -> None:
    """A 0.7 message set: ``summarize`` and ``decode_message_set`` never raise, the cap holds,
    and a clean set's summary counts what the full decode finds at the top level."""
    from dissector.v07.messages import decode_message_set, summarize as summarize07

    s = summarize07(data, 0, max_decompressed=MAX_DECOMPRESSED)
    ms = decode_message_set(data, 0, max_decompressed=MAX_DECOMPRESSED)
    size = sum(len(m.payload) for m in ms.leaves())
    if size > MAX_DECOMPRESSED + len(data):
        raise InvariantBroken(f"{size} payload bytes out of {len(data)} input bytes")
    if s.error is None and ms.error is None and s.batch_count != len(ms.messages):
        raise InvariantBroken(f"summary counts {s.batch_count}, full decode {len(ms.messages)}")
    s.to_dict()
    [m.to_dict() for m in ms.messages]


# -- amplification -----------------------------------------------------------------------------

AMPLIFICATION_FLOOR = 1 << 16       # a budget floor fuzz-sized inputs reach, so that the budget is what is tested
_AMP_DECODERS: list = []


def _deep_size(root: object) -> int:
    """Bytes of the objects a decoded body holds (each once), the frame's bytes a records summary
    points at aside (they are the wire's)."""
    import sys
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        v = stack.pop()
        if id(v) in seen or v is None or isinstance(v, (bool, type)):
            continue
        seen.add(id(v))
        total += sys.getsizeof(v)
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif hasattr(v, "to_dict") and hasattr(v, "crc_failures"):
            attrs = getattr(v, "__dict__", None)
            if attrs is not None:
                total += sys.getsizeof(attrs)
            stack.append(v.crc_failures)
    return total


def amplification(data: bytes) -> None:
    """Bytes per direction into a Connection whose decoding budget has a small floor: every decoded body
    holds at most its budget (max(floor, ratio x its frame's size)) plus its frame's own bytes, and the
    process's resident memory grows by at most 64 times the input (plus 64 MB) while its events are held.

    Input: as ``dissector_connection``."""
    from dissector import budget
    from dissector.decoders import Decoders

    if not _AMP_DECODERS:
        _AMP_DECODERS.append(Decoders(floor=AMPLIFICATION_FLOOR))
    decoders = _AMP_DECODERS[0]
    before = rss()
    items = list(chunks(data))
    mid = bool(items and items[0][0] & 4)
    conn = Connection(Options(max_frame_size=1 << 20), mid_stream=mid, decoders=decoders)
    events: list[Event] = []
    ts = 1_000_000
    for tag, b in items:
        ts += 1000
        direction = Direction.TO_CLIENT if tag & 1 else Direction.TO_BROKER
        events += conn.gap(direction, ts, len(b) or None) if tag & 2 else conn.feed(direction, b, ts)
    events += conn.close(ts + 1)
    grown = rss() - before
    check_events(events, DISSECTOR_ANOMALIES)
    for ev in events:
        if isinstance(ev, (Request, Response)) and ev.body is not None:
            allowed = budget.budget(ev.size, AMPLIFICATION_FLOOR, budget.RATIO) * 2 + ev.size + 4096
            size = _deep_size(ev.body)
            if size > allowed:      # (twice: a group api's embedded payloads have an allowance as large)
                raise InvariantBroken(f"a {ev.size}-byte frame decoded to {size} bytes (budget {allowed})")
    if grown > 64 * len(data) + (64 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


# -- detection ---------------------------------------------------------------------------------

DETECTION_PORTS = (9092, 9093, 29092, 12345, 8080, 5432)


def detection(data: bytes) -> None:
    """One TCP connection through the pipeline with default detection (no ``--ports``): exactly one
    verdict for a connection that carried data, none otherwise (nothing disappears unseen); a client
    that opens the conversation with a whole request that decodes, or a plausible request header, is
    Kafka (a server that speaks first is not: Kafka's broker only answers); events of documented kinds,
    never a ``dissector_error``.

    Input: a first byte choosing the broker port (bits 0-2) and a capture joined mid-stream (bit 3), then
    chunks: tag bit 0 the direction (0: client to broker), the bytes one segment's payload."""
    from dissector.framing import plausible_request_header, request_frame_decodes
    from tests.capture import pcaptools as pt

    if not data:
        return
    port = DETECTION_PORTS[(data[0] & 7) % len(DETECTION_PORTS)]
    midstream = bool(data[0] & 8)
    c = pt.Conversation(server=("10.0.0.2", port), mss=1 << 16)
    if not midstream:
        c.handshake()
    client = bytearray()
    sent = server_first = False
    for tag, b in chunks(data[1:]):
        if not b:
            continue
        c.packet(not tag & 1, pt.ACK | pt.PSH, b)
        server_first |= bool(tag & 1) and not client
        sent = True
        if not tag & 1 and not midstream and len(client) < 1 << 16:
            client += b
    pipe = Pipeline(CaptureOptions(max_hole_age=0.5))
    events = [ce.event for ce in pipe.run(c.records)]
    check_events(events, CAPTURE_ANOMALIES)
    verdicts = sum(pipe.stats.connections.values())
    if verdicts != (1 if sent else 0):
        raise InvariantBroken(f"{verdicts} verdicts for a connection {'with' if sent else 'without'} data: "
                              f"{pipe.stats.connections}")
    if midstream or server_first or not client or client[0] == 0x16:
        return
    first = bytes(client)
    size = plausible_request_header(first, 0)
    whole = size is not None and len(first) >= size + 4 and request_frame_decodes(first[4:size + 4])
    if (whole or size is not None) and pipe.stats.connections != {"kafka": 1}:
        raise InvariantBroken(f"a client opening with a {'decodable request' if whole else 'plausible header'} "
                              f"was taken for {pipe.stats.connections}")


# -- TLS records -----------------------------------------------------------------------------

_TLS_KEYS: list = []


def _tls_keylog():
    """Every TLS sample's key log, in memory: the seeds' handshakes find their keys and decrypt."""
    from pathlib import Path

    from capture.tls.keylog import KeyLog
    if not _TLS_KEYS:
        log = KeyLog()
        for path in sorted((Path(__file__).resolve().parents[2] / "samples" / "tls").glob("*.keys")):
            log.add_text(path.read_bytes())
        _TLS_KEYS.append(log)
    return _TLS_KEYS[0]


def tls_records(data: bytes) -> None:
    """One TLS connection's two byte streams (garbage records, absurd lengths, handshake fragments,
    real records with their keys): ``TlsSession`` returns only plaintext pieces and notices, never
    raises; at most one notice, and nothing after it; no more plaintext than bytes fed; what it
    buffers stays within its bounds (one partial record per side, ``max_held`` waiting for keys).

    Input: chunks; tag bit 0 = side (0 client, 1 server), bit 1 = bytes lost before this chunk,
    bit 2 = the connection closes here."""
    from capture.tls.records import MAX_FRAGMENT
    from capture.tls.session import Notice, Plain, TlsSession

    session = TlsSession(_tls_keylog(), max_held=1 << 16)
    fed = out_bytes = notices = 0
    ended = False
    for tag, chunk in chunks(data):
        side = tag & 1
        if tag & 2:
            session.gap(side, 0)
        outs = session.feed(side, chunk, 0)
        if tag & 4:
            outs = outs + session.close(0)
        fed += len(chunk)
        for o in outs:
            if ended:
                raise InvariantBroken(f"output after the session ended: {o!r}")
            if isinstance(o, Plain):
                out_bytes += len(o.data)
            elif isinstance(o, Notice):
                notices += 1
                ended = True
            else:
                raise InvariantBroken(f"unexpected output {type(o).__name__}")
        if session.ended is not None:
            ended = True
        if out_bytes > fed:
            raise InvariantBroken("more plaintext than ciphertext")
        if any(r.pending > MAX_FRAGMENT + 5 for r in session._records):
            raise InvariantBroken("a record buffer past one record")
        if session._held_bytes > session.max_held:
            raise InvariantBroken("records held past max_held")
        if tag & 4:
            break
    if notices > 1:
        raise InvariantBroken(f"{notices} notices for one connection")


TARGETS: dict[str, Target] = {
    "capture_readers": Target(capture_readers, 1024, 10, 1 << 16),
    "packets": Target(packets, 1024, 10, 1 << 16),
    "dissector_connection": Target(dissector_connection, 1024, 10, 1 << 16),
    "records": Target(records, 1536, 10, 1 << 16),
    "embedded": Target(embedded, 512, 5, 1 << 12),
    "dataset_writer": Target(dataset_writer, 1536, 20, 1 << 16),
    "v07_connection": Target(v07_connection, 1024, 10, 1 << 16),
    "v07_messages": Target(v07_messages, 1024, 10, 1 << 16),
    "tls_records": Target(tls_records, 1024, 10, 1 << 16),
    "amplification": Target(amplification, 1024, 10, 1 << 16),
    "detection": Target(detection, 1024, 10, 1 << 16),
    "avro_values": Target(avro_values, 1024, 10, 1 << 13, warm_avro),
    "protobuf_values": Target(protobuf_values, 1024, 10, 1 << 13, protobuf_decoders),
    "json_values": Target(json_values, 1024, 10, 1 << 14, json_decoders),
    "framing": Target(framing, 512, 5, 1 << 14),
    "schema_learning": Target(schema_learning, 1536, 20, 1 << 16, warm_schema_learning),
    "payload_decoder": Target(payload_decoder, 1536, 20, 1 << 14, sample_decoder),
}
