"""Avro values read straight from their bytes, for the schemas most topics use; fastavro reads the rest.

fastavro's reader is general: for every value it sets up a reader, walks the parsed schema as dicts and
builds a ``datetime`` for a timestamp through several calls. A topic repeats one schema millions of times,
so a schema is translated here once into a small program of tuples, and each value is read by one loop
over it (compiled with ``avrofast.pxd``: C reads of the bytes). The program yields the values the fastavro
path gives (the same dicts, lists, ``datetime``/``date``, bytes for ``bytes`` and ``fixed``, decimals as
text), rendered by the same :func:`payloads.render.to_json`; ``tests/payloads/test_avrofast.py`` holds
the two to the same JSON.

A union of several named types (records, enums, fixed) gives such a value as ``{"<full name>": value}``,
as the fastavro path does. Not translated (:func:`program` returns None, fastavro reads the schema's values): logical types
other than ``timestamp-millis``, ``timestamp-micros``, ``date`` and ``decimal`` on ``bytes``. A value the program
cannot read as fastavro would (bytes left over, a truncated value, a varint beyond 64 bits, a boolean
byte other than 0 or 1, an index out of range, text that is not UTF-8, a date out of range) makes
:meth:`Program.read` return :data:`MISS`, and fastavro reads it again: its answer or its error message stands.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from typing import Any

MISS = object()                      # "read this one with fastavro"
# Records nested deeper than this (a recursive type) are fastavro's: the compiled loop recurses in C.
MAX_DEPTH = 64
MAX_EMPTY_ITEMS = 1 << 16

# Node kinds; a node is a tuple (kind, ...).
NULL, BOOLEAN, INT, FLOAT, DOUBLE, BYTES, STRING, RECORD, ENUM, ARRAY, MAP, UNION, FIXED, \
    TS_MILLIS, TS_MICROS, DATE, CONVERT = range(17)

_PRIMITIVES = {"null": NULL, "boolean": BOOLEAN, "int": INT, "long": INT, "float": FLOAT, "double": DOUBLE,
               "bytes": BYTES, "string": STRING}
_LOGICAL = {("timestamp-millis", "long"): TS_MILLIS, ("timestamp-micros", "long"): TS_MICROS,
            ("date", "int"): DATE}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DAYS_SHIFT = dt.date(1970, 1, 1).toordinal()
_F32 = struct.Struct("<f").unpack_from
_F64 = struct.Struct("<d").unpack_from
_MS = dt.timedelta(milliseconds=1)


class _Unsupported(Exception):
    """The schema uses something the program does not translate."""


class _Miss(Exception):
    """This value is read by fastavro instead."""


class AbsurdCount(Exception):
    """An array or map block claims more items than the value can hold: a mismatch, not read by fastavro."""


class Program:
    """One schema's reader: :meth:`read` gives the value at ``data[start:]``, or :data:`MISS`."""

    def __init__(self, root: tuple) -> None:
        self.root = root
        self.data = b""
        self.pos = 0
        self.end = 0
        self.depth = 0

    def read(self, data: bytes, start: int) -> Any:
        self.data = data
        self.pos = start
        self.end = len(data)
        self.depth = 0
        try:
            value = self.value(self.root)
        except (_Miss, UnicodeDecodeError, OverflowError, ValueError, IndexError):
            return MISS
        finally:
            self.data = b""
        if self.pos != self.end:
            return MISS
        return value

    def varint(self) -> int:
        """A zig-zag varint of at most 64 bits."""
        data = self.data
        pos = self.pos
        end = self.end
        shift = 0
        n = 0
        while True:
            if pos >= end:
                raise _Miss
            b = data[pos]
            pos += 1
            if shift == 63 and b > 1:        # bits beyond the 64th
                raise _Miss
            n |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        self.pos = pos
        half = n >> 1
        if n & 1:
            return -1 - half
        return half

    def take(self, size: int) -> bytes:
        pos = self.pos
        if size < 0 or size > self.end - pos:      # not pos + size: a wild length must not overflow
            raise _Miss
        self.pos = pos + size
        return self.data[pos:pos + size]

    def value(self, node: tuple) -> Any:
        kind = node[0]
        if kind == STRING:
            return self.take(self.varint()).decode("utf-8")
        if kind == INT:
            return self.varint()
        if kind == RECORD:
            if self.depth >= MAX_DEPTH:
                raise _Miss
            self.depth += 1
            out = {}
            for name, child in node[1]:
                out[name] = self.value(child)
            self.depth -= 1
            return out
        if kind == UNION:
            branches = node[1]
            i = self.varint()
            if i < 0 or i >= len(branches):
                raise _Miss
            name = node[2][i]
            if name is None:
                return self.value(branches[i])
            return {name: self.value(branches[i])}
        if kind == NULL:
            return None
        if kind == BOOLEAN:
            pos = self.pos
            if pos >= self.end or self.data[pos] > 1:
                raise _Miss
            self.pos = pos + 1
            return self.data[pos] == 1
        if kind == DOUBLE:
            pos = self.pos
            if pos + 8 > self.end:
                raise _Miss
            self.pos = pos + 8
            return _F64(self.data, pos)[0]
        if kind == FLOAT:
            pos = self.pos
            if pos + 4 > self.end:
                raise _Miss
            self.pos = pos + 4
            return _F32(self.data, pos)[0]
        if kind == ENUM:
            symbols = node[1]
            i = self.varint()
            if i < 0 or i >= len(symbols):
                raise _Miss
            return symbols[i]
        if kind == TS_MILLIS:
            return _EPOCH + self.varint() * _MS
        if kind == TS_MICROS:
            return _EPOCH + dt.timedelta(microseconds=self.varint())
        if kind == DATE:
            return dt.date.fromordinal(self.varint() + _DAYS_SHIFT)
        if kind == BYTES:
            return self.take(self.varint())
        if kind == ARRAY:
            items = []
            child = node[1]
            empty = node[2]
            n = self.block(empty)
            while n:
                for _ in range(n):
                    items.append(self.value(child))
                n = self.block(empty)
            return items
        if kind == MAP:
            entries = {}
            child = node[1]
            n = self.block(False)
            while n:
                for _ in range(n):
                    key = self.take(self.varint()).decode("utf-8")
                    entries[key] = self.value(child)
                n = self.block(False)
            return entries
        if kind == FIXED:
            return self.take(node[1])
        if kind == CONVERT:
            return node[2](self.value(node[1]))
        raise _Miss

    def block(self, empty: bool) -> int:
        """The item count of an array or map block (a negative count is followed by the block's size);
        ``empty``: its items may take no bytes."""
        n = self.varint()
        if n < 0:
            self.varint()
            n = -n
        if n < 0:
            raise _Miss
        # Items of nothing (null, an empty record) take no bytes, so no byte count bounds theirs: a wild
        # one would have fastavro append for ever. Past the bytes left, and by more than any real value of
        # such items holds, it is a mismatch, not a loop. (Other items run out of bytes first.)
        if empty and n > self.end - self.pos + MAX_EMPTY_ITEMS:
            raise AbsurdCount(f"a block of {n} items with {self.end - self.pos} bytes left")
        return n


