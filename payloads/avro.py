"""Avro values, read by fastavro with the writer's schema (the one the value's id names)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import orjson

from payloads import avrofast
from payloads.errors import SchemaError, ValueMismatch
from payloads.libs import need
from payloads.render import to_json
from payloads.schema import Reference, Schema

Resolve = Callable[[Reference], Schema]
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


Fix = Callable[[Any], Any]
_PENDING: Any = object()
_MARK = "kd.logical"             # a logical type this module renders itself (fastavro keeps unknown keys)
# logical type -> the raw Avro types it may annotate, for those rendered here rather than by fastavro:
# a decimal read as bytes and written as text costs a fifth of a Decimal built and then formatted.
# Timestamps, dates and times stay fastavro's (its datetime, formatted by orjson, is quicker than any
# Python formatting of the raw number).
_RENDERED = {"decimal": ("bytes", "fixed")}


def _raw_type(node: Any, named: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return node.get("type")
    if isinstance(node, str) and isinstance(named.get(node), dict):
        return named[node].get("type")
    return node


def _mark(node: Any, conflict: frozenset = frozenset(), named: dict[str, Any] | None = None) -> Any:
    """The raw schema with the logical types this module renders renamed to ``kd.logical``, so fastavro
    reads their raw bytes and skips building a Decimal that would only be rendered again. Not inside a union where another branch has the same raw type (the raw value would
    not say which branch it came from): there fastavro's logical reader stays."""
    named = {} if named is None else named
    if isinstance(node, list):
        raws = [_raw_type(b, named) for b in node]
        dup = frozenset(r for r in raws if isinstance(r, str) and raws.count(r) > 1)
        return [_mark(b, dup, named) for b in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in ("type", "items", "values"):
            out[k] = _mark(v, frozenset(), named)
        elif k == "fields" and isinstance(v, list):
            out[k] = [{**f, "type": _mark(f.get("type"), frozenset(), named)} if isinstance(f, dict) else f
                      for f in v]
        else:
            out[k] = v
    logical = out.get("logicalType")
    raw = out.get("type")
    if isinstance(logical, str) and isinstance(raw, str) and raw in _RENDERED.get(logical, ()) \
            and raw not in conflict:
        out[_MARK] = out.pop("logicalType")
    if isinstance(out.get("name"), str) and out.get("type") in ("record", "error", "enum", "fixed"):
        named[out["name"]] = out
    return out


def _decimal(scale: int) -> Fix:
    def render(v: Any) -> Any:
        if type(v) is not bytes:
            return v
        n = int.from_bytes(v, "big", signed=True)
        digits = str(-n if n < 0 else n)
        if scale > 0:
            digits = digits.rjust(scale + 1, "0")
            digits = f"{digits[:-scale]}.{digits[-scale:]}"
        return "-" + digits if n < 0 else digits
    return render


def _converter(node: dict) -> Fix | None:
    logical = node.get(_MARK)
    if logical == "decimal":
        return _decimal(int(node.get("scale", 0) or 0))
    return None
_PRIMITIVE = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_NAMED = frozenset(("record", "error", "enum", "fixed"))


def _is_named(branch: Any, named: dict[str, Any]) -> bool:
    node = named.get(branch) if isinstance(branch, str) else branch
    return isinstance(node, dict) and node.get("type") in _NAMED


def _named_branches(union: list, named: dict[str, Any]) -> list[tuple[str, Any]]:
    """(full name, the branch as written: a definition, or a name the memo resolves) of each named branch."""
    return [(b if isinstance(b, str) else b.get("name"), b) for b in union if _is_named(b, named)]


def _fixer(node: Any, named: dict[str, Any], memo: dict[str, Fix | None]) -> Fix | None:
    """A function that turns fastavro's ``(name, value)`` branches of unions with several named types
    (records, enums, fixed) into ``{name: value}``, visiting only the parts of a value where such a union can be; None if there is none.

    Built once per schema, so a value without such unions costs nothing and one with them costs a
    few dictionary look-ups, not a walk of the whole value. Named types are looked up lazily
    (``memo``), so a recursive type is followed as deep as the value goes.
    """
    if isinstance(node, str):
        if node in _PRIMITIVE or node not in named:
            return None
        if node in memo:
            found = memo[node]
            if found is _PENDING:                  # a recursive reference: resolved once built
                return lambda v, name=node: f(v) if callable(f := memo[name]) and f is not _PENDING else v
            return found
        memo[node] = _PENDING
        memo[node] = _fixer(named[node], named, memo)
        return memo[node]
    if isinstance(node, list):
        branches = _named_branches(node, named)
        fixers = {name: _fixer(b, named, memo) for name, b in branches}
        others = [f for f in (_fixer(b, named, memo) for b in node if not _is_named(b, named)) if f is not None]
        if len(branches) > 1:
            def union(v: Any) -> Any:
                if type(v) is tuple:
                    f = fixers.get(v[0])
                    return {v[0]: f(v[1]) if f is not None else v[1]}
                for f in others:
                    v = f(v)
                return v
            return union
        single = [f for f in fixers.values() if f is not None] + others
        if not single:
            return None
        return lambda v: _each(single, v)
    if isinstance(node, dict):
        if _MARK in node:
            return _converter(node)
        kind = node.get("type")
        if kind in ("record", "error"):
            fields = [(f["name"], fx) for f in node.get("fields", ())
                      if (fx := _fixer(f["type"], named, memo)) is not None]
            if not fields:
                return None

            def record(v: Any) -> Any:
                if type(v) is dict:
                    for key, fx in fields:
                        if key in v:
                            v[key] = fx(v[key])
                return v
            return record
        if kind == "array":
            items = _fixer(node.get("items"), named, memo)
            return None if items is None else (lambda v: [items(x) for x in v] if type(v) is list else v)
        if kind == "map":
            values = _fixer(node.get("values"), named, memo)
            return None if values is None else (
                lambda v: {k: values(x) for k, x in v.items()} if type(v) is dict else v)
        if isinstance(kind, (dict, list, str)) and kind not in _PRIMITIVE:
            return _fixer(kind, named, memo)
    return None


def _each(fixers: list[Fix], v: Any) -> Any:
    for f in fixers:
        v = f(v)
    return v


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
        self.fix = _fixer(self.parsed, named, {})
        self.fast = avrofast.program(self.parsed, named, _decimal)     # None: fastavro reads every value

    @staticmethod
    def _parse(fastavro: Any, schema: Schema, named: dict[str, Any]) -> Any:
        try:
            return fastavro.parse_schema(_mark(_load(schema.text)), named_schemas=named)
        except SchemaError:
            raise
        except Exception as exc:  # noqa: BLE001 - fastavro raises several types for a bad schema
            raise SchemaError(f"Avro schema does not parse: {exc}") from None

    def decode(self, data: bytes, start: int, indexes: list[int] | None) -> bytes:
        if self.fast is not None and type(data) is bytes:
            try:
                value = self.fast.read(data, start)
            except avrofast.AbsurdCount as exc:
                raise ValueMismatch(str(exc)) from None
            if value is not avrofast.MISS:
                return to_json(value)
        fo = io.BytesIO(data)
        fo.seek(start)
        try:
            if self.fix is not None:
                value = self.fix(self._reader(fo, self.parsed, None, return_named_type=True,
                                              return_named_type_override=True))
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
