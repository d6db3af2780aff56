"""What a decoded body may cost in memory, and what each part of it costs, from the schema alone.

A message's decoded form is Python objects: a dict per struct, a list slot and often an int or
a str per array element. Two bytes on the wire (an empty entry of a flexible array) become a
dict of ~200 bytes, so a 16 MB frame of such entries would take gigabytes. Every body is
therefore decoded within a budget proportional to its size on the wire (``RATIO`` times, at
least ``FLOOR``): before an array is filled, its elements' estimated cost is taken from the
budget, and past it the decode stops with :class:`~dissector.errors.DecodeLimit`, keeping what
was decoded (the message keeps its header and sizes; an anomaly says the body was cut).

Costs are estimated per element from the schema (:func:`element_cost`), in bytes of this
interpreter's objects, so the check is one multiplication per array, not per element. A frame
so small that even its densest arrays cannot exceed the floor (:func:`safe_size`) is decoded
without checks at all: normal traffic never pays for the budget.
"""

from __future__ import annotations

import sys
from functools import lru_cache

from dissector.events import Anomaly, DecodeFailure, Direction
from dissector.schema import Field, MessageSchema

FLOOR = 128 << 20         # bytes of decoded objects any body may have, however small its frame
RATIO = 12                # ... or this many times its frame's size, when that is more
# No message's arrays cost more than this decoded per wire byte (an empty entry of a flexible
# array: a dict for two bytes; a test holds every message of the schema to it), so a frame of at
# most FLOOR / MAX_DENSITY bytes cannot overdraw the floor, whatever its message.
MAX_DENSITY = 160

SLOT = 10                 # a list's pointer to an element, with the list's over-allocation
INT = 32                  # an int object (small ones are shared, but an estimate must not fall short)
FLOAT = 24
STR = 56                  # a str object's own size, its characters aside (they come from wire bytes)
BYTES = 40
UUID = 72                 # a uuid as its 22-character text
LIST = 64                 # an empty list object
_OBJECT = 16              # pymalloc rounds every small object up to this


def _round(n: int) -> int:
    return (n + _OBJECT - 1) // _OBJECT * _OBJECT


@lru_cache(maxsize=None)
def dict_cost(keys: int) -> int:
    """A dict filled key by key, as the decoders fill them, with ``keys`` keys."""
    d: dict[str, int] = {}
    for i in range(keys):
        d[f"k{i}"] = i
    return _round(sys.getsizeof(d))


@lru_cache(maxsize=1)
def records_cost() -> int:
    """A records field decoded: its summary object (and what it holds besides the bytes)."""
    from dissector.records import summarize
    s = summarize(b"")
    n = sys.getsizeof(s)
    attrs = getattr(s, "__dict__", None)       # the pure build's dataclass keeps its fields in a dict
    if attrs is not None:
        n += sys.getsizeof(attrs)
    return _round(n) + LIST + BYTES        # its CRC-failure list, and the copy of the field's bytes (header)


_SCALAR = {"int8": INT, "int16": INT, "int32": INT, "int64": INT, "uint16": INT, "uint32": INT, "float64": FLOAT,
           "bool": 0, "string": STR, "bytes": BYTES, "uuid": UUID}
_FIXED_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4, "float64": 8, "bool": 1,
               "uuid": 16}


def value_cost(f: Field) -> int:
    """Objects one field's value adds to its struct, arrays' elements aside (their loop pays for them)."""
    t = f.type
    if t.startswith("[]"):
        return LIST
    if t == "struct":
        return struct_cost(f.children or ())
    if t == "records":
        return records_cost()
    return _SCALAR.get(t, STR)


def struct_cost(fields: tuple[Field, ...]) -> int:
    """A struct's dict and its fields' values (tagged fields take their defaults when absent)."""
    return dict_cost(len(fields)) + sum(value_cost(f) for f in fields)


def element_cost(f: Field) -> int:
    """One element of the array field ``f``: its list slot and its value."""
    elem = f.type[2:]
    if elem == "struct":
        return SLOT + struct_cost(f.children or ())
    return SLOT + _SCALAR.get(elem, STR)


def min_size(f: Field) -> int:
    """The fewest wire bytes one value of ``f`` can take (tagged fields: none, they may be absent)."""
    if f.tag is not None:
        return 0
    t = f.type
    if t in _FIXED_SIZE:
        return _FIXED_SIZE[t]
    if t.startswith("[]"):
        return 1 if f.flexible else 4
    if t == "struct":
        if f.nullable:
            return 1
        return struct_min_size(f.children or (), f.flexible)
    if f.flexible:
        return 1                                   # a varint length
    return 2 if t == "string" else 4


def struct_min_size(fields: tuple[Field, ...], flexible: bool) -> int:
    return sum(min_size(f) for f in fields) + (1 if flexible else 0)


def element_min_size(f: Field) -> int:
    elem = f.type[2:]
    if elem == "struct":
        return max(1, struct_min_size(f.children or (), f.flexible))
    return max(1, min_size(Field(f.name, elem, False, None, None, None, f.flexible, None)))


def density(fields: tuple[Field, ...]) -> float:
    """The most any array among ``fields`` (at any depth) costs decoded per byte on the wire."""
    worst = 0.0
    for f in fields:
        if f.type.startswith("[]"):
            worst = max(worst, element_cost(f) / element_min_size(f))
        if f.children:
            worst = max(worst, density(f.children))
    return worst


def safe_size(msg: MessageSchema, floor: int = FLOOR) -> int:
    """Frames of at most this many bytes cannot exceed the floor, whatever they hold: decoded unchecked."""
    d = density(msg.fields)
    return floor if d <= 1 else int(floor / d)


def budget(frame_size: int, floor: int = FLOOR, ratio: int = RATIO) -> int:
    """The decoded cost a body of a ``frame_size``-byte frame may reach."""
    return max(floor, ratio * frame_size)


def limit_anomaly(direction: Direction, ts: int, what: str, size: int, failure: DecodeFailure,
                  offset: int) -> Anomaly:
    """The anomaly of a body cut at its decoding budget (``failure``: where and why)."""
    return Anomaly("decode_limit", direction, ts,
                   f"{what} of {size} bytes: its body is kept decoded up to byte {failure.offset} ({failure.detail}); "
                   "decoded whole it would cost more memory than its decoding budget allows (by default "
                   f"{RATIO} times its size, at least {FLOOR >> 20} MiB)", offset,
                   {"bytes": size, "decoded_to": failure.offset})