def program(parsed: Any, named: dict[str, Any], decimal: Callable[[int], Callable[[Any], Any]]) -> Program | None:
    """The program for a schema parsed by fastavro (``named``: every named type by full name), or None
    when it uses something only fastavro reads. ``decimal(scale)`` renders a ``decimal`` on ``bytes``."""
    nodes: dict[str, tuple] = {}
    try:
        return Program(_node(parsed, named, nodes, decimal))
    except (_Unsupported, RecursionError):
        return None


def _node(schema: Any, named: dict[str, Any], nodes: dict[str, tuple], decimal: Any) -> tuple:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return (_PRIMITIVES[schema],)
        if schema in nodes:
            return nodes[schema]
        if schema in named:
            return _node(named[schema], named, nodes, decimal)
        raise _Unsupported(schema)
    if isinstance(schema, list):
        # Where several named types share a union, such a value says which it is: {"<full name>": value}.
        several = sum(1 for b in schema if _is_named(b, named)) > 1
        names = tuple((b if isinstance(b, str) else b["name"]) if several and _is_named(b, named) else None
                      for b in schema)
        return (UNION, tuple(_node(b, named, nodes, decimal) for b in schema), names)
    if not isinstance(schema, dict):
        raise _Unsupported(repr(schema))
    kind = schema.get("type")
    logical = schema.get("logicalType", schema.get("kd.logical"))
    if logical is not None:
        if (logical, kind) in _LOGICAL:
            return (_LOGICAL[(logical, kind)],)
        if logical == "decimal" and kind == "bytes" and "kd.logical" in schema:
            return (CONVERT, (BYTES,), decimal(int(schema.get("scale", 0) or 0)))
        raise _Unsupported(f"logical type {logical}")
    if kind in ("record", "error"):
        fields: list[tuple[str, tuple]] = []
        node = (RECORD, fields)
        nodes[schema["name"]] = node       # before the fields: a recursive type finds itself
        for f in schema.get("fields", ()):
            fields.append((f["name"], _node(f["type"], named, nodes, decimal)))
        return node
    if kind == "enum":
        node = (ENUM, tuple(schema["symbols"]))
        nodes[schema["name"]] = node
        return node
    if kind == "fixed":
        node = (FIXED, int(schema["size"]))
        nodes[schema["name"]] = node
        return node
    if kind == "array":
        items = _node(schema["items"], named, nodes, decimal)
        return (ARRAY, items, _takes_no_bytes(items, set()))
    if kind == "map":
        return (MAP, _node(schema["values"], named, nodes, decimal))
    if kind in _PRIMITIVES:
        return (_PRIMITIVES[kind],)
    if isinstance(kind, (dict, list)) or kind in named:
        return _node(kind, named, nodes, decimal)
    raise _Unsupported(repr(kind))


def _is_named(branch: Any, named: dict[str, Any]) -> bool:
    node = named.get(branch) if isinstance(branch, str) else branch
    return isinstance(node, dict) and node.get("type") in ("record", "error", "enum", "fixed")


def _takes_no_bytes(node: tuple, seen: set[int]) -> bool:
    """Whether a value of ``node`` can be written in no bytes (null, fixed of size 0, a record of such)."""
    kind = node[0]
    if kind == NULL:
        return True
    if kind == FIXED:
        return node[1] == 0
    if kind == RECORD:
        if id(node) in seen:            # a record that holds itself is never empty
            return False
        seen.add(id(node))
        return all(_takes_no_bytes(child, seen) for _, child in node[1])
    return False
