"""What one key, value or schema may cost: the payload layer's budgets, in one place.

Keys, values and the schemas in ``_schemas`` are written by whoever can produce to a topic, so every
decoder holds them to budgets that make a hostile one cost an anomaly, never the capture:

* **Depth.** A decoded value nests at most :data:`MAX_DEPTH` levels (objects and arrays of its JSON):
  the JSON writer (orjson) stops at 254, and the Avro reader, compiled, recurses on the C stack once
  per level, so a recursive schema must not take it as deep as the bytes go. Protobuf's own parser
  stops at 100 nested messages, JSON text's reader (orjson) at 1024 and its writer at 254.
* **Claims past the bytes.** Lengths and item counts are checked against the bytes left in the value
  before anything is allocated; items that take no bytes (Avro nulls) are bounded by
  :data:`MAX_EMPTY_ITEMS` beyond them.
* **Rendering.** A value's JSON is written by :func:`json_dumps`, which holds it to :data:`MAX_DEPTH`
  (orjson reads 1024 levels but writes 254, and says so with a TypeError).
* **Fields that take no bytes.** A Protobuf message costs all its fields, parsed (protobuf allocates
  them) and rendered (with every field at its default), yet an empty one is 2 bytes: the fields of the
  messages of a value are at most :data:`MAX_FIELDS_PER_BYTE` a byte of it plus :data:`MAX_EMPTY_ITEMS`
  (a 100 kB value of empty sub-messages of a 100-field type took 2.8 s and 520 MB).
* **Schemas.** A schema's text is at most :data:`MAX_SCHEMA_BYTES` (a ``_schemas`` record is a
  Kafka record: a registry's own limit is about this), its JSON nests at most
  :data:`MAX_SCHEMA_DEPTH` levels and declares at most :data:`MAX_SCHEMA_FIELDS` record fields: real
  schemas sit far below each, and the schema compilers (fastavro's, jsonschema's) recurse over them.
  A schema lists at most :data:`MAX_SCHEMA_REFERENCES` references, and with the schemas it references
  is at most :data:`MAX_SCHEMA_SET_BYTES`; the schemas learned from a capture's ``_schemas`` records
  are at most :data:`MAX_LEARNED_BYTES` together. Schema files and a registry's answers are checked
  as they are read; a schema learned from ``_schemas`` only for its size (one past the other budgets
  is kept, and each value naming it says which one its compiler found it past).
* **A Schema Registry** is asked with a timeout (:data:`REGISTRY_TIMEOUT` per request, and a look-up
  is given up after three); after :data:`REGISTRY_FAILURES` look-ups in a row that it did not
  answer, or :data:`REGISTRY_MISSES` that found no schema, it is not asked again (ids in values are
  anyone's to choose: each unknown one would be a request).

Nothing here imports a codec library.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson

from payloads.errors import SchemaError, ValueMismatch

MAX_DEPTH = 200
MAX_EMPTY_ITEMS = 1 << 16
MAX_FIELDS_PER_BYTE = 4
MAX_SCHEMA_BYTES = 1 << 20
MAX_SCHEMA_DEPTH = 128
MAX_SCHEMA_FIELDS = 10_000
MAX_SCHEMA_REFERENCES = 1000                  # references one schema lists
MAX_SCHEMA_SET_BYTES = 4 * MAX_SCHEMA_BYTES   # a schema with the schemas it references
MAX_LEARNED_BYTES = 1 << 28                   # schema text learned from one capture's _schemas records
REGISTRY_TIMEOUT = 10.0                       # seconds, each request to a Schema Registry
REGISTRY_FAILURES = 3
REGISTRY_MISSES = 1024


def check_schema_size(text: str) -> None:
    """SchemaError when a schema's text is longer than :data:`MAX_SCHEMA_BYTES`."""
    if len(text) > MAX_SCHEMA_BYTES:
        raise SchemaError(f"schema text of {len(text)} characters, past the limit of {MAX_SCHEMA_BYTES}")


