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

The record payload targets (``payloads/``: Avro, Protobuf and JSON Schema values,
Schema Registry framing, schemas learned from ``_schemas`` records, the payload
decoder end to end) allow a decoder JSON text or a ``PayloadError`` and nothing
else; what they fix per process (decoders of fixed schemas, protoc's output) is
built once, before the first input (``Target.warm``).
"""

from __future__ import annotations

import base64
import importlib.machinery
import importlib.util
import json
import os
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

_CHUNK = struct.Struct(">BH")
MAX_DECOMPRESSED = 4 << 20      # per input: large enough for every seed, small enough for the RSS ceiling

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


class InvariantBroken(AssertionError):
    """A target's invariant does not hold: a bug to fix, with the input as its regression test."""


def chunks(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Split a structured input into (tag, bytes); a short tail is one last chunk."""
    pos, n = 0, len(data)
    while pos + 3 <= n:
        tag, length = _CHUNK.unpack_from(data, pos)
        pos += 3
        yield tag, data[pos:pos + length]
        pos += length


def pack_chunks(items: list[tuple[int, bytes]]) -> bytes:
    return b"".join(_CHUNK.pack(tag, len(b)) + b for tag, b in items)


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


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


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
    before = _rss()
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
    grown = _rss() - before
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


@dataclass(frozen=True)
class Target:
    fn: Callable[[bytes], None]
    rss_mb: int          # libFuzzer -rss_limit_mb
    time_limit: int      # seconds per input (libFuzzer -timeout)
    max_len: int         # bytes per input (libFuzzer -max_len)
    warm: Callable[[], object] | None = None     # once per process, before the first input (protoc runs)


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


# -- record payloads (payloads/) ---------------------------------------------------------------
#
# Keys, values and the schemas of ``_schemas`` come from whoever can produce to a topic. The payload
# targets import ``payloads`` lazily (the package is instrumented by the fuzz child before the
# targets run), hold each decoder to "JSON text or a ``PayloadError``", and build what is fixed per
# process once (``Target.warm``): Protobuf's ``.proto`` text is compiled by protoc, a subprocess,
# never per input.

PAYLOAD_SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "payloads"
ID_STRIDE = 100         # sample folder i's schema id n is i * ID_STRIDE + n where all folders' schemas meet


def _json_text(out: object, who: str) -> None:
    """What a decoder returned is JSON text (compact UTF-8 bytes that parse)."""
    import orjson

    if type(out) is not bytes:
        raise InvariantBroken(f"{who} returned {type(out).__name__}, not JSON bytes")
    try:
        orjson.loads(out)
    except orjson.JSONDecodeError as exc:
        raise InvariantBroken(f"{who} returned bytes that are not JSON ({exc}): {out[:80]!r}") from None


def _no_references(ref: Any) -> Any:
    from payloads import SchemaError
    raise SchemaError(f"reference {ref.name} not found")


def sample_schemas() -> list[tuple[int, str, dict]]:
    """Every schema of the payload samples as the registry exported it (``<folder>/schemas/*.json``):
    (folder index, folder name, the registry's JSON), folders sorted, ids ascending."""
    folders = sorted(p for p in PAYLOAD_SAMPLES.iterdir() if (p / "schemas").is_dir())
    out = []
    for i, folder in enumerate(folders):
        docs = [json.loads(f.read_text()) for f in (folder / "schemas").glob("*.json")]
        out += [(i, folder.name, d) for d in sorted(docs, key=lambda d: d["id"])]
    return out


def _sample_texts(fmt: str) -> list[str]:
    """The distinct schema texts of one format among the samples', in sample order."""
    texts: list[str] = []
    for _, _, doc in sample_schemas():
        if (doc.get("schemaType") or "AVRO").upper() == fmt.upper() and doc["schema"] not in texts:
            texts.append(doc["schema"])
    return texts


# -- Avro values

# What the samples' schemas (a string key, the Order record v1 and v2, hostile ones) leave out: items
# that take no bytes besides nulls, unions of several named types, every logical type, maps of maps,
# top-level unions and maps.
AVRO_EXTRA_SCHEMAS: list[Any] = [
    {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]},
    {"type": "record", "name": "Every", "namespace": "kd.fuzz", "fields": [
        {"name": "nulls", "type": {"type": "array", "items": "null"}},
        {"name": "empties", "type": {"type": "array", "items": {"type": "record", "name": "Nothing", "fields": []}}},
        {"name": "grid", "type": {"type": "map", "values": {"type": "array",
                                                            "items": ["null", "long", "string", "double"]}}},
        {"name": "choice", "type": [
            "null", {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
            {"type": "record", "name": "B", "fields": [{"name": "y", "type": "string"}]},
            {"type": "enum", "name": "E", "symbols": ["P", "Q", "R"]},
            {"type": "fixed", "name": "F2", "size": 2}, "string"]},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "rate", "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal",
                                  "precision": 18, "scale": 9}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "flag", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "nested", "type": {"type": "map", "values": {"type": "map",
                                                              "values": ["null", "kd.fuzz.A", "kd.fuzz.B"]}}},
        {"name": "tail", "type": ["null", "Every"]},
    ]},
    {"type": "record", "name": "Logical", "namespace": "kd.fuzz", "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "unknown", "type": {"type": "string", "logicalType": "kd-unknown"}},
        {"name": "maybe_id", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
        {"name": "amounts", "type": {"type": "array", "items": {"type": "bytes", "logicalType": "decimal",
                                                                "precision": 9, "scale": 2}}},
        {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}},
    ]},
    {"type": "map", "values": {"type": "array", "items": "null"}},
    ["null", "long", "string", "bytes", {"type": "array", "items": "double"}],
]
_AVRO: dict[str, Any] = {}


def avro_schemas() -> list[str]:
    """The Avro schema texts a selector byte picks from: the samples', then AVRO_EXTRA_SCHEMAS."""
    if "texts" not in _AVRO:
        _AVRO["texts"] = _sample_texts("AVRO") + [json.dumps(s) for s in AVRO_EXTRA_SCHEMAS]
    return _AVRO["texts"]


def _coverage_loader(name: str, path: Path) -> Any:
    """In the fuzz child (``payloads`` imported with atheris's hooks), a loader that gives ``path`` the
    same hooks, so coverage reaches a module loaded by file; None elsewhere."""
    if "atheris" not in sys.modules:
        return None
    import payloads.avro
    if "__ATHERIS_INSTRUMENTED__" not in payloads.avro.AvroDecoder.decode.__code__.co_consts:
        return None
    from atheris.import_hook import AtherisSourceFileLoader
    return AtherisSourceFileLoader(name, str(path), True)


def avrofast_twins() -> tuple[Any, Any, str]:
    """(pure, compiled, why there is no compiled one): ``payloads/avrofast.py`` loaded as Python under a
    name of its own, and the extension built from it (``avrofast.cpython-*.so``) loaded by file with its
    own name, ``payloads.avrofast``, but not put in ``sys.modules`` (whichever build the process
    imported stays). No compiled twin when none is built, or when it is older than its ``.py`` or
    ``.pxd`` (it would hold the source to an old build; ``pip install -e .`` rebuilds it)."""
    if "twins" in _AVRO:
        return _AVRO["twins"]
    import payloads.avro  # noqa: F401  (first: the process's own payloads.avrofast)

    here = Path(importlib.util.find_spec("payloads").submodule_search_locations[0])
    source = here / "avrofast.py"
    name = "kd_fuzz_avrofast_pure"
    spec = importlib.util.spec_from_file_location(name, source, loader=_coverage_loader(name, source))
    pure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pure)
    built = next((here / f"avrofast{s}" for s in importlib.machinery.EXTENSION_SUFFIXES
                  if (here / f"avrofast{s}").is_file()), None)
    compiled, why = None, ""
    if built is None:
        why = "payloads/avrofast is not compiled"
    elif built.stat().st_mtime < max(f.stat().st_mtime for f in (source, source.with_suffix(".pxd"))
                                     if f.is_file()):
        why = f"{built.name} is older than avrofast.py / avrofast.pxd (pip install -e . rebuilds it)"
    else:
        own = sys.modules.get("payloads.avrofast")
        loader = importlib.machinery.ExtensionFileLoader("payloads.avrofast", str(built))
        cspec = importlib.util.spec_from_file_location("payloads.avrofast", built, loader=loader)
        compiled = importlib.util.module_from_spec(cspec)
        loader.exec_module(compiled)
        if sys.modules.get("payloads.avrofast") is not own:        # the extension registers itself if absent
            sys.modules["payloads.avrofast"] = own
    if compiled is None:
        print(f"avro_values: no compiled reader to hold to its pure twin: {why}", file=sys.stderr)
    _AVRO["twins"] = (pure, compiled, why)
    return _AVRO["twins"]


def _avro_decoders(index: int) -> tuple[Any, Any]:
    """(pure, compiled or None) decoders of the index-th schema of avro_schemas(), built once."""
    key = f"dec{index}"
    if key not in _AVRO:
        from payloads import PayloadError, Schema
        from payloads.avro import AvroDecoder

        pure, compiled, _ = avrofast_twins()
        schema = Schema("avro", avro_schemas()[index])
        try:
            _AVRO[key] = (AvroDecoder(schema, _no_references, impl=pure),
                          AvroDecoder(schema, _no_references, impl=compiled) if compiled is not None else None)
        except PayloadError as exc:
            raise InvariantBroken(f"fixed Avro schema {index} no longer compiles: {exc}") from None
    return _AVRO[key]


def _avro_outcome(dec: Any, data: bytes) -> tuple[str, bytes | str]:
    from payloads import ValueMismatch

    try:
        out = dec.decode(data, 1, None)
    except ValueMismatch as exc:
        return "mismatch", str(exc)
    _json_text(out, "AvroDecoder.decode")
    return "json", out


def avro_values(data: bytes) -> None:
    """A selector byte picking one of a fixed set of Avro schemas (the samples', a recursive linked list,
    arrays of nulls and of empty records, maps, unions of several named types, decimals, timestamps,
    uuid / time-* / local-timestamp-* logical types), then the value's bytes: ``AvroDecoder.decode``
    returns JSON text or raises ``ValueMismatch``, nothing else, and the compiled reader
    (``avrofast.cpython-*.so``) agrees with its pure twin (``avrofast.py``): the same JSON, or a
    mismatch with the same message."""
    if not data:
        return
    pure, compiled = _avro_decoders(data[0] % len(avro_schemas()))
    expected = _avro_outcome(pure, data)
    if compiled is not None:
        got = _avro_outcome(compiled, data)
        if got != expected:
            raise InvariantBroken(f"compiled reader: {got[0]} {got[1]!r:.300}; pure twin: "
                                  f"{expected[0]} {expected[1]!r:.300}")


def warm_avro() -> None:
    for i in range(len(avro_schemas())):
        _avro_decoders(i)


# -- Protobuf values

PROTO_EXTRA_SCHEMAS = [
    """syntax = "proto3";
package kd.fuzz;

import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/field_mask.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color { RED = 0; GREEN = 1; BLUE = 2; }

message Tree {
  string name = 1;
  repeated Tree children = 2;
  oneof payload { int64 n = 3; string s = 4; bytes b = 5; double d = 6; Leaf leaf = 7; }
  message Leaf {
    sint32 z = 1; fixed64 f = 2; sfixed32 sf = 3; float x = 4; bool ok = 5;
    message Deep { uint64 u = 1; Tree back = 2; }
    Deep deep = 6;
  }
  map<int32, Tree> by_id = 8;
  map<string, google.protobuf.Value> attrs = 9;
  google.protobuf.Struct meta = 10;
  google.protobuf.Any any = 11;
  google.protobuf.FieldMask mask = 12;
  repeated int32 packed = 13;
  repeated Color colors = 14;
  google.protobuf.Timestamp at = 15;
  google.protobuf.Duration ttl = 16;
  google.protobuf.BytesValue blob = 17;
  google.protobuf.UInt64Value big = 18;
  google.protobuf.ListValue list = 19;
  google.protobuf.Empty nothing = 20;
  optional string maybe = 21;
}

message Second { repeated string names = 1; Tree tree = 2; map<uint64, bytes> blobs = 3; }
""",
    """syntax = "proto2";
package kd.legacy;

message Old {
  required int32 id = 1;
  optional string label = 2 [default = "x"];
  repeated group Item = 3 { required string sku = 4; optional int32 qty = 5; }
  optional Kind kind = 6;
  enum Kind { A = 1; B = 2; }
  repeated sint64 packed = 7 [packed = true];
  extensions 100 to 199;
}

extend Old { optional string note = 100; }
""",
]
_PROTO: list[Any] = []


def protobuf_texts() -> list[str]:
    return _sample_texts("PROTOBUF") + PROTO_EXTRA_SCHEMAS


def protobuf_decoders() -> list[Any]:
    """The fixed Protobuf schemas' decoders, built once per process: the samples' ``.proto`` text and
    PROTO_EXTRA_SCHEMAS, each compiled by protoc (here, once), then the same schemas as the base64
    ``FileDescriptorProto`` a serializer registers."""
    if not _PROTO:
        from payloads import Schema
        from payloads.protobuf import ProtobufDecoder

        texts = [ProtobufDecoder(Schema("protobuf", t), _no_references) for t in protobuf_texts()]
        serialized = [ProtobufDecoder(Schema("protobuf", base64.b64encode(d.file.serialized_pb).decode()),
                                      _no_references) for d in texts]
        _PROTO.extend(texts + serialized)
    return _PROTO


def protobuf_values(data: bytes) -> None:
    """A selector byte (bits 0-6: one of the fixed Protobuf schemas; bit 7: no message indexes, the
    first message), then the message indexes as framing has them, then the message:
    ``message_indexes`` and ``ProtobufDecoder.decode`` give JSON text or raise ``ValueMismatch``, nothing
    else."""
    from payloads import ValueMismatch
    from payloads.framing import message_indexes

    if not data:
        return
    decoders = protobuf_decoders()
    dec = decoders[(data[0] & 0x7F) % len(decoders)]
    try:
        indexes, start = (None, 1) if data[0] & 0x80 else message_indexes(data, 1)
        out = dec.decode(data, start, indexes)
    except ValueMismatch:
        return
    _json_text(out, "ProtobufDecoder.decode")


# -- JSON Schema values

JSON_EXTRA_SCHEMAS: list[Any] = [
    {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "https://kd.fuzz/tree.json",
     "definitions": {"node": {"type": "object", "properties": {
         "name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z0-9-]*$"},
         "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}, "uniqueItems": True, "maxItems": 50},
         "n": {"type": "integer", "minimum": -1000, "exclusiveMaximum": 1000, "multipleOf": 3},
         "x": {"type": "number", "multipleOf": 0.01},
         "kind": {"enum": ["a", "b", None, 1.5, [1]]}, "fixed": {"const": {"k": [1, 2]}},
         "either": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
         "any": {"anyOf": [{"type": "boolean"}, {"type": "object", "minProperties": 1}]},
         "not": {"not": {"type": "string"}},
         "when": {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}}},
         "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False,
         "dependencies": {"n": ["name"]}, "propertyNames": {"maxLength": 16}}},
     "$ref": "#/definitions/node"},
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",
     "prefixItems": [{"type": "string"}, {"type": "number"}], "items": {"type": "boolean"},
     "contains": {"const": True}, "minContains": 1, "maxContains": 3,
     "$defs": {"unused": {"type": "null"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "properties": {"v": {"type": "number", "maximum": 10, "exclusiveMaximum": True}},
     "required": ["v"], "additionalProperties": {"type": "array", "minItems": 1}},
    True,
]
_JSON: list[tuple[Any, Any]] = []


def json_schemas() -> list[str]:
    return _sample_texts("JSON") + [json.dumps(s) for s in JSON_EXTRA_SCHEMAS]


def json_decoders() -> list[tuple[Any, Any]]:
    """(not validating, validating) JsonDecoder of each fixed JSON Schema, built once."""
    if not _JSON:
        from payloads import Schema
        from payloads.jsonvalues import JsonDecoder

        for text in json_schemas():
            s = Schema("json", text)
            _JSON.append((JsonDecoder(s, _no_references, False), JsonDecoder(s, _no_references, True)))
    return _JSON


def json_values(data: bytes) -> None:
    """A selector byte (bit 0: validate; bits 1-7: one of a fixed set of JSON Schemas, the samples' and
    drafts 4, 7 and 2020-12 with references, patterns, unique items...), then the value's bytes:
    ``JsonDecoder.decode`` with and without validation returns JSON text or raises ``ValueMismatch``,
    nothing else."""
    from payloads import ValueMismatch

    if not data:
        return
    decoders = json_decoders()
    dec = decoders[(data[0] >> 1) % len(decoders)][data[0] & 1]
    try:
        out = dec.decode(data, 1, None)
    except ValueMismatch:
        return
    _json_text(out, "JsonDecoder.decode")


# -- framing

UNFRAMED_FORMATS = frozenset({"json-text", "text", "binary"})
_CONTROL = frozenset(c for c in range(32) if c not in b"\t\n\r") | {0x7F}


def _check_ref(got: object, data: bytes, what: str, ids: range) -> None:
    """A prefix / header_ref answer: None exactly when the bytes are not framing, else (id, None, 5)
    for magic 0 + an id in ``ids``, (None, the GUID, 17) for magic 1 + 16 bytes."""
    import uuid

    want: object = None
    if len(data) >= 5 and data[0] == 0 and int.from_bytes(data[1:5], "big") in ids:
        want = (int.from_bytes(data[1:5], "big"), None, 5)
    elif len(data) >= 17 and data[0] == 1:
        want = (None, str(uuid.UUID(bytes=bytes(data[1:17]))), 17)
    if got != want or (got is not None and type(got) is not tuple):
        raise InvariantBroken(f"{what} gave {got!r} for {data[:17].hex()}, not {want!r}")


def _json_depth(value: object) -> int:
    """Levels of objects and arrays (``[]`` is 1, a number 0), counted without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, depth)
            stack.extend((item, depth + 1) for item in v)
    return deepest


def framing(data: bytes) -> None:
    """Arbitrary bytes through ``payloads.framing``: ``prefix`` and ``header_ref`` give None or the
    documented (id, GUID, where the value starts), ``message_indexes`` (at every place framing can put
    them) a list of 1 to MAX_INDEXES non-negative indexes and a place after them within the bytes, or
    ``ValueMismatch``; ``unframed_json`` a documented format whose claim holds (``json-text``: JSON,
    given back as the same JSON when asked for, unless nested past ``limits.MAX_DEPTH``, and then not;
    ``text``: UTF-8 without control characters but tab and line ends; ``binary``: not that), never an
    exception, and ``unframed_format`` the same format; memory in proportion to the
    input (the JSON given back at most 8 times its size; resident memory grows by at most 64 times the
    input plus 16 MB)."""
    import orjson

    from payloads import ValueMismatch
    from payloads.framing import MAX_ID, MAX_INDEXES, header_ref, message_indexes, prefix, unframed_format, \
        unframed_json
    from payloads.limits import MAX_DEPTH

    before = _rss()
    _check_ref(prefix(data), data, "prefix", range(1, MAX_ID))
    _check_ref(header_ref(data), data, "header_ref", range(0, 1 << 32))
    for pos in (0, 1, 5, 17):
        if pos > len(data):
            break
        try:
            indexes, after = message_indexes(data, pos)
        except ValueMismatch:
            continue
        if not (type(indexes) is list and 1 <= len(indexes) <= MAX_INDEXES
                and all(type(i) is int and i >= 0 for i in indexes) and pos < after <= len(data)):
            raise InvariantBroken(f"message_indexes at {pos}: {indexes!r:.200}, then {after} of {len(data)}")
    fmt, decoded = unframed_json(data)
    if fmt not in UNFRAMED_FORMATS:
        raise InvariantBroken(f"unframed_json: format {fmt!r}")
    if unframed_format(data) != fmt or unframed_json(data, False) != (fmt, None):
        raise InvariantBroken("unframed_format / unframed_json(want=False) disagree with unframed_json")
    if fmt == "json-text":
        value = orjson.loads(data)
        deep = _json_depth(value) > MAX_DEPTH
        if deep != (decoded is None):
            raise InvariantBroken(f"JSON {_json_depth(value)} levels deep given back as {decoded!r:.100}")
        if decoded is not None:
            if type(decoded) is not bytes or orjson.loads(decoded) != value:
                raise InvariantBroken(f"json-text given back as {decoded!r:.200}")
            if len(decoded) > 8 * len(data) + 64:
                raise InvariantBroken(f"{len(data)} bytes of JSON given back as {len(decoded)}")
    else:
        if decoded is not None:
            raise InvariantBroken(f"{fmt} with JSON given back")
        try:
            data.decode("utf-8")
            text = not _CONTROL.intersection(data)
        except UnicodeDecodeError:
            text = False
        if text != (fmt == "text"):
            raise InvariantBroken(f"{data[:40]!r} is {'text' if text else 'binary'}, said to be {fmt}")
    grown = _rss() - before
    if grown > 64 * len(data) + (16 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


# -- schema learning

_SCHEMA_KEY = b'{"keytype":"SCHEMA","subject":"fuzz","version":1,"magic":1}'
LEARNED_DECODED = 32          # schemas compiled, each decoding one value, per input
_LEARN_FORMATS = ("avro", "json", "protobuf")
_REF_SUFFIX = {"avro": ".avsc", "json": ".json", "protobuf": ".proto"}


def schema_learning(data: bytes) -> None:
    """``_schemas`` records (raw, or made from a schema's text as a registry writes them) learned by a
    ``LearnedStore``, then each schema learned compiled (``PayloadDecoder.compiled``: Avro, JSON Schema,
    and Protobuf given as a serialized descriptor; never ``.proto`` text, which would run protoc per
    input) and one value decoded with it: nothing but ``PayloadError`` subclasses (learn: SchemaError;
    compile: SchemaError, MissingLibrary; decode: ValueMismatch), JSON text from every decode, time and
    memory bounded (resident memory grows by at most 64 times the input plus 64 MB).

    Input: chunks; tag bits 0-2: 0 a ``_schemas`` key (for the next value), 1 a ``_schemas`` value (learned
    with that key, or a SCHEMA key of its own), 2 / 3 / 4 the text of an Avro / JSON Schema / Protobuf
    schema (for Protobuf: a ``FileDescriptorProto``, registered base64), made a SCHEMA record with id
    bits 3-6 plus 1 and, with bit 7, a reference to the schema made before it (named ``refN.avsc`` /
    ``.json`` / ``.proto``); 5 a value to decode (the i-th schema learned decodes value i modulo their
    number); 6 validate JSON Schema values; 7 a tombstone (the key alone). The first
    LEARNED_DECODED schemas learned are compiled and decode a value: a value may cost its reader
    ~65,000 items of nothing (``limits.MAX_EMPTY_ITEMS``), some 80 ms instrumented, so that an input's
    time is bounded by the target's, not by its number of schemas."""
    from payloads import LearnedStore, PayloadDecoder, PayloadError, Reference, Schema, ValueMismatch, \
        schemas_record
    from payloads.framing import message_indexes
    from payloads.protobuf import _is_serialized

    before = _rss()
    store = LearnedStore()
    key: bytes | None = None
    values: list[bytes] = []
    validate = False
    made: list[Reference] = []
    for tag, chunk in chunks(data):
        kind = tag & 7
        try:
            if kind == 0:
                key = chunk
            elif kind == 1:
                store.learn(_SCHEMA_KEY if key is None else key, chunk)
                key = None
            elif kind in (2, 3, 4):
                fmt = _LEARN_FORMATS[kind - 2]
                text = base64.b64encode(chunk).decode() if fmt == "protobuf" else chunk.decode("utf-8", "replace")
                sid = (tag >> 3 & 0x0F) + 1
                refs = (made[-1],) if tag & 0x80 and made else ()
                version = len(made) + 1
                store.learn(*schemas_record(Schema(fmt, text, refs, sid, None, f"fuzz-{sid}", version)))
                made.append(Reference(f"ref{len(made) + 1}{_REF_SUFFIX[fmt]}", f"fuzz-{sid}", version))
            elif kind == 5:
                values.append(chunk)
            elif kind == 6:
                validate = True
            else:
                store.learn(_SCHEMA_KEY if key is None else key, None)
                key = None
        except PayloadError:
            pass
    dec = PayloadDecoder(learned=store, validate=validate)
    for i, (_, schema) in enumerate(store.learned[:LEARNED_DECODED]):
        if schema.format == "protobuf" and not _is_serialized(schema.text):
            continue
        try:
            compiled = dec.compiled(schema)
        except PayloadError:
            continue
        value = values[i % len(values)] if values else b""
        try:
            indexes, start = message_indexes(value, 0) if schema.format == "protobuf" else (None, 0)
            out = compiled.decode(value, start, indexes)
        except ValueMismatch:
            continue
        _json_text(out, f"the {schema.format} decoder of a learned schema")
    grown = _rss() - before
    if grown > 64 * len(data) + (64 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


def warm_schema_learning() -> None:
    """The codec libraries imported before the first input (their import is not an input's memory)."""
    import fastavro  # noqa: F401
    import jsonschema  # noqa: F401
    from google.protobuf import descriptor_pool, json_format, message_factory  # noqa: F401
    schema_learning(pack_chunks([(2, avro_schemas()[1].encode()), (3, json_schemas()[0].encode()), (6, b""),
                                 (5, b"{}")]))


# -- the payload decoder, end to end

RESULT_FORMATS = frozenset({"avro", "protobuf", "json", "json-text", "text", "binary"})
PAYLOADS_DECODED = 32         # keys and values decoded per input
PROBLEM_KINDS = frozenset({"unknown", "mismatch", "schema"})    # and "error": a failure contained, a bug
_DECODER: list[Any] = []


def sample_schemas_records() -> list[tuple[bytes, bytes]]:
    """Every sample schema as the ``_schemas`` record a registry writes for it (with its GUID), folder i's
    ids moved to i * ID_STRIDE + id so that all folders' schemas meet in one store. (The ``_schemas``
    records the samples' captures hold are learned after these: see :func:`sample_decoder`.)"""
    from payloads import Schema, schemas_record
    from payloads.schema import FORMATS

    out = []
    for i, folder, doc in sample_schemas():
        s = Schema(FORMATS[(doc.get("schemaType") or "AVRO").upper()], doc["schema"], (),
                   i * ID_STRIDE + doc["id"], None, f"{folder}/{doc['subject']}", doc["version"])
        key, value = schemas_record(s)
        value = json.dumps({**json.loads(value), "guid": doc["guid"]}).encode()
        out.append((key, value))
    return out


def sample_decoder() -> Any:
    """One PayloadDecoder (validating JSON Schema values) for the process: the samples' schemas learned
    from their ``_schemas`` records (:func:`sample_schemas_records`), then the ``_schemas`` records the
    samples' captures hold (a registry's, and a hostile client's: ids of their own, kept where no
    sample schema has them), and all compiled (protoc runs here, for the ``.proto`` texts, once)."""
    if not _DECODER:
        from payloads import PayloadDecoder, PayloadError

        dec = PayloadDecoder(validate=True)
        for key, value in sample_schemas_records():
            dec.learn(key, value)
        exported = len(dec.learned.learned)
        for key, value in _captured_schemas_records():
            try:
                dec.learn(key, value)
            except PayloadError:
                pass
        for n, (_, schema) in enumerate(dec.learned.learned):
            try:
                dec.compiled(schema)
            except PayloadError as exc:
                if n < exported:
                    raise InvariantBroken(f"sample schema {schema.schema_id} no longer compiles: {exc}") from None
        _DECODER.append(dec)
    return _DECODER[0]


def _captured_schemas_records() -> list[tuple[bytes | None, bytes | None]]:
    """The ``_schemas`` records the payload samples' producers sent (read from their captures)."""
    from capture import read_capture
    from dissector.events import Exchange
    from dissector.records import decode_records
    from dissector.views import partition_rows

    out = []
    for pcap in sorted(PAYLOAD_SAMPLES.glob("*/*.pcap")):
        for ce in read_capture(pcap):
            ex = ce.event
            if not isinstance(ex, Exchange) or ex.api_key != 0 or ex.request is None:
                continue
            for r in partition_rows(0, "request", ex.api_version, ex.request.body):
                if r.topic == "_schemas" and r.records is not None:
                    out += [(m.key, m.value) for m in
                            decode_records(r.records.data, max_decompressed=MAX_DECOMPRESSED).records()]
    return out


def _check_result(result: object, data: bytes | None) -> None:
    """``decoder.Result``: (schema id, GUID, format, decoded JSON, problem), JSON and a problem never both."""
    if type(result) is not tuple or len(result) != 5:
        raise InvariantBroken(f"decode returned {result!r:.200}, not a 5-tuple")
    sid, guid, fmt, decoded, problem = result
    if problem is not None:
        if not (type(problem) is tuple and len(problem) == 2 and type(problem[1]) is str):
            raise InvariantBroken(f"problem {problem!r:.200}")
        if problem[0] == "error":
            raise InvariantBroken(f"decoding raised, contained as a problem: {problem[1]}")
        if problem[0] not in PROBLEM_KINDS:
            raise InvariantBroken(f"undocumented problem kind {problem[0]!r}: {problem[1]}")
    if not ((sid is None or type(sid) is int) and (guid is None or type(guid) is str)
            and (fmt is None or fmt in RESULT_FORMATS)):
        raise InvariantBroken(f"decode returned {result!r:.300}")
    if decoded is not None:
        _json_text(decoded, "PayloadDecoder.decode")
        if problem is not None:
            raise InvariantBroken(f"decoded JSON and a problem: {problem}")
    if data is None and result != (None, None, None, None, None):
        raise InvariantBroken(f"a null key or value decoded to {result!r:.200}")


def payload_decoder(data: bytes) -> None:
    """Keys and values, with or without a schema id header, through ``PayloadDecoder.decode`` with the
    samples' schemas learned from their ``_schemas`` records (JSON Schema values validated): it never
    raises, its answer has ``decoder.Result``'s shape (ids, a documented format, JSON text or a problem
    of a documented kind, never both), no problem is an ``error`` (a failure contained: a bug all the
    same), decoding the same bytes again gives the same answer (the memo and the fast path agree
    with the first reading), and what the decoder keeps stays in proportion to what it was given: its
    memo keeps answers to keys and values of at most ``MEMO_BYTES`` whose JSON is at most 4 times that
    (as ``decoder.MEMO_BYTES`` documents: a few bytes of Avro nulls are a lot of JSON), and resident
    memory grows by at most 64 times the input plus 8 MB over an input (one decoder serves every
    input, as one serves a whole capture).

    Input: chunks; tag bit 0: the chunk is the ``__value_schema_id`` header of the next key or value;
    bit 1: that key or value is null. The first PAYLOADS_DECODED keys and values are decoded (one may
    cost ~65,000 items of nothing, some 80 ms instrumented, twice)."""
    dec = sample_decoder()
    before = _rss()
    header: bytes | None = None
    decoded = 0
    for tag, chunk in chunks(data):
        if tag & 1:
            header = chunk
            continue
        decoded += 1
        if decoded > PAYLOADS_DECODED:
            break
        value = None if tag & 2 else chunk
        first = dec.decode(value, header)
        _check_result(first, value)
        again = dec.decode(value, header)
        if again != first:
            raise InvariantBroken(f"decoded twice: {first!r:.300}, then {again!r:.300}")
        header = None
    _check_memo(dec)
    grown = _rss() - before
    if grown > 64 * len(data) + (8 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


def _check_memo(dec: Any) -> None:
    from payloads import decoder

    limit = decoder.MEMO_BYTES
    for key, result in getattr(dec, "_memo", {}).items():
        data = key[0] if type(key) is tuple else key
        if len(data) > limit or (result[3] is not None and len(result[3]) > 4 * limit):
            raise InvariantBroken(f"the memo keeps the answer to {len(data)} bytes: "
                                  f"{len(result[3] or b'')} bytes of JSON")


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
