"""JSON Schema values: JSON text after the framing. Checked against the schema only when asked
(``--validate-json``), with ``jsonschema``; the JSON itself needs no library.

A value is read by orjson (1024 levels at most: past them it is "not JSON: depth limit exceeded"),
written back compact and held to
:data:`payloads.limits.MAX_DEPTH` (:func:`payloads.limits.json_dumps`) before any validation, so the
validator, which recurses in Python, never sees a deeper one; whatever it raises on a value is a
:class:`~payloads.errors.ValueMismatch`. ``uniqueItems`` is checked in linear time (jsonschema
compares the items of an array it cannot sort pairwise: an array of objects would take hours).

Schemas are anyone's to write too (``_schemas``), and two of their keywords can make one value cost
for ever: a ``pattern`` that backtracks exponentially (``^(a|aa)+$``; Python's ``re`` cannot be
interrupted), and ``$ref``s that fan out (each level ``allOf`` two references to the next: 2^40
checks of one value). So patterns are matched by the ``regex`` package with a timeout
(:data:`PATTERN_SECONDS`), and a value's validation may take at most :data:`STEPS_PER_BYTE` keyword
checks a byte of it plus :data:`MIN_STEPS`; past either it is a mismatch saying so.
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
PATTERN_SECONDS = 0.1     # one regular expression on one string
STEPS_PER_BYTE = 64       # keyword checks one value's validation may take, a byte of it ...
MIN_STEPS = 1 << 16       # ... plus these


class JsonDecoder:
    format = "json"

    def __init__(self, schema: Schema, resolve: Resolve, validate: bool = False) -> None:
        # Without validation the schema is not read: its values decode whatever it holds.
        self._steps = [0]          # keyword checks the value being validated may still take
        self._validator = _validator(schema, resolve, self._steps) if validate else None

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
            self._steps[0] = STEPS_PER_BYTE * len(text) + MIN_STEPS
            _validate(self._validator, value)
        return out


def _validate(validator: Any, value: Any) -> None:
    try:
        from jsonschema.exceptions import best_match
        error = best_match(itertools.islice(validator.iter_errors(value), MAX_ERRORS))
    except RecursionError:
        raise ValueMismatch("nested too deep for the validator (Python's recursion limit)") from None
    except _PastBudget as exc:
        raise ValueMismatch(str(exc)) from None
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


class _PastBudget(Exception):
    """A value's validation past its budget (steps, or a pattern's time)."""


def _search(pattern: str, text: str) -> bool:
    """``re.search`` semantics with a timeout (the ``regex`` package: Python's ``re`` cannot be stopped)."""
    import regex
    try:
        return regex.search(pattern, text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        raise _PastBudget(f"pattern {_short(repr(pattern))} took more than {PATTERN_SECONDS} s on a string of "
                          f"{len(text)} characters") from None


# jsonschema's keywords that match patterns, with _search in place of re.search (same messages).
def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        from jsonschema.exceptions import ValidationError
        yield ValidationError(f"{_short(repr(instance))} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "object"):
        for pattern, subschema in patterns.items():
            for k, v in instance.items():
                if _search(pattern, k):
                    yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in known and not (patterns and _search(patterns, k))]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        from jsonschema.exceptions import ValidationError
        named = ", ".join(repr(e) for e in sorted(extras)[:10])
        yield ValidationError(f"Additional properties are not allowed ({_short(named)} unexpected)")


def _counted(fn: Any, steps: list[int]) -> Any:
    """A keyword that takes one step of the value's budget each time it is checked."""
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        steps[0] -= 1
        if steps[0] < 0:
            raise _PastBudget("validation past its budget of keyword checks (schema references that fan out?)")
        return fn(validator, value, instance, schema)
    return keyword


def _validator(schema: Schema, resolve: Resolve, steps: list[int]) -> Any:
    need("jsonschema", "jsonschema", "--validate-json")
    need("regex", "regex", "--validate-json")
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
        own = {"uniqueItems": _unique_items, "pattern": _pattern, "patternProperties": _pattern_properties,
               "additionalProperties": _additional_properties}
        keywords = {**cls.VALIDATORS, **{k: fn for k, fn in own.items() if k in cls.VALIDATORS}}
        cls = extend(cls, {k: _counted(fn, steps) for k, fn in keywords.items()})
        return cls(root, registry=Registry().with_resources(resources))
    except RecursionError:
        raise SchemaError("not a valid JSON Schema: nested too deep to check") from None
    except Exception as exc:  # noqa: BLE001 - jsonschema.SchemaError, and whatever an odd schema raises
        raise SchemaError(f"not a valid JSON Schema: {_short(str(getattr(exc, 'message', exc)))}") from None
