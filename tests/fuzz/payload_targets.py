"""Fuzz targets of the record payloads (``payloads/``): Avro, Protobuf and JSON Schema values, Schema
Registry framing, schemas learned from ``_schemas`` records, and the payload decoder end to end.

Keys, values and the schemas of ``_schemas`` come from whoever can produce to a topic. Each target
allows a decoder JSON text or a ``PayloadError`` and nothing else, and states the rest of its invariant
in its docstring. The targets import ``payloads`` lazily (the fuzz child instruments the package
before the targets run), and build what is fixed per process once (``Target.warm``): Protobuf's
``.proto`` text is compiled by protoc, a subprocess, never per input.
"""

from __future__ import annotations

import base64
import functools
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from tests.fuzz.harness import MAX_DECOMPRESSED, InvariantBroken, chunks, pack_chunks, rss

PAYLOAD_SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "payloads"
ID_STRIDE = 100         # sample folder i's schema id n is i * ID_STRIDE + n where all folders' schemas meet


def _json_text(out: object, who: str) -> None:
    """What a decoder returned is JSON text (compact UTF-8 bytes that parse)."""
    import orjson

    if type(out) is not bytes:
        raise InvariantBroken(f"{who} returned {type(out).__name__}, not JSON bytes")
    try:
        orjson.loads(out)
    except orjson.JSONDecodeError as exc:
        raise InvariantBroken(f"{who} returned bytes that are not JSON ({exc}): {out[:80]!r}") from None


def _no_references(ref: Any) -> Any:
    from payloads import SchemaError
    raise SchemaError(f"reference {ref.name} not found")


def sample_schemas() -> list[tuple[int, str, dict]]:
    """Every schema of the payload samples as the registry exported it (``<folder>/schemas/*.json``):
    (folder index, folder name, the registry's JSON), folders sorted, ids ascending."""
    folders = sorted(p for p in PAYLOAD_SAMPLES.iterdir() if (p / "schemas").is_dir())
    out = []
    for i, folder in enumerate(folders):
        docs = [json.loads(f.read_text()) for f in (folder / "schemas").glob("*.json")]
        out += [(i, folder.name, d) for d in sorted(docs, key=lambda d: d["id"])]
    return out


def _sample_texts(fmt: str) -> list[str]:
    """The distinct schema texts of one format among the samples', in sample order."""
    texts: list[str] = []
    for _, _, doc in sample_schemas():
        if (doc.get("schemaType") or "AVRO").upper() == fmt.upper() and doc["schema"] not in texts:
            texts.append(doc["schema"])
    return texts


# -- Avro values

# What the samples' schemas (a string key, the Order record v1 and v2, hostile ones) leave out: items
# that take no bytes besides nulls, unions of several named types, every logical type, maps of maps,
# top-level unions and maps.
AVRO_EXTRA_SCHEMAS: list[Any] = [
    {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]},
    {"type": "record", "name": "Every", "namespace": "kd.fuzz", "fields": [
        {"name": "nulls", "type": {"type": "array", "items": "null"}},
        {"name": "empties", "type": {"type": "array", "items": {"type": "record", "name": "Nothing", "fields": []}}},
        {"name": "grid", "type": {"type": "map", "values": {"type": "array",
                                                            "items": ["null", "long", "string", "double"]}}},
        {"name": "choice", "type": [
            "null", {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
            {"type": "record", "name": "B", "fields": [{"name": "y", "type": "string"}]},
            {"type": "enum", "name": "E", "symbols": ["P", "Q", "R"]},
            {"type": "fixed", "name": "F2", "size": 2}, "string"]},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {"name": "rate", "type": {"type": "fixed", "name": "F8", "size": 8, "logicalType": "decimal",
                                  "precision": 18, "scale": 9}},
        {"name": "at_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "flag", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "nested", "type": {"type": "map", "values": {"type": "map",
                                                              "values": ["null", "kd.fuzz.A", "kd.fuzz.B"]}}},
        {"name": "tail", "type": ["null", "Every"]},
    ]},
    {"type": "record", "name": "Logical", "namespace": "kd.fuzz", "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "unknown", "type": {"type": "string", "logicalType": "kd-unknown"}},
        {"name": "maybe_id", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
        {"name": "amounts", "type": {"type": "array", "items": {"type": "bytes", "logicalType": "decimal",
                                                                "precision": 9, "scale": 2}}},
        {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}},
    ]},
    {"type": "map", "values": {"type": "array", "items": "null"}},
    ["null", "long", "string", "bytes", {"type": "array", "items": "double"}],
]
_AVRO: dict[str, Any] = {}


