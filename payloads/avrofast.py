"""Avro values read straight from their bytes: the one reader of every Avro value.

A topic repeats one schema millions of times, so a schema (as fastavro parses it) is translated once
into a small program of tuples, and each value is read by one loop over it. The values are those
fastavro's reader gives (the same dicts, lists, ``datetime``/``date``, bytes for ``bytes`` and ``fixed``), rendered by
:func:`payloads.render.to_json`; ``tests/payloads/test_avrofast.py`` holds the two to the same JSON.
A union of several named types (records, enums, fixed) gives such a value as ``{"<full name>": value}``.
Logical types other than ``timestamp-millis``, ``timestamp-micros`` and ``date`` are converted by the
function the caller gives for them (``decimal`` is rendered as text, the rest by fastavro's own
logical readers); a logical type nobody knows leaves the raw value, as fastavro does.

Values come from whoever can produce to a topic, so the program, not fastavro, reads them all:
fastavro's reader recurses on the C stack as deep as the bytes lead it (a recursive schema took the
process down) and reads past what the bytes hold in several places. Here every length and count is
checked against the bytes left before anything is allocated, nesting stops at
:data:`payloads.limits.MAX_DEPTH`, and a value that does not read is a
:class:`~payloads.errors.ValueMismatch` saying what was wrong and at which byte (of the whole key or
value, framing included).

Compiled (``avrofast.pxd``), :class:`Program` is an extension type: its loop reads the bytes as C
loads, and the limits it checks per value are attributes, C integers rather than a global's look-up.
A count of -2**63 is refused before it is negated, which in C would leave it negative.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from typing import Any

from payloads.errors import SchemaError, ValueMismatch
from payloads.limits import MAX_DEPTH, MAX_EMPTY_ITEMS

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

# What the caller gives for a logical type: the schema node carrying it -> a function of the raw value, or None.
Logical = Callable[[dict], "Callable[[Any], Any] | None"]


class _Unsupported(Exception):
    """The schema uses something the program does not translate."""


class Program:
    """One schema's reader: :meth:`read` gives the value at ``data[start:]``."""

    def __init__(self, root: tuple) -> None:
        self.root = root
        self.data = b""
        self.pos = 0
        self.end = 0
        self.depth = 0
        self.empties = 0
        self.max_depth = MAX_DEPTH
        self.empty_floor = MAX_EMPTY_ITEMS

    def read(self, data: bytes, start: int) -> Any:
        """The value that fills ``data[start:]``; ValueMismatch when the bytes are not one."""
        self.data = data
        self.pos = start
        self.end = len(data)
        self.depth = 0
        # Items of nothing (nulls) take no bytes: however many blocks claim them, a value holds at most
        # this many beyond its own size, so its list stays in proportion to its bytes.
        self.empties = self.empty_floor + self.end - start
        try:
            value = self.value(self.root)
        except UnicodeDecodeError:                     # caught here, not per string: the loop stays lean
            raise ValueMismatch(f"text that is not UTF-8, ending at byte {self.pos}") from None
        except (OverflowError, ValueError) as exc:     # a date or timestamp past datetime's range
            raise ValueMismatch(f"a value out of range before byte {self.pos}: {exc}") from None
        finally:
            self.data = b""
        if self.pos != self.end:
            left = self.end - self.pos
            raise ValueMismatch(f"{left} byte{'s' if left != 1 else ''} left after the value")
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
                raise ValueMismatch(f"the value ends at byte {pos}, inside a number" if shift else
                                    f"the value ends at byte {pos}, where a number was due")
            b = data[pos]
            pos += 1
            if shift == 63 and b > 1:        # bits beyond the 64th
                raise ValueMismatch(f"a number longer than 64 bits at byte {self.pos}")
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
        if size < 0:
            raise ValueMismatch(f"a negative length ({size}) before byte {pos}")
        if size > self.end - pos:      # not pos + size: a wild length must not overflow
            raise ValueMismatch(f"a length of {size} at byte {pos} with {self.end - pos} bytes left")
        self.pos = pos + size
        return self.data[pos:pos + size]

    def too_deep(self) -> ValueMismatch:
        return ValueMismatch(f"nested more than {self.max_depth} levels deep at byte {self.pos}")

    def value(self, node: tuple) -> Any:
        kind = node[0]
        if kind == STRING:
            return self.take(self.varint()).decode("utf-8")
        if kind == INT:
            return self.varint()
        if kind == RECORD:
            if self.depth >= self.max_depth:
                raise self.too_deep()
            self.depth += 1
            out = {}
            for name, child in node[1]:
                out[name] = self.value(child)
            self.depth -= 1
            return out
        if kind == UNION:
            branches = node[1]
            at = self.pos
            i = self.varint()
            if i < 0 or i >= len(branches):
                raise ValueMismatch(f"union branch {i} at byte {at} of a union of {len(branches)}")
            name = node[2][i]
            if name is None:
                return self.value(branches[i])
            if self.depth >= self.max_depth:
                raise self.too_deep()
            self.depth += 1
            out = {name: self.value(branches[i])}
            self.depth -= 1
            return out
        if kind == NULL:
            return None
        if kind == BOOLEAN:
            pos = self.pos
            if pos >= self.end:
                raise ValueMismatch(f"the value ends at byte {pos}, where a boolean was due")
            if self.data[pos] > 1:
                raise ValueMismatch(f"a boolean of {self.data[pos]} at byte {pos} (0 or 1)")
            self.pos = pos + 1
            return self.data[pos] == 1
        if kind == DOUBLE:
            pos = self.pos
            if pos + 8 > self.end:
                raise ValueMismatch(f"the value ends at byte {self.end}, inside a double")
            self.pos = pos + 8
            return _F64(self.data, pos)[0]
        if kind == FLOAT:
            pos = self.pos
            if pos + 4 > self.end:
                raise ValueMismatch(f"the value ends at byte {self.end}, inside a float")
            self.pos = pos + 4
            return _F32(self.data, pos)[0]
        if kind == ENUM:
            symbols = node[1]
            at = self.pos
            i = self.varint()
            if i < 0 or i >= len(symbols):
                raise ValueMismatch(f"enum symbol {i} at byte {at} of an enum of {len(symbols)}")
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
            if self.depth >= self.max_depth:
                raise self.too_deep()
            self.depth += 1
            items = []
            child = node[1]
            empty = node[2]
            n = self.block(empty)
            while n:
                if empty:                    # items of no bytes are all alike: one read, not n
                    item = self.value(child)
                    items.extend([item] * n)
                else:
                    for _ in range(n):
                        items.append(self.value(child))
                n = self.block(empty)
            self.depth -= 1
            return items
        if kind == MAP:
            if self.depth >= self.max_depth:
                raise self.too_deep()
            self.depth += 1
            entries = {}
            child = node[1]
            n = self.block(False)
            while n:
                for _ in range(n):
                    key = self.take(self.varint()).decode("utf-8")
                    entries[key] = self.value(child)
                n = self.block(False)
            self.depth -= 1
            return entries
        if kind == FIXED:
            return self.take(node[1])
        if kind == CONVERT:
            raw = self.value(node[1])
            try:
                return node[2](raw)
            except Exception as exc:  # noqa: BLE001 - a logical reader raises whatever the raw value leads to
                raise ValueMismatch(f"a {node[3]} that does not convert before byte {self.pos}: {exc}") from None
        raise ValueMismatch(f"schema node {kind} has no reader")     # not reached: program() builds known nodes

    def block(self, empty: bool) -> int:
        """The item count of an array or map block (a negative count is followed by the block's size);
        ``empty``: its items may take no bytes."""
        at = self.pos
        n = self.varint()
        if n < 0:
            if n < -9223372036854775807:        # -2**63: its negation is past 64 bits
                raise ValueMismatch(f"a block of {n} items at byte {at}")
            self.varint()
            n = -n
        if empty:
            # Other items run out of bytes first; these are bounded per value (see read()).
            self.empties -= n
            if self.empties < 0:
                raise ValueMismatch(f"a block of {n} items with {self.end - self.pos} bytes left")
        return n


