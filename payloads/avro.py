"""Avro values, read by fastavro with the writer's schema (the one the value's id names)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import orjson

from payloads.errors import SchemaError, ValueMismatch
from payloads.libs import need
from payloads.render import to_json
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]
_NAMED = ("record", "enum", "fixed", "error")
_OBJECT = re.compile(r"\s*(?:from )?<[^<>]* at 0x[0-9a-fA-F]+>")   # fastavro names its buffer by address


def _load(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # A bare name ("string", or a referenced record's name) is valid Avro schema text too.
        stripped = text.strip()
        if stripped and all(c.isalnum() or c in "._" for c in stripped):
            return stripped
        raise SchemaError("Avro schema text is not JSON") from None


def _ambiguous(node: Any, seen: set[int] | None = None) -> bool:
    """Whether a union somewhere in the (parsed) schema has more than one named branch."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return False
    seen.add(id(node))
    if isinstance(node, list):
        named = [b for b in node if isinstance(b, dict) and b.get("type") in _NAMED or isinstance(b, str)
                 and b not in ("null", "boolean", "int", "long", "float", "double", "bytes", "string")]
        return len(named) > 1 or any(_ambiguous(b, seen) for b in node)
    if isinstance(node, dict):
        return any(_ambiguous(v, seen) for k, v in node.items() if k in ("type", "fields", "items", "values"))
    return False


def _named(value: Any) -> Any:
    """fastavro's ``(name, value)`` union branches as ``{name: value}``, everywhere in ``value``."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return {value[0]: _named(value[1])}
    if isinstance(value, dict):
        return {k: _named(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(v) for v in value]
    return value


class AvroDecoder:
    format = "avro"

    def __init__(self, schema: Schema, resolve: Resolve) -> None:
        fastavro = need("fastavro", "fastavro", "Avro values")
        self._reader = fastavro.schemaless_reader
        named: dict[str, Any] = {}
        done: set[tuple[str, int]] = set()

        def add_references(s: Schema, depth: int = 0) -> None:
            if depth > 32:
                raise SchemaError("Avro references nested more than 32 deep")
            for ref in s.references:
                if (ref.subject, ref.version) in done:
                    continue
                done.add((ref.subject, ref.version))
                child = resolve(ref)
                add_references(child, depth + 1)
                self._parse(fastavro, child, named)

        add_references(schema)
        self.parsed = self._parse(fastavro, schema, named)
        self.ambiguous = _ambiguous(self.parsed)

    @staticmethod
    def _parse(fastavro: Any, schema: Schema, named: dict[str, Any]) -> Any:
        try:
            return fastavro.parse_schema(_load(schema.text), named_schemas=named)
        except SchemaError:
            raise
        except Exception as exc:  # noqa: BLE001 - fastavro raises several types for a bad schema
            raise SchemaError(f"Avro schema does not parse: {exc}") from None

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        fo = io.BytesIO(data)
        fo.seek(start)
        try:
            if self.ambiguous:
                value = _named(self._reader(fo, self.parsed, None, return_record_name=True,
                                            return_record_name_override=True))
            else:
                value = self._reader(fo, self.parsed, None)
        except Exception as exc:  # noqa: BLE001 - fastavro's reader raises whatever the bytes lead to
            raise ValueMismatch(_OBJECT.sub("", f"{type(exc).__name__}: {exc}")) from None
        left = len(data) - fo.tell()
        if left:
            raise ValueMismatch(f"{left} byte{'s' if left != 1 else ''} left after the value")
        try:
            return to_json(value)
        except TypeError as exc:
            raise ValueMismatch(str(exc)) from None
