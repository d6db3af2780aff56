"""Schema Registry framing: which schema a key or value names, and where its encoding starts.

Confluent-style serializers put the schema's identity in front of the encoded value:

* magic byte 0, then the schema id as a 4-byte big-endian integer;
* magic byte 1, then the schema's 16-byte GUID (newer serializers);
* or nothing in the value, and the same bytes (magic 0 + id or magic 1 + GUID) in the record header
  ``__key_schema_id`` / ``__value_schema_id``.

A Protobuf value adds the message indexes after that: which message of the ``.proto`` file (a path
of indexes into nested messages), as a zigzag varint count and that many zigzag varints; the single
byte 0 stands for ``[0]``, the file's first message. Whether they are there depends on the schema's
type, so they are read by :func:`message_indexes` once the schema is known.

Bytes in, facts out: nothing here imports a codec library or does I/O.
"""

from __future__ import annotations

import uuid

import orjson

from payloads.errors import ValueMismatch
from payloads.limits import json_dumps

KEY_HEADER = "__key_schema_id"
VALUE_HEADER = "__value_schema_id"
MAX_ID = 1 << 31        # ids are Java ints: a prefix naming a larger one is not framing
MAX_INDEXES = 100      # message nesting deeper than this is not a schema's
_JSON_START = frozenset(b'{["-0123456789tfn \t\r\n')
_CONTROL = bytes(c for c in range(32) if c not in b"\t\n\r") + b"\x7f"


def prefix(data: bytes) -> tuple[int | None, str | None, int] | None:
    """``(schema id, GUID, where the encoding starts)`` of a framed value, or None.

    Magic 0 with id 0 (or past 2^31 - 1) is not taken as framing: registries number schemas from 1
    as Java ints, and a value starting with four or more zero bytes is far likelier a big-endian number. Magic 1 is
    returned as a candidate only; the caller takes it as framing when the GUID names a
    schema it knows (a 0x01 byte in front of 16 more is common in plain binary values).
    """
    n = len(data)
    if n >= 5 and data[0] == 0:
        schema_id = int.from_bytes(data[1:5], "big")
        if 0 < schema_id < MAX_ID:
            return schema_id, None, 5
        return None
    if n >= 17 and data[0] == 1:
        return None, str(uuid.UUID(bytes=bytes(data[1:17]))), 17
    return None


def header_ref(value: bytes | None) -> tuple[int | None, str | None, int] | None:
    """``(schema id, GUID, where the message indexes start)`` of a schema id header's value, or None."""
    if value is None:
        return None
    n = len(value)
    if n >= 5 and value[0] == 0:
        return int.from_bytes(value[1:5], "big"), None, 5
    if n >= 17 and value[0] == 1:
        return None, str(uuid.UUID(bytes=bytes(value[1:17]))), 17
    return None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise ValueMismatch("message indexes cut short")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise ValueMismatch("message index varint longer than 10 bytes")


def message_indexes(buf: bytes, pos: int) -> tuple[list[int], int]:
    """The Protobuf message indexes at ``pos``, and where the message starts after them."""
    count, pos = _varint(buf, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > MAX_INDEXES:
        raise ValueMismatch(f"message index count {count} out of range")
    if count > len(buf) - pos:                  # each index takes a byte at least
        raise ValueMismatch(f"message index count {count} past the {len(buf) - pos} bytes left")
    out = []
    for _ in range(count):
        index, pos = _varint(buf, pos)
        if index < 0:
            raise ValueMismatch(f"negative message index {index}")
        out.append(index)
    return out, pos


def unframed_json(data: bytes, want: bool = True) -> tuple[str, bytes | None]:
    """An unframed value's format — ``json-text`` (a whole JSON document), ``text`` (other UTF-8
    without control characters but tab and line ends) or ``binary`` — and, for JSON, the value as
    compact JSON text (when ``want``; None for JSON nested past :data:`payloads.limits.MAX_DEPTH`,
    which is not rendered). Never raises: its caller has no schema to blame."""
    if data and data[0] in _JSON_START:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass                                   # not JSON, or JSON past orjson's 1024 levels: as text
        else:
            if not want:
                return "json-text", None
            try:
                return "json-text", json_dumps(value, data)
            except (ValueMismatch, TypeError):
                return "json-text", None
    if len(data.translate(None, _CONTROL)) != len(data):
        return "binary", None
    if data.isascii():
        return "text", None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary", None
    return "text", None


def unframed_format(data: bytes) -> str:
    """See :func:`unframed_json`."""
    return unframed_json(data, False)[0]
