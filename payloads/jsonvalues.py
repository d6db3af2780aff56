"""JSON Schema values: JSON text after the framing. Checked against the schema only when asked
(``--validate-json``), with ``jsonschema``; the JSON itself needs no library."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from payloads.errors import SchemaError, ValueMismatch
from payloads.libs import need
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]


class JsonDecoder:
    format = "json"

    def __init__(self, schema: Schema, resolve: Resolve, validate: bool = False) -> None:
        self._validator = _validator(schema, resolve) if validate else None

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        try:
            value = orjson.loads(data[start:] if start else data)
        except orjson.JSONDecodeError as exc:
            raise ValueMismatch(f"not JSON: {exc}") from None
        if self._validator is not None:
            from jsonschema.exceptions import best_match
            error = best_match(self._validator.iter_errors(value))
            if error is not None:
                where = "/".join(map(str, error.absolute_path)) or "(the value)"
                raise ValueMismatch(f"{where}: {error.message}")
        return orjson.dumps(value)


def _validator(schema: Schema, resolve: Resolve) -> Any:
    need("jsonschema", "jsonschema", "--validate-json")
    from jsonschema.validators import validator_for
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    def load(s: Schema) -> Any:
        try:
            return orjson.loads(s.text)
        except orjson.JSONDecodeError as exc:
            raise SchemaError(f"JSON Schema text is not JSON: {exc}") from None

    resources: list[tuple[str, Any]] = []
    seen: set[tuple[str, int]] = set()

    def add(s: Schema, depth: int = 0) -> None:
        if depth > 32:
            raise SchemaError("JSON Schema references nested more than 32 deep")
        for ref in s.references:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            child = resolve(ref)
            resources.append((ref.name, Resource.from_contents(load(child), default_specification=DRAFT7)))
            add(child, depth + 1)

    add(schema)
    root = load(schema)
    cls = validator_for(root, default=validator_for({"$schema": "http://json-schema.org/draft-07/schema#"}))
    try:
        cls.check_schema(root)
    except Exception as exc:  # noqa: BLE001 - jsonschema.SchemaError
        raise SchemaError(f"not a valid JSON Schema: {getattr(exc, 'message', exc)}") from None
    return cls(root, registry=Registry().with_resources(resources))