def program(parsed: Any, named: dict[str, Any], logical: Logical) -> Program:
    """The program for a schema parsed by fastavro (``named``: every named type by full name);
    ``logical`` gives the converter of a logical type the program does not read itself.
    SchemaError for a schema it cannot translate."""
    nodes: dict[str, tuple] = {}
    try:
        root = _node(parsed, named, nodes, logical)
    except _Unsupported as exc:
        raise SchemaError(f"Avro schema not readable: {exc}") from None
    except RecursionError:
        raise SchemaError("Avro schema nested too deep to read") from None
    _check_ends(root)
    return Program(root)


def _node(schema: Any, named: dict[str, Any], nodes: dict[str, tuple], logical: Logical) -> tuple:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return (_PRIMITIVES[schema],)
        if schema in nodes:
            return nodes[schema]
        if schema in named:
            return _node(named[schema], named, nodes, logical)
        raise _Unsupported(f"unknown type {schema}")
    if isinstance(schema, list):
        # Where several named types share a union, such a value says which it is: {"<full name>": value}.
        several = sum(1 for b in schema if _is_named(b, named)) > 1
        names = tuple((b if isinstance(b, str) else b["name"]) if several and _is_named(b, named) else None
                      for b in schema)
        return (UNION, tuple(_node(b, named, nodes, logical) for b in schema), names)
    if not isinstance(schema, dict):
        raise _Unsupported(repr(schema)[:80])
    kind = schema.get("type")
    lt = schema.get("logicalType")
    if lt is not None:
        if (lt, kind) in _LOGICAL:
            return (_LOGICAL[(lt, kind)],)
        convert = logical(schema)
        if convert is not None:
            return (CONVERT, _node({k: v for k, v in schema.items() if k != "logicalType"}, named, nodes, logical),
                    convert, lt)
    if kind in ("record", "error"):
        fields: list[tuple[str, tuple]] = []
        node = (RECORD, fields)
        nodes[schema["name"]] = node       # before the fields: a recursive type finds itself
        for f in schema.get("fields", ()):
            fields.append((f["name"], _node(f["type"], named, nodes, logical)))
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
        items = _node(schema["items"], named, nodes, logical)
        return (ARRAY, items, _takes_no_bytes(items, set()))
    if kind == "map":
        return (MAP, _node(schema["values"], named, nodes, logical))
    if kind in _PRIMITIVES:
        return (_PRIMITIVES[kind],)
    if isinstance(kind, (dict, list)) or kind in named:
        return _node(kind, named, nodes, logical)
    raise _Unsupported(f"unknown type {kind!r}"[:80])


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
    if kind == CONVERT:
        return _takes_no_bytes(node[1], seen)
    if kind == RECORD:
        if id(node) in seen:            # a record that holds itself is never empty
            return False
        seen.add(id(node))
        return all(_takes_no_bytes(child, seen) for _, child in node[1])
    return False


