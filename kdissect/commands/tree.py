"""The ``-V`` view of ``kdissect show``: a decoded message field by field, as a detail pane."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from dissector.codecs import render_bytes
from dissector.events import Request, Response
from dissector.records import RecordBatch, decode_records
from dissector.schema import error_name
from dissector.v07 import wire as v07_wire
from dissector.v07.messages import Message07, MessageSetSummary, decode_message_set

_INDENT = "    "
_MAX_TEXT = 120   # longest rendering of one bytes/string value before it is cut
_MAX_DECODED = 2000   # longest decoded key or value (JSON) before it is cut


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (bytes, bytearray)):
        r = render_bytes(bytes(value))
        shown = r if len(r) <= _MAX_TEXT else r[:_MAX_TEXT] + "..."  # type: ignore[operator]
        return f"{shown!r} ({len(value)} bytes)"
    if isinstance(value, str):
        return repr(value) if len(value) <= _MAX_TEXT else repr(value[:_MAX_TEXT]) + "..."
    return str(value)


def _ms_time(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "none"
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _records_line(s: Any) -> str:
    count = "?" if s.record_count is None else s.record_count
    parts = [f"{count} record{'' if count == 1 else 's'} in {s.batch_count} "
             f"{'batch' if s.batch_count == 1 else 'batches'}", f"{s.total_bytes} bytes"]
    if s.codec:
        parts.append(s.codec)
    if s.first_offset is not None:
        parts.append(f"offsets {s.first_offset}-{s.last_offset}")
    if s.producer_id is not None and s.producer_id >= 0:
        parts.append(f"producer {s.producer_id} epoch {s.producer_epoch}")
    if s.transactional:
        parts.append("transactional")
    if s.control:
        parts.append("control")
    if s.crc_checked:
        parts.append(f"CRC mismatch at {s.crc_failures}" if s.crc_failures else "CRC ok")
    if s.partial_tail:
        parts.append(f"partial tail {s.tail_bytes} bytes")
    if s.error:
        parts.append(f"error: {s.error}")
    return ", ".join(parts)


def _payload_lines(pad: str, r: Any, payloads: Any, out: list[str]) -> None:
    """A record's key and value as their schemas decode them (``show -V --schemas``)."""
    kh = vh = None
    for name, hv in getattr(r, "headers", None) or ():
        if name == "__key_schema_id":
            kh = hv
        elif name == "__value_schema_id":
            vh = hv
    for side, data, header in (("key", r.key, kh), ("value", r.value, vh)):
        sid, guid, fmt, decoded, problem = payloads.decode(data, header)
        if sid is None and guid is None and decoded is None and problem is None:
            continue                             # unframed and not JSON: the bytes above say it all
        schema = f"schema {sid}" if sid is not None else f"schema {guid}" if guid is not None else "no schema"
        if problem is not None:
            out.append(f"{pad}{side} ({schema}): {problem[1]}")
            continue
        text = decoded.decode() if decoded is not None else "not decoded"
        if len(text) > _MAX_DECODED:
            text = text[:_MAX_DECODED] + "..."
        out.append(f"{pad}{side} {fmt} ({schema}): {text}")


def _records_detail(s: Any, depth: int, out: list[str], payloads: Any = None) -> None:
    data = getattr(s, "data", None)
    if not data:
        return
    pad = _INDENT * depth
    if isinstance(s, MessageSetSummary):
        _v07_detail(s, depth, out)
        return
    rs = decode_records(data, strict=False)
    for b in rs.batches:
        if isinstance(b, RecordBatch):
            out.append(f"{pad}batch base offset {b.base_offset}, {b.record_count} records, {b.codec}, "
                       f"{b.timestamp_type}, producer {b.producer_id}/{b.producer_epoch} seq {b.base_sequence}"
                       + (", transactional" if b.transactional else "") + (", control" if b.control else "")
                       + (f", error: {b.error}" if b.error else ""))
        else:
            out.append(f"{pad}message set entry offset {b.offset}, magic {b.magic}, {b.codec}"
                       + (f", error: {b.error}" if b.error else ""))
        for r in b.leaves():
            out.append(f"{pad}{_INDENT}offset {r.offset}  ts {_ms_time(r.timestamp)}  key {_text(r.key)}  "
                       f"value {_text(r.value)}")
            for hk, hv in r.headers:
                out.append(f"{pad}{_INDENT * 2}header {hk!r}: {_text(hv)}")
            if payloads is not None:
                _payload_lines(pad + _INDENT * 2, r, payloads, out)
    if rs.error:
        out.append(f"{pad}error: {rs.error}")