def avro_schemas() -> list[str]:
    """The Avro schema texts a selector byte picks from: the samples', then AVRO_EXTRA_SCHEMAS."""
    if "texts" not in _AVRO:
        _AVRO["texts"] = _sample_texts("AVRO") + [json.dumps(s) for s in AVRO_EXTRA_SCHEMAS]
    return _AVRO["texts"]


def _coverage_loader(name: str, path: Path) -> Any:
    """In the fuzz child (``payloads`` imported with atheris's hooks), a loader that gives ``path`` the
    same hooks, so coverage reaches a module loaded by file; None elsewhere."""
    if "atheris" not in sys.modules:
        return None
    import payloads.avro
    if "__ATHERIS_INSTRUMENTED__" not in payloads.avro.AvroDecoder.decode.__code__.co_consts:
        return None
    from atheris.import_hook import AtherisSourceFileLoader
    return AtherisSourceFileLoader(name, str(path), True)


def avrofast_twins() -> tuple[Any, Any, str]:
    """(pure, compiled, why there is no compiled one): ``payloads/avrofast.py`` loaded as Python under a
    name of its own, and the extension built from it (``avrofast.cpython-*.so``) loaded by file with its
    own name, ``payloads.avrofast``, but not put in ``sys.modules`` (whichever build the process
    imported stays). No compiled twin when none is built, or when it is older than its ``.py`` or
    ``.pxd`` (it would hold the source to an old build; ``pip install -e .`` rebuilds it)."""
    if "twins" in _AVRO:
        return _AVRO["twins"]
    import payloads.avro  # noqa: F401  (first: the process's own payloads.avrofast)

    here = Path(importlib.util.find_spec("payloads").submodule_search_locations[0])
    source = here / "avrofast.py"
    name = "kd_fuzz_avrofast_pure"
    spec = importlib.util.spec_from_file_location(name, source, loader=_coverage_loader(name, source))
    pure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pure)
    built = next((here / f"avrofast{s}" for s in importlib.machinery.EXTENSION_SUFFIXES
                  if (here / f"avrofast{s}").is_file()), None)
    compiled, why = None, ""
    if built is None:
        why = "payloads/avrofast is not compiled"
    elif built.stat().st_mtime < max(f.stat().st_mtime for f in (source, source.with_suffix(".pxd"))
                                     if f.is_file()):
        why = f"{built.name} is older than avrofast.py / avrofast.pxd (pip install -e . rebuilds it)"
    else:
        own = sys.modules.get("payloads.avrofast")
        loader = importlib.machinery.ExtensionFileLoader("payloads.avrofast", str(built))
        cspec = importlib.util.spec_from_file_location("payloads.avrofast", built, loader=loader)
        compiled = importlib.util.module_from_spec(cspec)
        loader.exec_module(compiled)
        if sys.modules.get("payloads.avrofast") is not own:        # the extension registers itself if absent
            sys.modules["payloads.avrofast"] = own
    if compiled is None:
        print(f"avro_values: no compiled reader to hold to its pure twin: {why}", file=sys.stderr)
    _AVRO["twins"] = (pure, compiled, why)
    return _AVRO["twins"]


