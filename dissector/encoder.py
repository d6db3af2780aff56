"""Encode bodies and frames from the schema: the inverse of :mod:`dissector.decoders`.

Used by tests (round trips, fuzzing) and to hand-build bytes for legacy
versions no client at hand still sends. It walks the schema field by field;
it is never on a hot path, so clarity wins over speed.

Bodies use the decoders' conventions: snake_case names, uuids in Kafka's
unpadded url-safe base64 form (``bytes`` of 16 and ``uuid.UUID`` are accepted
too), ``bytes`` for bytes, raw ``bytes`` (or None) for records, None for null,
and ``_unknown_tags`` ({tag: raw bytes}) for tagged fields the schema lacks.
A missing key encodes the field's default, so hand-built bodies stay short.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from base64 import urlsafe_b64decode
from typing import Any

from dissector import schema
from dissector.framing import request_header_version, response_header_version
from dissector.schema import Field

_FIXED = {
    "int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "uint32": struct.Struct(">I"),
    "float64": struct.Struct(">d"), "bool": struct.Struct(">?"),
}
_I16 = _FIXED["int16"].pack
_I32 = _FIXED["int32"].pack


class EncodeError(ValueError):
    """The body does not fit the schema (wrong type, null where not nullable, unknown api)."""


def uvarint(value: int) -> bytes:
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uuid_bytes(value: Any) -> bytes:
    if isinstance(value, _uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif isinstance(value, str):
        raw = urlsafe_b64decode(value + "=" * (-len(value) % 4))
    else:
        raise EncodeError(f"not a uuid: {value!r}")
    if len(raw) != 16:
        raise EncodeError(f"uuid must be 16 bytes, got {len(raw)}")
    return raw


def _length(out: bytearray, n: int, compact: bool, wide: bool) -> None:
    """A length or count; ``n == -1`` is null."""
    if compact:
        out += uvarint(n + 1)
    elif wide:
        out += _I32(n)
    else:
        out += _I16(n)


def _scalar(out: bytearray, ftype: str, value: Any, nullable: bool, compact: bool, name: str) -> None:
    packer = _FIXED.get(ftype)
    if packer is not None:
        try:
            out += packer.pack(value)
        except (struct.error, TypeError) as exc:
            raise EncodeError(f"{name}: {value!r} is not a valid {ftype}") from exc
        return
    if ftype == "uuid":
        out += uuid_bytes(value)
        return
    if ftype in ("string", "bytes", "records"):
        if value is None:
            if not nullable:
                raise EncodeError(f"{name}: null in a non-nullable {ftype}")
            _length(out, -1, compact, wide=ftype != "string")
            return
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        _length(out, len(raw), compact, wide=ftype != "string")
        out += raw
        return
    raise EncodeError(f"{name}: unhandled type {ftype}")


def _field(out: bytearray, f: Field, value: Any, flexible: bool) -> None:
    """One field's value, without any tag framing."""
    if f.type.startswith("[]"):
        if value is None:
            if not f.nullable:
                raise EncodeError(f"{f.name}: null in a non-nullable array")
            _length(out, -1, f.flexible, wide=True)
            return
        _length(out, len(value), f.flexible, wide=True)
        elem = f.type[2:]
        for item in value:
            if elem == "struct":
                _struct(out, f.children or (), item, flexible)
            else:
                _scalar(out, elem, item, False, f.flexible, f.name)
    elif f.type == "struct":
        if f.nullable:
            # KIP-893: an int8 marker, -1 for null, 1 for present.
            if value is None:
                out += b"\xff"
                return
            out += b"\x01"
        _struct(out, f.children or (), value if value is not None else {}, flexible)
    else:
        _scalar(out, f.type, value, f.nullable, f.flexible, f.name)


def _struct(out: bytearray, fields: tuple[Field, ...], body: dict, flexible: bool) -> None:
    if not isinstance(body, dict):
        raise EncodeError(f"expected a dict for a struct, got {type(body).__name__}")
    tagged: dict[int, bytes] = {}
    for f in fields:
        value = body.get(f.name, f.default)
        if f.tag is not None:
            if value == f.default:
                continue  # tagged fields at their default are left off the wire
            buf = bytearray()
            _field(buf, f, value, flexible)
            tagged[f.tag] = bytes(buf)
        else:
            _field(out, f, value, flexible)
    if not flexible:
        return
    for tag, raw in (body.get("_unknown_tags") or {}).items():
        if tag in tagged:
            raise EncodeError(f"unknown tag {tag} collides with a known tagged field")
        tagged[tag] = bytes(raw)
    out += uvarint(len(tagged))
    for tag in sorted(tagged):
        raw = tagged[tag]
        out += uvarint(tag)
        out += uvarint(len(raw))
        out += raw


def _encode(msg: schema.MessageSchema | None, what: str, body: dict) -> bytes:
    if msg is None:
        raise EncodeError(f"{what} is not in the schema")
    out = bytearray()
    _struct(out, msg.fields, body, msg.flexible)
    return bytes(out)


def encode_body(api_key: int, kind: str, version: int, body: dict) -> bytes:
    """The body of a request or response (no size, no header)."""
    return _encode(schema.message(api_key, kind, version), f"api {api_key} {kind} v{version}", body)


def encode_data(name: str, version: int, body: dict, *, version_prefix: bool = False) -> bytes:
    """An embedded structure (consumer protocol, ...). ``version_prefix`` prepends the
    int16 version, as consumer-protocol payloads carry it inside their bytes field."""
    raw = _encode(schema.data_message(name, version), f"{name} v{version}", body)
    return (_I16(version) + raw) if version_prefix else raw


def _tag_section(tags: dict[int, bytes] | None) -> bytes:
    tags = tags or {}
    out = bytearray(uvarint(len(tags)))
    for tag in sorted(tags):
        out += uvarint(tag) + uvarint(len(tags[tag])) + tags[tag]
    return bytes(out)


def request_frame(api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict | bytes,
                  *, header_tags: dict[int, bytes] | None = None) -> bytes:
    """Size prefix + request header of the version the api uses + body (a dict, or bytes as is)."""
    hv = request_header_version(api_key, version)
    head = bytearray(struct.pack(">hhi", api_key, version, correlation_id))
    if hv >= 1:
        # The client id stays a classic nullable string even in header v2.
        _scalar(head, "string", client_id, True, False, "client_id")
    if hv >= 2:
        head += _tag_section(header_tags)
    raw = body if isinstance(body, (bytes, bytearray)) else encode_body(api_key, "request", version, body)
    frame = bytes(head) + bytes(raw)
    return _I32(len(frame)) + frame


def response_frame(api_key: int, version: int, correlation_id: int, body: dict | bytes,
                   *, header_tags: dict[int, bytes] | None = None) -> bytes:
    """Size prefix + response header (v1 if flexible, v0 otherwise and for ApiVersions) + body."""
    hv = response_header_version(api_key, version)
    head = _I32(correlation_id)
    if hv >= 1:
        head += _tag_section(header_tags)
    raw = body if isinstance(body, (bytes, bytearray)) else encode_body(api_key, "response", version, body)
    frame = head + bytes(raw)
    return _I32(len(frame)) + frame


__all__ = ["EncodeError", "encode_body", "encode_data", "request_frame", "response_frame", "uuid_bytes", "uvarint"]