def _v07_detail(s: MessageSetSummary, depth: int, out: list[str]) -> None:
    ms = decode_message_set(s.data or b"", s.base_offset)

    def walk(m: Message07, d: int) -> None:
        pad = _INDENT * d
        where = f"offset {m.offset}" if m.offset is not None else f"byte {m.position}"
        crc = "CRC ok" if m.crc_valid else f"CRC mismatch ({m.checksum:#010x})"
        if m.is_wrapper:
            out.append(f"{pad}{where}  magic {m.magic}, {m.codec} wrapper of {len(m.inner or ())} messages, {crc}"
                       + (f", error: {m.error}" if m.error else ""))
            for inner in m.inner or ():
                walk(inner, d + 1)
        else:
            out.append(f"{pad}{where}  magic {m.magic}, {crc}  payload {_text(m.payload)}"
                       + (f", error: {m.error}" if m.error else ""))
    for m in ms.messages:
        walk(m, depth)
    if ms.partial_tail:
        out.append(f"{_INDENT * depth}partial message at the end ({ms.tail_bytes} bytes)")
    if ms.error:
        out.append(f"{_INDENT * depth}error: {ms.error}")


def _node(name: str, value: Any, depth: int, out: list[str], payloads: Any = None,
          errors: Any = error_name) -> None:
    """``errors``: the error name of a code, in the message's protocol generation."""
    pad = _INDENT * depth
    if isinstance(value, dict):
        out.append(f"{pad}{name}")
        for k, v in value.items():
            _node(k, v, depth + 1, out, payloads, errors)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        out.append(f"{pad}{name}: {len(value)} item{'s' if len(value) != 1 else ''}")
        for i, v in enumerate(value):
            _node(f"[{i}]", v, depth + 1, out, payloads, errors)
    elif name == "error_code" and type(value) is int:
        out.append(f"{pad}{name}: {value} {errors(value)}")
    elif isinstance(value, list):
        out.append(f"{pad}{name}: [{', '.join(_text(v) for v in value)}]")
    elif hasattr(value, "record_count") and hasattr(value, "crc_failures"):
        out.append(f"{pad}{name}: {_records_line(value)}")
        _records_detail(value, depth + 1, out, payloads)
    else:
        out.append(f"{pad}{name}: {_text(value)}")


def message_tree(msg: Request | Response, kind: str, api: str, payloads: Any = None) -> list[str]:
    """The ``-V`` lines of a message; ``payloads`` (a :class:`payloads.PayloadDecoder`): records' keys
    and values decoded under them."""
    pad = _INDENT * 2
    # The length field's value, as Wireshark shows it: the message after the 4 bytes that carry it.
    length = f"{pad}length: {msg.size - 4}"
    if msg.protocol == "0.7":
        out = [f"{_INDENT}Kafka 0.7 {api} {kind}", length,
               f"{pad}ordinal: {msg.correlation_id} (0.7 has no correlation id; requests pair with responses "
               "by order)"]
    else:
        out = [f"{_INDENT}Kafka {api} v{msg.api_version} {kind}", length,
               f"{pad}correlation_id: {msg.correlation_id}"]
    if isinstance(msg, Request):
        if msg.protocol != "0.7":
            out.append(f"{pad}api_key: {msg.api_key}")
            out.append(f"{pad}api_version: {msg.api_version}")
            out.append(f"{pad}client_id: {_text(msg.client_id)}")
    elif msg.inferred:
        out.append(f"{pad}api inferred from the response body (request not captured)")
    if msg.header_tags:
        for tag, raw in msg.header_tags.items():
            out.append(f"{pad}header tag {tag}: {_text(raw)}")
    if msg.body is None:
        out.append(f"{pad}body: not decoded" + (f" ({len(msg.raw)} bytes kept raw)" if msg.raw else ""))
    else:
        errors = v07_wire.error_name if msg.protocol == "0.7" else error_name
        for k, v in msg.body.items():
            _node(k, v, 2, out, payloads, errors)
    if msg.failure is not None:
        f = msg.failure
        out.append(f"{pad}[decode stopped: {f.error} at byte {f.offset}: {f.detail}]")
    return out