def _avro_decoders(index: int) -> tuple[Any, Any]:
    """(pure, compiled or None) decoders of the index-th schema of avro_schemas(), built once."""
    key = f"dec{index}"
    if key not in _AVRO:
        from payloads import PayloadError, Schema
        from payloads.avro import AvroDecoder

        pure, compiled, _ = avrofast_twins()
        schema = Schema("avro", avro_schemas()[index])
        try:
            _AVRO[key] = (AvroDecoder(schema, _no_references, impl=pure),
                          AvroDecoder(schema, _no_references, impl=compiled) if compiled is not None else None)
        except PayloadError as exc:
            raise InvariantBroken(f"fixed Avro schema {index} no longer compiles: {exc}") from None
    return _AVRO[key]


def _avro_outcome(dec: Any, data: bytes) -> tuple[str, bytes | str]:
    from payloads import ValueMismatch

    try:
        out = dec.decode(data, 1, None)
    except ValueMismatch as exc:
        return "mismatch", str(exc)
    _json_text(out, "AvroDecoder.decode")
    return "json", out


def avro_values(data: bytes) -> None:
    """A selector byte picking one of a fixed set of Avro schemas (the samples', a recursive linked list,
    arrays of nulls and of empty records, maps, unions of several named types, decimals, timestamps,
    uuid / time-* / local-timestamp-* logical types), then the value's bytes: ``AvroDecoder.decode``
    returns JSON text or raises ``ValueMismatch``, nothing else, and the compiled reader
    (``avrofast.cpython-*.so``) agrees with its pure twin (``avrofast.py``): the same JSON, or a
    mismatch with the same message."""
    if not data:
        return
    pure, compiled = _avro_decoders(data[0] % len(avro_schemas()))
    expected = _avro_outcome(pure, data)
    if compiled is not None:
        got = _avro_outcome(compiled, data)
        if got != expected:
            raise InvariantBroken(f"compiled reader: {got[0]} {got[1]!r:.300}; pure twin: "
                                  f"{expected[0]} {expected[1]!r:.300}")


def warm_avro() -> None:
    for i in range(len(avro_schemas())):
        _avro_decoders(i)


# -- Protobuf values

PROTO_EXTRA_SCHEMAS = [
    """syntax = "proto3";
package kd.fuzz;

import "google/protobuf/any.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/field_mask.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color { RED = 0; GREEN = 1; BLUE = 2; }

message Tree {
  string name = 1;
  repeated Tree children = 2;
  oneof payload { int64 n = 3; string s = 4; bytes b = 5; double d = 6; Leaf leaf = 7; }
  message Leaf {
    sint32 z = 1; fixed64 f = 2; sfixed32 sf = 3; float x = 4; bool ok = 5;
    message Deep { uint64 u = 1; Tree back = 2; }
    Deep deep = 6;
  }
  map<int32, Tree> by_id = 8;
  map<string, google.protobuf.Value> attrs = 9;
  google.protobuf.Struct meta = 10;
  google.protobuf.Any any = 11;
  google.protobuf.FieldMask mask = 12;
  repeated int32 packed = 13;
  repeated Color colors = 14;
  google.protobuf.Timestamp at = 15;
  google.protobuf.Duration ttl = 16;
  google.protobuf.BytesValue blob = 17;
  google.protobuf.UInt64Value big = 18;
  google.protobuf.ListValue list = 19;
  google.protobuf.Empty nothing = 20;
  optional string maybe = 21;
}

message Second { repeated string names = 1; Tree tree = 2; map<uint64, bytes> blobs = 3; }
""",
    """syntax = "proto2";
package kd.legacy;

message Old {
  required int32 id = 1;
  optional string label = 2 [default = "x"];
  repeated group Item = 3 { required string sku = 4; optional int32 qty = 5; }
  optional Kind kind = 6;
  enum Kind { A = 1; B = 2; }
  repeated sint64 packed = 7 [packed = true];
  extensions 100 to 199;
}

extend Old { optional string note = 100; }
""",
]
_PROTO: list[Any] = []


def protobuf_texts() -> list[str]:
    return _sample_texts("PROTOBUF") + PROTO_EXTRA_SCHEMAS


