"""JSON Schema values: JSON text after the framing. Checked against the schema only when asked
(``--validate-json``), with ``jsonschema``; the JSON itself needs no library.

A value is read by orjson (1024 levels at most: past them it is "not JSON: depth limit exceeded"),
written back compact and held to
:data:`payloads.limits.MAX_DEPTH` (:func:`payloads.limits.json_dumps`) before any validation, so the
validator, which recurses in Python, never sees a deeper one; whatever it raises on a value is a
:class:`~payloads.errors.ValueMismatch`. ``uniqueItems`` is checked in linear time (jsonschema
compares the items of an array it cannot sort pairwise: an array of objects would take hours).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson

from payloads.errors import SchemaError, ValueMismatch
from payloads.libs import need
from payloads.limits import MAX_SCHEMA_SET_BYTES, check_schema_text, json_dumps
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]
MAX_ERRORS = 100          # validation errors looked at to choose the one a mismatch names
MAX_MESSAGE = 300         # characters of a validation error's message kept (it quotes the value)
MAX_PATH = 100            # ... and of the path to where it is


class JsonDecoder:
    format = "json"

    def __init__(self, schema: Schema, resolve: Resolve, validate: bool = False) -> None:
        # Without validation the schema is not read: its values decode whatever it holds.
        self._validator = _validator(schema, resolve) if validate else None

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        text = data[start:] if start else data
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as exc:      # past 1024 levels too: "depth limit exceeded"
            raise ValueMismatch(f"not JSON: {exc}") from None
        try:
            out = json_dumps(value, text)
        except TypeError as exc:                  # orjson.loads gives nothing orjson cannot write: defensive
            raise ValueMismatch(f"not renderable as JSON: {exc}") from None
        if self._validator is not None:
            _validate(self._validator, value)
        return out


def _validate(validator: Any, value: Any) -> None:
    try:
        from jsonschema.exceptions import best_match
        error = best_match(itertools.islice(validator.iter_errors(value), MAX_ERRORS))
    except RecursionError:
        raise ValueMismatch("nested too deep for the validator (Python's recursion limit)") from None
    except Exception as exc:  # noqa: BLE001 - an unresolvable $ref, a bad pattern, memory: this value's problem
        text = " ".join(str(exc).split())
        raise ValueMismatch(f"not validated: {type(exc).__name__}: {_short(text)}") from None
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(the value)"
        if len(where) > MAX_PATH:
            where = f"{where[:MAX_PATH // 2 - 2]}/.../{where[-(MAX_PATH // 2 - 3):]}"
        raise ValueMismatch(f"{where}: {_short(error.message)}")


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def _key(value: Any) -> Any:
    """``value`` as a hashable key equal for the values JSON Schema calls equal (1 == 1.0, true != 1,
    objects whatever their key order). Recursive: the value is at most MAX_DEPTH deep."""
    if value is True or value is False:
        return ("b", value)
    if isinstance(value, list):
        return ("l", tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("d", frozenset((k, _key(v)) for k, v in value.items()))
    if isinstance(value, (int, float)):
        return ("n", value)
    return ("s", value) if isinstance(value, str) else ("z", value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for i, item in enumerate(instance):
            k = _key(item)
            if k in seen:
                from jsonschema.exceptions import ValidationError
                yield ValidationError(f"item {i} is not unique")
                return
            seen.add(k)


def _validator(schema: Schema, resolve: Resolve) -> Any:
    need("jsonschema", "jsonschema", "--validate-json")
    from jsonschema.validators import extend, validator_for
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    total = [0]

    def load(s: Schema) -> Any:
        check_schema_text("json", s.text)
        total[0] += len(s.text)
        if total[0] > MAX_SCHEMA_SET_BYTES:
            raise SchemaError(f"JSON Schema with its references past {MAX_SCHEMA_SET_BYTES} characters")
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
            try:
                resource = Resource.from_contents(load(child), default_specification=DRAFT7)
            except SchemaError:
                raise
            except Exception as exc:  # noqa: BLE001 - referencing rejects what is not a schema
                raise SchemaError(f"reference {ref.name}: {exc}") from None
            resources.append((ref.name, resource))
            add(child, depth + 1)

    root = load(schema)
    add(schema)
    try:
        cls = validator_for(root, default=validator_for({"$schema": "http://json-schema.org/draft-07/schema#"}))
        cls.check_schema(root)
        cls = extend(cls, {"uniqueItems": _unique_items})
        return cls(root, registry=Registry().with_resources(resources))
    except RecursionError:
        raise SchemaError("not a valid JSON Schema: nested too deep to check") from None
    except Exception as exc:  # noqa: BLE001 - jsonschema.SchemaError, and whatever an odd schema raises
        raise SchemaError(f"not a valid JSON Schema: {_short(str(getattr(exc, 'message', exc)))}") from None
