"""Avro values, read with the writer's schema (the one the value's id names).

fastavro parses and checks the schema and converts the logical types this package does not render
itself; the values are read by :mod:`payloads.avrofast`, whose budgets hold against hostile bytes
(see :mod:`payloads.limits`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import orjson

from payloads import avrofast
from payloads.errors import SchemaError, ValueMismatch
from payloads.libs import need
from payloads.limits import check_schema_text
from payloads.render import to_json
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]
Convert = Callable[[Any], Any]


def _load(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # A bare name ("string", or a referenced record's name) is valid Avro schema text too.
        stripped = text.strip()
        if stripped and all(c.isalnum() or c in "._" for c in stripped):
            return stripped
        raise SchemaError("Avro schema text is not JSON") from None


def _decimal(scale: int) -> Convert:
    """A decimal's two's-complement bytes as the exact decimal text (what fastavro's Decimal formats to,
    at a fifth of its cost)."""
    def render(v: Any) -> Any:
        n = int.from_bytes(v, "big", signed=True)
        digits = str(-n if n < 0 else n)
        if scale > 0:
            digits = digits.rjust(scale + 1, "0")
            digits = f"{digits[:-scale]}.{digits[-scale:]}"
        return "-" + digits if n < 0 else digits
    return render


def _logical(fastavro: ModuleType) -> Callable[[dict], Convert | None]:
    """The converter of a logical type on a schema node: decimals rendered here, the others (uuid,
    time-*, local-timestamp-*) by fastavro's own logical readers; None for one fastavro does not know
    (its raw value stands, as in fastavro)."""
    import fastavro.read
    readers = getattr(fastavro.read, "LOGICAL_READERS", {})

    def converter(node: dict) -> Convert | None:
        lt, raw = node.get("logicalType"), node.get("type")
        if lt == "decimal" and raw in ("bytes", "fixed"):
            scale = node.get("scale", 0)
            return _decimal(scale if isinstance(scale, int) and 0 <= scale <= 1000 else 0)
        fn = readers.get(f"{raw}-{lt}") if isinstance(raw, str) else None
        if fn is None:
            return None
        return lambda v: fn(v, node, None)
    return converter


class AvroDecoder:
    """One schema's values; ``impl``: the module whose ``program`` reads them (the compiled
    :mod:`payloads.avrofast` unless a test or fuzz target gives its pure twin)."""

    format = "avro"

    def __init__(self, schema: Schema, resolve: Resolve, impl: ModuleType = avrofast) -> None:
        fastavro = need("fastavro", "fastavro", "Avro values")
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
        self.named = named
        self.fast = impl.program(self.parsed, named, _logical(fastavro))

    @staticmethod
    def _parse(fastavro: Any, schema: Schema, named: dict[str, Any]) -> Any:
        check_schema_text("avro", schema.text)
        try:
            return fastavro.parse_schema(_load(schema.text), named_schemas=named)
        except SchemaError:
            raise
        except RecursionError:
            raise SchemaError("Avro schema nested too deep to parse") from None
        except Exception as exc:  # noqa: BLE001 - fastavro raises several types for a bad schema
            raise SchemaError(f"Avro schema does not parse: {exc}") from None

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        value = self.fast.read(data if type(data) is bytes else bytes(data), start)
        try:
            return to_json(value)
        except TypeError as exc:
            raise ValueMismatch(str(exc)) from None