def protobuf_decoders() -> list[Any]:
    """The fixed Protobuf schemas' decoders, built once per process: the samples' ``.proto`` text and
    PROTO_EXTRA_SCHEMAS, each compiled by protoc (here, once), then the same schemas as the base64
    ``FileDescriptorProto`` a serializer registers."""
    if not _PROTO:
        from payloads import Schema
        from payloads.protobuf import ProtobufDecoder

        texts = [ProtobufDecoder(Schema("protobuf", t), _no_references) for t in protobuf_texts()]
        serialized = [ProtobufDecoder(Schema("protobuf", base64.b64encode(d.file.serialized_pb).decode()),
                                      _no_references) for d in texts]
        _PROTO.extend(texts + serialized)
    return _PROTO


def protobuf_values(data: bytes) -> None:
    """A selector byte (bits 0-6: one of the fixed Protobuf schemas; bit 7: no message indexes, the
    first message), then the message indexes as framing has them, then the message:
    ``message_indexes`` and ``ProtobufDecoder.decode`` give JSON text or raise ``ValueMismatch``, nothing
    else."""
    from payloads import ValueMismatch
    from payloads.framing import message_indexes

    if not data:
        return
    decoders = protobuf_decoders()
    dec = decoders[(data[0] & 0x7F) % len(decoders)]
    try:
        indexes, start = (None, 1) if data[0] & 0x80 else message_indexes(data, 1)
        out = dec.decode(data, start, indexes)
    except ValueMismatch:
        return
    _json_text(out, "ProtobufDecoder.decode")


# -- JSON Schema values

JSON_EXTRA_SCHEMAS: list[Any] = [
    {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "https://kd.fuzz/tree.json",
     "definitions": {"node": {"type": "object", "properties": {
         "name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z][a-z0-9-]*$"},
         "kids": {"type": "array", "items": {"$ref": "#/definitions/node"}, "uniqueItems": True, "maxItems": 50},
         "n": {"type": "integer", "minimum": -1000, "exclusiveMaximum": 1000, "multipleOf": 3},
         "x": {"type": "number", "multipleOf": 0.01},
         "kind": {"enum": ["a", "b", None, 1.5, [1]]}, "fixed": {"const": {"k": [1, 2]}},
         "either": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
         "any": {"anyOf": [{"type": "boolean"}, {"type": "object", "minProperties": 1}]},
         "not": {"not": {"type": "string"}},
         "when": {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}}},
         "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False,
         "dependencies": {"n": ["name"]}, "propertyNames": {"maxLength": 16}}},
     "$ref": "#/definitions/node"},
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",
     "prefixItems": [{"type": "string"}, {"type": "number"}], "items": {"type": "boolean"},
     "contains": {"const": True}, "minContains": 1, "maxContains": 3,
     "$defs": {"unused": {"type": "null"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "properties": {"v": {"type": "number", "maximum": 10, "exclusiveMaximum": True}},
     "required": ["v"], "additionalProperties": {"type": "array", "minItems": 1}},
    True,
]
_JSON: list[tuple[Any, Any]] = []


def json_schemas() -> list[str]:
    return _sample_texts("JSON") + [json.dumps(s) for s in JSON_EXTRA_SCHEMAS]


def json_decoders() -> list[tuple[Any, Any]]:
    """(not validating, validating) JsonDecoder of each fixed JSON Schema, built once."""
    if not _JSON:
        from payloads import Schema
        from payloads.jsonvalues import JsonDecoder

        for text in json_schemas():
            s = Schema("json", text)
            _JSON.append((JsonDecoder(s, _no_references, False), JsonDecoder(s, _no_references, True)))
    return _JSON


def json_values(data: bytes) -> None:
    """A selector byte (bit 0: validate; bits 1-7: one of a fixed set of JSON Schemas, the samples' and
    drafts 4, 7 and 2020-12 with references, patterns, unique items...), then the value's bytes:
    ``JsonDecoder.decode`` with and without validation returns JSON text or raises ``ValueMismatch``,
    nothing else."""
    from payloads import ValueMismatch

    if not data:
        return
    decoders = json_decoders()
    dec = decoders[(data[0] >> 1) % len(decoders)][data[0] & 1]
    try:
        out = dec.decode(data, 1, None)
    except ValueMismatch:
        return
    _json_text(out, "JsonDecoder.decode")