def _check_ends(root: tuple) -> None:
    """SchemaError for a record that holds itself on every path (through no union, array or map): no
    value of it is finite, and a reader would go down to its depth limit on every value."""
    records: list[tuple] = []
    seen: set[int] = set()
    todo = [root]
    while todo:                          # every node reachable, iteratively
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kind = node[0]
        if kind == RECORD:
            records.append(node)
            todo.extend(child for _, child in node[1])
        elif kind == UNION:
            todo.extend(node[1])
        elif kind in (ARRAY, MAP, CONVERT):
            todo.append(node[1])
    # A cycle among records through fields that every value has (iterative depth-first search, colours).
    colour: dict[int, int] = {}          # id(record) -> 1 on the path, 2 done
    for start in records:
        if id(start) in colour:
            continue
        colour[id(start)] = 1
        path = [(start, iter(_must(start)))]
        while path:
            record, children = path[-1]
            child = next(children, None)
            if child is None:
                colour[id(record)] = 2
                path.pop()
                continue
            c = colour.get(id(child))
            if c == 1:
                raise SchemaError("Avro schema with a record that contains itself on every path: no value of it "
                                  "ends")
            if c is None:
                colour[id(child)] = 1
                path.append((child, iter(_must(child))))


def _must(record: tuple) -> list[tuple]:
    """The records every value of ``record`` contains directly (its fields', through logical types)."""
    out = []
    for _, child in record[1]:
        while child[0] == CONVERT:
            child = child[1]
        if child[0] == RECORD:
            out.append(child)
    return out