def check_schema_text(fmt: str, text: str) -> None:
    """SchemaError when a schema's text is past the budgets (size always; depth and fields for the JSON
    of Avro and JSON Schema; ``.proto`` text is protoc's to judge). Iterative: a deep schema cannot
    exhaust the stack here."""
    check_schema_size(text)
    if fmt == "protobuf":
        return
    try:
        root = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit"):     # orjson reads at most 1024 levels
            raise SchemaError(f"schema nested more than {MAX_SCHEMA_DEPTH} levels deep") from None
        return                    # not JSON (a bare Avro name, or bad text): the format's compiler says which
    fields = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"schema nested more than {MAX_SCHEMA_DEPTH} levels deep")
        if isinstance(node, dict):
            listed = node.get("fields")
            if isinstance(listed, list):
                fields += len(listed)
                if fields > MAX_SCHEMA_FIELDS:
                    raise SchemaError(f"schema with more than {MAX_SCHEMA_FIELDS} record fields")
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))


# [(how many one-item lists around a value make orjson's writer stop past MAX_DEPTH, the depth it then
#   stops past, those lists (the outermost), the innermost one)], made on first use
_wrap: list[tuple[int, int, list[Any], list[Any]]] = []
_chain_lock = threading.Lock()
_SHALLOW = 2 * MAX_DEPTH + 1          # JSON text this short nests MAX_DEPTH levels at most


def _writer_depth() -> int:
    """How deep orjson writes (254 in orjson 3): found once, by trying."""
    lo, hi = 0, 4096
    while lo < hi:
        mid = (lo + hi + 1) // 2
        v: Any = None
        for _ in range(mid):
            v = [v]
        try:
            orjson.dumps(v)
            lo = mid
        except TypeError:
            hi = mid - 1
    return lo


def json_dumps(value: Any, source: bytes | None = None, default: Any = None, option: int | None = None) -> bytes:
    """``orjson.dumps(value, default, option)``, ValueMismatch for a value nested more than
    :data:`MAX_DEPTH` levels (objects and arrays). ``source``: the JSON text ``value`` was read from,
    when there is one; a value whose text is too short to nest that deep (2 bytes a level), or has no
    more than MAX_DEPTH brackets, is written straight. Otherwise it is written inside as many one-item
    lists as make orjson's own limit (a TypeError, checked in C as it writes) fall at MAX_DEPTH, and
    taken out of them (so compact JSON only: no ``OPT_INDENT_2``). A TypeError other than the depth (a
    value with no rendering) is orjson's, raised as it is."""
    if source is not None and (len(source) <= _SHALLOW or (
            type(source) is bytes and source.count(b"[") + source.count(b"{") <= MAX_DEPTH)):
        return orjson.dumps(value, default=default, option=option)
    if option is not None and option & orjson.OPT_INDENT_2:
        raise ValueError("json_dumps writes compact JSON only")
    if not _wrap:
        writes = _writer_depth()
        levels = max(0, writes - MAX_DEPTH)
        inner: list[Any] = [None]
        chain = inner
        for _ in range(levels - 1):
            chain = [chain]
        _wrap.append((levels, min(writes, MAX_DEPTH), chain, inner))
    levels, limit, chain, inner = _wrap[0]
    try:
        if not levels:
            out = orjson.dumps(value, default=default, option=option)
        elif _chain_lock.acquire(blocking=False):          # the lists built once: the usual case
            try:
                inner[0] = value
                out = orjson.dumps(chain, default=default, option=option)
            finally:
                inner[0] = None
                _chain_lock.release()
        else:                                              # another thread's, or called from ``default``
            wrapped = value
            for _ in range(levels):
                wrapped = [wrapped]
            out = orjson.dumps(wrapped, default=default, option=option)
    except TypeError as exc:
        if "ecursion" not in str(exc):
            raise
        raise ValueMismatch(f"nested more than {limit} levels deep") from None
    return out[levels:len(out) - levels] if levels else out