# -- framing

UNFRAMED_FORMATS = frozenset({"json-text", "text", "binary"})
_CONTROL = frozenset(c for c in range(32) if c not in b"\t\n\r") | {0x7F}


def _check_ref(got: object, data: bytes, what: str, ids: range) -> None:
    """A prefix / header_ref answer: None exactly when the bytes are not framing, else (id, None, 5)
    for magic 0 + an id in ``ids``, (None, the GUID, 17) for magic 1 + 16 bytes."""
    import uuid

    want: object = None
    if len(data) >= 5 and data[0] == 0 and int.from_bytes(data[1:5], "big") in ids:
        want = (int.from_bytes(data[1:5], "big"), None, 5)
    elif len(data) >= 17 and data[0] == 1:
        want = (None, str(uuid.UUID(bytes=bytes(data[1:17]))), 17)
    if got != want or (got is not None and type(got) is not tuple):
        raise InvariantBroken(f"{what} gave {got!r} for {data[:17].hex()}, not {want!r}")


def _json_depth(value: object) -> int:
    """Levels of objects and arrays (``[]`` is 1, a number 0), counted without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, depth)
            stack.extend((item, depth + 1) for item in v)
    return deepest


def framing(data: bytes) -> None:
    """Arbitrary bytes through ``payloads.framing``: ``prefix`` and ``header_ref`` give None or the
    documented (id, GUID, where the value starts), ``message_indexes`` (at every place framing can put
    them) a list of 1 to MAX_INDEXES non-negative indexes and a place after them within the bytes, or
    ``ValueMismatch``; ``unframed_json`` a documented format whose claim holds (``json-text``: JSON,
    given back as the same JSON when asked for, unless nested past ``limits.MAX_DEPTH``, and then not;
    ``text``: UTF-8 without control characters but tab and line ends; ``binary``: not that), never an
    exception, and ``unframed_format`` the same format; memory in proportion to the
    input (the JSON given back at most 8 times its size; resident memory grows by at most 64 times the
    input plus 16 MB)."""
    import orjson

    from payloads import ValueMismatch
    from payloads.framing import MAX_ID, MAX_INDEXES, header_ref, message_indexes, prefix, unframed_format, \
        unframed_json
    from payloads.limits import MAX_DEPTH

    before = rss()
    _check_ref(prefix(data), data, "prefix", range(1, MAX_ID))
    _check_ref(header_ref(data), data, "header_ref", range(0, 1 << 32))
    for pos in (0, 1, 5, 17):
        if pos > len(data):
            break
        try:
            indexes, after = message_indexes(data, pos)
        except ValueMismatch:
            continue
        if not (type(indexes) is list and 1 <= len(indexes) <= MAX_INDEXES
                and all(type(i) is int and i >= 0 for i in indexes) and pos < after <= len(data)):
            raise InvariantBroken(f"message_indexes at {pos}: {indexes!r:.200}, then {after} of {len(data)}")
    fmt, decoded = unframed_json(data)
    if fmt not in UNFRAMED_FORMATS:
        raise InvariantBroken(f"unframed_json: format {fmt!r}")
    if unframed_format(data) != fmt or unframed_json(data, False) != (fmt, None):
        raise InvariantBroken("unframed_format / unframed_json(want=False) disagree with unframed_json")
    if fmt == "json-text":
        value = orjson.loads(data)
        deep = _json_depth(value) > MAX_DEPTH
        if deep != (decoded is None):
            raise InvariantBroken(f"JSON {_json_depth(value)} levels deep given back as {decoded!r:.100}")
        if decoded is not None:
            if type(decoded) is not bytes or orjson.loads(decoded) != value:
                raise InvariantBroken(f"json-text given back as {decoded!r:.200}")
            if len(decoded) > 8 * len(data) + 64:
                raise InvariantBroken(f"{len(data)} bytes of JSON given back as {len(decoded)}")
    else:
        if decoded is not None:
            raise InvariantBroken(f"{fmt} with JSON given back")
        try:
            data.decode("utf-8")
            text = not _CONTROL.intersection(data)
        except UnicodeDecodeError:
            text = False
        if text != (fmt == "text"):
            raise InvariantBroken(f"{data[:40]!r} is {'text' if text else 'binary'}, said to be {fmt}")
    grown = rss() - before
    if grown > 64 * len(data) + (16 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


# -- schema learning

_SCHEMA_KEY = b'{"keytype":"SCHEMA","subject":"fuzz","version":1,"magic":1}'
LEARNED_DECODED = 32          # schemas compiled, each decoding one value, per input
_LEARN_FORMATS = ("avro", "json", "protobuf")
_REF_SUFFIX = {"avro": ".avsc", "json": ".json", "protobuf": ".proto"}


def schema_learning(data: bytes) -> None:
    """``_schemas`` records (raw, or made from a schema's text as a registry writes them) learned by a
    ``LearnedStore``, then each schema learned compiled (``PayloadDecoder.compiled``: Avro, JSON Schema,
    and Protobuf given as a serialized descriptor; never ``.proto`` text, which would run protoc per
    input) and one value decoded with it: nothing but ``PayloadError`` subclasses (learn: SchemaError;
    compile: SchemaError, MissingLibrary; decode: ValueMismatch), JSON text from every decode, time and
    memory bounded (resident memory grows by at most 64 times the input plus 64 MB).

    Input: chunks; tag bits 0-2: 0 a ``_schemas`` key (for the next value), 1 a ``_schemas`` value (learned
    with that key, or a SCHEMA key of its own), 2 / 3 / 4 the text of an Avro / JSON Schema / Protobuf
    schema (for Protobuf: a ``FileDescriptorProto``, registered base64), made a SCHEMA record with id
    bits 3-6 plus 1 and, with bit 7, a reference to the schema made before it (named ``refN.avsc`` /
    ``.json`` / ``.proto``); 5 a value to decode (the i-th schema learned decodes value i modulo their
    number); 6 validate JSON Schema values; 7 a tombstone (the key alone). The first
    LEARNED_DECODED schemas learned are compiled and decode a value: a value may cost its reader
    ~65,000 items of nothing (``limits.MAX_EMPTY_ITEMS``), some 80 ms instrumented, so that an input's
    time is bounded by the target's, not by its number of schemas."""
    from payloads import LearnedStore, PayloadDecoder, PayloadError, Reference, Schema, ValueMismatch, \
        schemas_record
    from payloads.framing import message_indexes
    from payloads.protobuf import _is_serialized

    before = rss()
    store = LearnedStore()
    key: bytes | None = None
    values: list[bytes] = []
    validate = False
    made: list[Reference] = []
    for tag, chunk in chunks(data):
        kind = tag & 7
        try:
            if kind == 0:
                key = chunk
            elif kind == 1:
                store.learn(_SCHEMA_KEY if key is None else key, chunk)
                key = None
            elif kind in (2, 3, 4):
                fmt = _LEARN_FORMATS[kind - 2]
                text = base64.b64encode(chunk).decode() if fmt == "protobuf" else chunk.decode("utf-8", "replace")
                sid = (tag >> 3 & 0x0F) + 1
                refs = (made[-1],) if tag & 0x80 and made else ()
                version = len(made) + 1
                store.learn(*schemas_record(Schema(fmt, text, refs, sid, None, f"fuzz-{sid}", version)))
                made.append(Reference(f"ref{len(made) + 1}{_REF_SUFFIX[fmt]}", f"fuzz-{sid}", version))
            elif kind == 5:
                values.append(chunk)
            elif kind == 6:
                validate = True
            else:
                store.learn(_SCHEMA_KEY if key is None else key, None)
                key = None
        except PayloadError:
            pass
    dec = PayloadDecoder(learned=store, validate=validate)
    for i, (_, schema) in enumerate(store.learned[:LEARNED_DECODED]):
        if schema.format == "protobuf" and not _is_serialized(schema.text):
            continue
        try:
            compiled = dec.compiled(schema)
        except PayloadError:
            continue
        value = values[i % len(values)] if values else b""
        try:
            indexes, start = message_indexes(value, 0) if schema.format == "protobuf" else (None, 0)
            out = compiled.decode(value, start, indexes)
        except ValueMismatch:
            continue
        _json_text(out, f"the {schema.format} decoder of a learned schema")
    grown = rss() - before
    if grown > 64 * len(data) + (64 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


def warm_schema_learning() -> None:
    """The codec libraries imported before the first input (their import is not an input's memory)."""
    import fastavro  # noqa: F401
    import jsonschema  # noqa: F401
    from google.protobuf import descriptor_pool, json_format, message_factory  # noqa: F401
    schema_learning(pack_chunks([(2, avro_schemas()[1].encode()), (3, json_schemas()[0].encode()), (6, b""),
                                 (5, b"{}")]))


# -- the payload decoder, end to end

RESULT_FORMATS = frozenset({"avro", "protobuf", "json", "json-text", "text", "binary"})
PAYLOADS_DECODED = 32         # keys and values decoded per input
PROBLEM_KINDS = frozenset({"unknown", "mismatch", "schema"})    # and "error": a failure contained, a bug
_DECODER: list[Any] = []


def sample_schemas_records() -> list[tuple[bytes, bytes]]:
    """Every sample schema as the ``_schemas`` record a registry writes for it (with its GUID), folder i's
    ids moved to i * ID_STRIDE + id so that all folders' schemas meet in one store. (The ``_schemas``
    records the samples' captures hold are learned after these: see :func:`sample_decoder`.)"""
    from payloads import Schema, schemas_record
    from payloads.schema import FORMATS

    out = []
    for i, folder, doc in sample_schemas():
        s = Schema(FORMATS[(doc.get("schemaType") or "AVRO").upper()], doc["schema"], (),
                   i * ID_STRIDE + doc["id"], None, f"{folder}/{doc['subject']}", doc["version"])
        key, value = schemas_record(s)
        value = json.dumps({**json.loads(value), "guid": doc["guid"]}).encode()
        out.append((key, value))
    return out


def sample_decoder() -> Any:
    """One PayloadDecoder (validating JSON Schema values) for the process: the samples' schemas learned
    from their ``_schemas`` records (:func:`sample_schemas_records`), then the ``_schemas`` records the
    samples' captures hold (a registry's, and a hostile client's: ids of their own, kept where no
    sample schema has them), and all compiled (protoc runs here, for the ``.proto`` texts, once)."""
    if not _DECODER:
        from payloads import PayloadDecoder, PayloadError

        dec = PayloadDecoder(validate=True)
        for key, value in sample_schemas_records():
            dec.learn(key, value)
        exported = len(dec.learned.learned)
        for key, value in _captured_schemas_records():
            try:
                dec.learn(key, value)
            except PayloadError:
                pass
        for n, (_, schema) in enumerate(dec.learned.learned):
            try:
                dec.compiled(schema)
            except PayloadError as exc:
                if n < exported:
                    raise InvariantBroken(f"sample schema {schema.schema_id} no longer compiles: {exc}") from None
        _DECODER.append(dec)
    return _DECODER[0]


@functools.lru_cache(maxsize=1)
def payload_records() -> tuple[tuple[str, str, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]], ...]:
    """Every record the payload samples' producers sent (Produce requests): (folder, topic, key, value,
    headers), in capture order."""
    from capture import read_capture
    from dissector.events import Exchange
    from dissector.records import decode_records
    from dissector.views import partition_rows

    out = []
    for pcap in sorted(PAYLOAD_SAMPLES.glob("*/*.pcap")):
        for ce in read_capture(pcap):
            ex = ce.event
            if not isinstance(ex, Exchange) or ex.api_key != 0 or ex.request is None:
                continue
            for r in partition_rows(0, "request", ex.api_version, ex.request.body):
                if r.records is None:
                    continue
                for m in decode_records(r.records.data, max_decompressed=MAX_DECOMPRESSED).records():
                    out.append((pcap.parent.name, r.topic, m.key, m.value, tuple(m.headers)))
    return tuple(out)


def _captured_schemas_records() -> list[tuple[bytes | None, bytes | None]]:
    """The ``_schemas`` records the payload samples' producers sent (read from their captures)."""
    return [(key, value) for _folder, topic, key, value, _headers in payload_records() if topic == "_schemas"]


def _check_result(result: object, data: bytes | None) -> None:
    """``decoder.Result``: (schema id, GUID, format, decoded JSON, problem), JSON and a problem never both."""
    if type(result) is not tuple or len(result) != 5:
        raise InvariantBroken(f"decode returned {result!r:.200}, not a 5-tuple")
    sid, guid, fmt, decoded, problem = result
    if problem is not None:
        if not (type(problem) is tuple and len(problem) == 2 and type(problem[1]) is str):
            raise InvariantBroken(f"problem {problem!r:.200}")
        if problem[0] == "error":
            raise InvariantBroken(f"decoding raised, contained as a problem: {problem[1]}")
        if problem[0] not in PROBLEM_KINDS:
            raise InvariantBroken(f"undocumented problem kind {problem[0]!r}: {problem[1]}")
    if not ((sid is None or type(sid) is int) and (guid is None or type(guid) is str)
            and (fmt is None or fmt in RESULT_FORMATS)):
        raise InvariantBroken(f"decode returned {result!r:.300}")
    if decoded is not None:
        _json_text(decoded, "PayloadDecoder.decode")
        if problem is not None:
            raise InvariantBroken(f"decoded JSON and a problem: {problem}")
    if data is None and result != (None, None, None, None, None):
        raise InvariantBroken(f"a null key or value decoded to {result!r:.200}")


def payload_decoder(data: bytes) -> None:
    """Keys and values, with or without a schema id header, through ``PayloadDecoder.decode`` with the
    samples' schemas learned from their ``_schemas`` records (JSON Schema values validated): it never
    raises, its answer has ``decoder.Result``'s shape (ids, a documented format, JSON text or a problem
    of a documented kind, never both), no problem is an ``error`` (a failure contained: a bug all the
    same), decoding the same bytes again gives the same answer (the memo and the fast path agree
    with the first reading), and what the decoder keeps stays in proportion to what it was given: its
    memo keeps answers to keys and values of at most ``MEMO_BYTES`` whose JSON is at most 4 times that
    (as ``decoder.MEMO_BYTES`` documents: a few bytes of Avro nulls are a lot of JSON), and resident
    memory grows by at most 64 times the input plus 8 MB over an input (one decoder serves every
    input, as one serves a whole capture).

    Input: chunks; tag bit 0: the chunk is the ``__value_schema_id`` header of the next key or value;
    bit 1: that key or value is null. The first PAYLOADS_DECODED keys and values are decoded (one may
    cost ~65,000 items of nothing, some 80 ms instrumented, twice)."""
    dec = sample_decoder()
    before = rss()
    header: bytes | None = None
    decoded = 0
    for tag, chunk in chunks(data):
        if tag & 1:
            header = chunk
            continue
        decoded += 1
        if decoded > PAYLOADS_DECODED:
            break
        value = None if tag & 2 else chunk
        first = dec.decode(value, header)
        _check_result(first, value)
        again = dec.decode(value, header)
        if again != first:
            raise InvariantBroken(f"decoded twice: {first!r:.300}, then {again!r:.300}")
        header = None
    _check_memo(dec)
    grown = rss() - before
    if grown > 64 * len(data) + (8 << 20):
        raise InvariantBroken(f"resident memory grew {grown} bytes for a {len(data)}-byte input")


def _check_memo(dec: Any) -> None:
    from payloads import decoder

    limit = decoder.MEMO_BYTES
    for key, result in getattr(dec, "_memo", {}).items():
        data = key[0] if type(key) is tuple else key
        if len(data) > limit or (result[3] is not None and len(result[3]) > 4 * limit):
            raise InvariantBroken(f"the memo keeps the answer to {len(data)} bytes: "
                                  f"{len(result[3] or b'')} bytes of JSON")
