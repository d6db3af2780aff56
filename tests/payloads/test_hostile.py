"""Keys, values and schemas anyone can produce cost a clean error, never the capture: a ValueMismatch
for a value, a SchemaError for a schema (a problem, through PayloadDecoder), a recorded error for a
Schema Registry that answers slowly or with garbage; each quickly, in bounded memory.

Every hostile input is built here by hand (with protobuf's own classes where a valid structure helps):
no real peer sends them."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from payloads import (PayloadDecoder, PayloadError, Schema, SchemaError, ValueMismatch, message_indexes,
                      read_schema_file, schemas_record, unframed_format)
from payloads import limits, store
from payloads.framing import unframed_json
from payloads.jsonvalues import JsonDecoder
from payloads.limits import MAX_DEPTH, MAX_SCHEMA_DEPTH, MAX_SCHEMA_FIELDS, check_schema_text, json_dumps
from payloads.registry import RegistryStore
from payloads.schema import Reference, from_registry_json, from_schemas_record
from payloads.store import LearnedStore, _Index
from tests.dissector.test_records import uvarint   # the tests' one hand encoder of varints

SECONDS = 2.0             # what any one hostile input may take


@contextlib.contextmanager
def quick(seconds: float = SECONDS) -> Iterator[None]:
    t = time.perf_counter()
    yield
    took = time.perf_counter() - t
    assert took < seconds, f"took {took:.2f} s"


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def nested_json(levels: int, leaf: bytes = b"1") -> bytes:
    """``levels`` of alternating arrays and objects around ``leaf``."""
    out = leaf
    for i in range(levels):
        out = b"[" + out + b"]" if i % 2 else b'{"k":' + out + b"}"
    return out


def framed(sid: int, body: bytes) -> bytes:
    return b"\x00" + sid.to_bytes(4, "big") + body


def decoder(*schemas: Schema, validate: bool = False) -> PayloadDecoder:
    idx = _Index()
    for s in schemas:
        idx.add(s)
    return PayloadDecoder(idx, validate=validate)


def problem_of(dec: PayloadDecoder, data: bytes, seconds: float = SECONDS) -> tuple[str, str] | None:
    with quick(seconds):
        return dec.decode(data)[4]


# ---------------------------------------------------------------------------------------------------
# JSON values


def test_json_writer_depth_is_held_to_max_depth():
    for levels in (MAX_DEPTH - 1, MAX_DEPTH):
        text = nested_json(levels)
        assert json_dumps(orjson.loads(text)) == text
        assert json_dumps(orjson.loads(text), text) == text
    for levels in (MAX_DEPTH + 1, 254, 255, 1000):
        with pytest.raises(ValueMismatch, match=f"nested more than {MAX_DEPTH} levels deep"):
            json_dumps(orjson.loads(nested_json(levels)))
    with pytest.raises(TypeError):                      # not the depth: orjson's own error stands
        json_dumps({"x": object()})


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 255, 300, 1024, 1025, 5000])
def test_json_values_nested_past_the_limit_are_mismatches(levels):
    # orjson reads 1024 levels but writes 254: a TypeError escaped JsonDecoder.decode before.
    says = f"nested more than {MAX_DEPTH} levels deep" if levels <= 1024 else "not JSON: depth limit exceeded"
    dec = JsonDecoder(Schema("json", "{}", (), 1), None)
    with quick(), pytest.raises(ValueMismatch, match=says):
        dec.decode(framed(1, nested_json(levels)), 5, None)
    problem = problem_of(decoder(Schema("json", "{}", (), 1)), framed(1, nested_json(levels)))
    assert problem[0] == "mismatch" and problem[1].startswith(f"does not match schema 1 (json): {says}")


def test_json_values_at_the_limit_decode():
    dec = decoder(Schema("json", "{}", (), 1))
    assert dec.decode(framed(1, nested_json(MAX_DEPTH)))[3:] == (nested_json(MAX_DEPTH), None)


@pytest.mark.parametrize("levels", [255, 300, 1024])
def test_unframed_json_past_the_writer_never_raises(levels):
    # Before: orjson.dumps raised TypeError out of unframed_json (and unframed_format, on kdissect's
    # framing-only path, which nothing catches).
    text = nested_json(levels)
    with quick():
        assert unframed_json(text) == ("json-text", None)
        assert unframed_json(text, want=False) == ("json-text", None)
        assert unframed_format(text) == "json-text"
        assert decoder().decode(text) == (None, None, "json-text", None, None)


def test_unframed_json_past_the_reader_is_text():
    text = b"[" * 2000 + b"]" * 2000            # orjson: "depth limit exceeded"
    assert unframed_json(text) == ("text", None)
    assert unframed_format(text) == "text"


RECURSIVE = {"$schema": "http://json-schema.org/draft-07/schema#",
             "anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}


def arrays(levels: int, leaf: bytes = b"1") -> bytes:
    return b"[" * levels + leaf + b"]" * levels


@pytest.mark.parametrize("levels", [150, MAX_DEPTH, MAX_DEPTH + 1, 1000])
def test_validation_of_deep_values_is_a_mismatch_or_passes_never_an_exception(levels):
    # jsonschema recurses in Python, several frames a level: at 200 levels it ran out of Python's
    # recursion limit (a RecursionError escaped decode before); past MAX_DEPTH it is never asked.
    dec = decoder(Schema("json", json.dumps(RECURSIVE), (), 1), validate=True)
    for leaf in (b"1", b'"x"'):
        problem = problem_of(dec, framed(1, arrays(levels, leaf)))
        if levels > MAX_DEPTH:
            assert problem == ("mismatch", f"does not match schema 1 (json): nested more than {MAX_DEPTH} "
                                           "levels deep")
        elif problem is not None:
            assert problem[0] == "mismatch"
            assert "recursion limit" in problem[1] or "not valid under any" in problem[1], problem


def test_validation_errors_of_any_kind_are_mismatches():
    unresolvable = {"$ref": "#/definitions/nope"}
    problem = problem_of(decoder(Schema("json", json.dumps(unresolvable), (), 1), validate=True),
                         framed(1, b"{}"))
    assert problem[0] == "mismatch" and "not validated" in problem[1] and "nope" in problem[1]


def test_validation_messages_are_cut_short():
    dec = decoder(Schema("json", '{"type": "integer"}', (), 1), validate=True)
    problem = problem_of(dec, framed(1, orjson.dumps("x" * 1_000_000)))
    assert problem[0] == "mismatch" and "is not of type 'integer'" not in problem[1]
    assert len(problem[1]) < 400 and problem[1].endswith("...")


def test_unique_items_is_linear():
    # jsonschema compares items it cannot sort (objects) pairwise: 20,000 of them took minutes.
    dec = decoder(Schema("json", '{"type": "array", "uniqueItems": true}', (), 1), validate=True)
    items = [{"a": i} for i in range(20_000)]
    assert problem_of(dec, framed(1, orjson.dumps(items))) is None
    problem = problem_of(dec, framed(1, orjson.dumps(items + [{"a": 5}])))
    assert problem == ("mismatch", "does not match schema 1 (json): (the value): item 20000 is not unique")
    # JSON Schema's equality: 1 == 1.0, true != 1, objects whatever their key order.
    assert problem_of(dec, framed(1, b"[1, 1.0]"))[0] == "mismatch"
    assert problem_of(dec, framed(1, b"[true, 1, false, 0]")) is None
    assert problem_of(dec, framed(1, b'[{"a":1,"b":[2]}, {"b":[2.0],"a":1}]'))[0] == "mismatch"
    assert problem_of(dec, framed(1, b'[[1, "a"], ["a", 1]]')) is None


# ---------------------------------------------------------------------------------------------------
# Protobuf values

PROTO = '''syntax = "proto3"; package h;
import "google/protobuf/any.proto"; import "google/protobuf/struct.proto";
import "google/protobuf/timestamp.proto";
enum E { E0 = 0; E1 = 1; }
message R { R child = 1; string s = 2; repeated int32 xs = 3; double d = 4; E e = 5; google.protobuf.Any any = 6;
            google.protobuf.Value val = 7; google.protobuf.Timestamp ts = 8; repeated Wide wide = 9; }
message Wide { %s }
''' % " ".join(f"int32 f{i} = {i + 1};" for i in range(100))


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return uvarint(number << 3 | 2) + uvarint(len(payload)) + payload


@pytest.fixture(scope="module")
def proto() -> PayloadDecoder:
    return decoder(Schema("protobuf", PROTO, (), 7))


def pb(body: bytes) -> bytes:
    return framed(7, b"\x00" + body)          # message indexes [0]: h.R


def message_class(dec: PayloadDecoder) -> Any:
    return dec.compiled(dec.store.by_id(7)).message_class([0])


def test_protobuf_values_nested_past_the_parser_are_mismatches(proto):
    body = b""
    for levels in range(1, 5001):
        body = field(1, body)                 # R.child, 5000 deep
        if levels in (100, 101, 5000):
            problem = problem_of(proto, pb(body))
            if levels == 100:
                assert problem is None
            else:
                assert problem[0] == "mismatch" and ("MaxDepth" in problem[1] or "nested more than" in problem[1])


@pytest.mark.parametrize("body, says", [
    (b"\x12\x10abc", "corrupt"),                                  # a string longer than the bytes left
    (b"\x12" + uvarint(1 << 40) + b"abc", "corrupt"),              # a terabyte claimed
    (b"\x12\x02\xff\xfe", "UTF-8"),                               # a string that is not UTF-8
    (b"\x1a" + uvarint(1 << 30), "corrupt"),                       # a packed field claiming a gigabyte
    (b"\x0f", "corrupt"),                                         # wire type 7
    (b"\x08", "corrupt"),                                         # a varint cut short
])
def test_protobuf_wire_that_does_not_read(proto, body, says):
    problem = problem_of(proto, pb(body))
    assert problem[0] == "mismatch" and says in problem[1], problem


def test_protobuf_odd_values_render_or_are_mismatches(proto):
    R = message_class(proto)
    assert orjson.loads(proto.decode(pb(b"\x28\x07"))[3])["e"] == 7         # an enum number not in the schema
    m = R(d=float("nan"))
    assert orjson.loads(proto.decode(pb(m.SerializeToString()))[3])["d"] == "NaN"
    cases = []
    m = R()
    m.val.number_value = float("nan")                                   # json_format cannot write it
    cases.append((m, "NaN"))
    m = R()
    m.any.type_url, m.any.value = "type.googleapis.com/no.Such", b"\x01"
    cases.append((m, "no.Such"))
    m = R()
    m.any.type_url = "garbage"
    cases.append((m, "garbage"))
    m = R()
    m.any.type_url, m.any.value = "type.googleapis.com/h.R", b"\x12\x10abc"
    cases.append((m, "corrupt"))
    m = R()
    m.ts.seconds = 1 << 62
    cases.append((m, "Timestamp is not valid"))
    for m, says in cases:
        problem = problem_of(proto, pb(m.SerializeToString()))
        assert problem[0] == "mismatch" and says in problem[1], problem


def test_protobuf_any_nested_in_any(proto):
    # Each Any is parsed on its own (the parser's depth starts again): json_format recursed until a
    # RecursionError, and a chain short of that rendered past orjson's 254 levels.
    inner = b""
    for _ in range(400):
        inner = field(6, field(1, b"type.googleapis.com/h.R") + field(2, inner))
    problem = problem_of(proto, pb(inner))
    assert problem[0] == "mismatch" and ("nested more than" in problem[1] or "recursion limit" in problem[1])


def test_protobuf_empty_messages_of_a_wide_type_are_held_to_the_budget(proto):
    # 2 bytes each, 100 fields each, parsed and rendered: 100 kB took 2.8 s and 520 MB, 1 MB 5 GB.
    before = maxrss_mb()
    for n in (50_000, 500_000):
        problem = problem_of(proto, pb(b"\x4a\x00" * n), 1.0)
        assert problem[0] == "mismatch" and "fields in" in problem[1] and "at most 4 a byte plus" in problem[1]
    assert maxrss_mb() - before < 100
    # A few hundred of them are a value like any other.
    value = orjson.loads(proto.decode(pb(b"\x4a\x00" * 300))[3])
    assert len(value["wide"]) == 300 and value["wide"][0]["f99"] == 0


def test_protobuf_large_legitimate_values_still_decode(proto):
    packed = b"\x1a" + uvarint(1_000_000) + b"\x01" * 1_000_000        # a million ones, packed
    with quick():
        sid, _g, fmt, decoded, problem = proto.decode(pb(packed))
    assert problem is None and len(orjson.loads(decoded)["xs"]) == 1_000_000


@pytest.mark.parametrize("raised", [RecursionError, MemoryError, RuntimeError, KeyError])
def test_protobuf_whatever_is_raised_on_a_value_is_a_mismatch(proto, monkeypatch, raised):
    from google.protobuf import json_format

    def boom(*_a: Any, **_k: Any) -> Any:
        raise raised("boom")
    monkeypatch.setattr(json_format, "MessageToDict", boom)
    dec = proto.compiled(proto.store.by_id(7))
    with pytest.raises(ValueMismatch):
        dec.decode(pb(b""), 6, [0])
    assert proto.decode(pb(b""))[4][0] == "mismatch"


@pytest.mark.parametrize("indexes, says", [
    (uvarint(2_000_000 << 1), "out of range"),                   # two million indexes claimed
    (uvarint(1 << 62), "out of range"),
    (uvarint(1), "out of range"),                                # a negative count (zigzag -1)
    (uvarint(50 << 1) + b"\x00\x00", "past the 2 bytes left"),   # 50 claimed, 2 bytes there
    (b"\xff" * 11, "longer than 10 bytes"),
])
def test_message_indexes_claims_past_the_bytes(indexes, says):
    with quick(0.1), pytest.raises(ValueMismatch, match=says):
        message_indexes(b"\x00" + indexes, 1)


# ---------------------------------------------------------------------------------------------------
# Hostile schemas, wherever they come from

DEEP_ARRAYS = "[" * 5000 + '"int"' + "]" * 5000                          # orjson does not read it
DEEP_RECORDS = "".join(f'{{"type":"record","name":"R{i}","fields":[{{"name":"f","type":'
                       for i in range(500)) + '"int"' + "}]}" * 500      # orjson does: 1,500 levels
WIDE = json.dumps({"type": "record", "name": "W", "fields": [{"name": f"f{i}", "type": "int"}
                                                             for i in range(MAX_SCHEMA_FIELDS + 1)]})
HUGE = json.dumps({"type": "record", "name": "W", "fields": [{"name": f"f{i}", "type": "int"}
                                                             for i in range(50_000)]})

HOSTILE_TEXT = [
    ("avro", DEEP_ARRAYS, f"nested more than {MAX_SCHEMA_DEPTH} levels"),
    ("avro", DEEP_RECORDS, f"nested more than {MAX_SCHEMA_DEPTH} levels"),
    ("json", DEEP_ARRAYS, f"nested more than {MAX_SCHEMA_DEPTH} levels"),
    ("json", '{"items":' * 500 + "{}" + "}" * 500, f"nested more than {MAX_SCHEMA_DEPTH} levels"),
    ("avro", WIDE, f"more than {MAX_SCHEMA_FIELDS} record fields"),
    ("avro", HUGE, "past the limit of 1048576"),
    ("protobuf", "message M {}" * 100_000, "past the limit of 1048576"),
]


@pytest.mark.parametrize("fmt, text, says", HOSTILE_TEXT)
def test_check_schema_text(fmt, text, says):
    with quick(), pytest.raises(SchemaError, match=says):
        check_schema_text(fmt, text)


@pytest.mark.parametrize("fmt, text, says", HOSTILE_TEXT)
def test_hostile_schemas_learned_from_schemas_records(fmt, text, says):
    # Learned (not before: a hostile schema reached fastavro's and jsonschema's recursion), and each value
    # naming it says which limit it is past; one longer than a schema may be is not even kept.
    key, value = schemas_record(Schema(fmt, text, (), 5, None, "t-value", 1))
    dec = PayloadDecoder(validate=True)            # a JSON Schema is read only to validate
    if len(text) > limits.MAX_SCHEMA_BYTES:
        with quick(), pytest.raises(SchemaError, match=says):
            dec.learn(key, value)
        assert dec.learned.by_id(5) is None and not dec.active
        return
    with quick():
        assert dec.learn(key, value) is not None
    problem = problem_of(dec, framed(5, b"\x00\x02"))
    assert problem[0] == "schema" and problem[1] == f"schema 5 ({fmt}) not usable: {problem[1].split(': ', 1)[1]}"
    assert says in problem[1], problem


@pytest.mark.parametrize("fmt, text, says", HOSTILE_TEXT)
def test_hostile_schemas_read_from_a_directory(tmp_path: Path, fmt, text, says):
    plain = tmp_path / ("5" + {"avro": ".avsc", "json": ".schema.json", "protobuf": ".proto"}[fmt])
    plain.write_text(text)
    as_json = tmp_path / "6.json"
    as_json.write_text(json.dumps(Schema(fmt, text, (), 6).registry_json()))
    for path in (plain, as_json):
        with quick(), pytest.raises(SchemaError, match=says) as caught:
            read_schema_file(path)
        assert str(path) in str(caught.value)


def test_a_schema_file_is_not_read_past_the_limit(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(store, "MAX_SCHEMA_BYTES", 1000)
    path = tmp_path / "1.avsc"
    path.write_text('"' + "x" * 5000 + '"')
    with pytest.raises(SchemaError, match="more than 4000 bytes"):
        read_schema_file(path)


def test_hostile_schemas_given_by_a_registry():
    class Answer:
        def __init__(self, text: str) -> None:
            self.schema_str, self.schema_type, self.references = text, "AVRO", []

    class Client:
        def get_schema(self, schema_id: int) -> Answer:
            return Answer({1: DEEP_RECORDS, 2: WIDE, 3: DEEP_ARRAYS}[schema_id])

    reg = RegistryStore("http://registry.invalid", client=Client())
    for sid, says in ((1, "nested more than"), (2, "record fields"), (3, "nested more than")):
        with quick():
            assert reg.by_id(sid) is None
        assert says in reg.errors[sid] and "not a usable schema" in reg.errors[sid]


@pytest.mark.parametrize("fmt, text, says", [
    ("avro", DEEP_RECORDS, "nested more than"),
    ("avro", '{"type":"record","name":"R","fields":[{"name":"r","type":"R"}]}', ""),      # names itself
    ("avro", "{{{ not json", "not JSON"),
    ("json", "{{{ not json", "not JSON"),
    ("json", "5", "not a valid JSON Schema"),
    ("protobuf", 'syntax = "proto3"; message M { strin a = 1; }', "protoc"),
    ("protobuf", 'syntax = "proto3"; ' + "message M { " * 200 + "}" * 200, "protoc"),
    ("protobuf", base64.b64encode(b"\xff\xfe\x00garbage" * 10).decode(), "not a base64 FileDescriptorProto"),
])
def test_hostile_schemas_are_not_usable_problems(fmt, text, says):
    # Through PayloadDecoder, as given in a store (no check on the way in): the compilers hold them too.
    for validate in (False, True):
        problem = problem_of(decoder(Schema(fmt, text, (), 9), validate=validate), framed(9, b"\x00\x02"))
        if fmt == "json" and not validate:
            continue                           # the schema of a JSON value is read only to validate
        assert problem[0] == "schema" and says in problem[1], problem


def descriptor(name: str = "x.proto") -> Any:
    from google.protobuf import descriptor_pb2
    return descriptor_pb2.FileDescriptorProto(name=name, package="p", syntax="proto3")


def serialized(proto: Any) -> str:
    return base64.b64encode(proto.SerializeToString()).decode()


def test_serialized_descriptor_nested_deep():
    f = descriptor()
    m = f.message_type.add(name="M0")
    for i in range(1, 5000):
        m = m.nested_type.add(name=f"M{i}")
    problem = problem_of(decoder(Schema("protobuf", serialized(f), (), 9)), framed(9, b"\x00"))
    assert problem[0] == "schema" and "not a base64 FileDescriptorProto" in problem[1], problem


def test_serialized_descriptor_with_ten_thousand_nested_types():
    f = descriptor()
    m = f.message_type.add(name="M")
    for i in range(10_000):
        m.nested_type.add(name=f"N{i}").field.add(name="a", number=1, type=9)     # string a = 1
    dec = decoder(Schema("protobuf", serialized(f), (), 9))
    indexes = uvarint(2 << 1) + uvarint(0) + uvarint(9_999 << 1)                     # [0, 9999]
    assert problem_of(dec, framed(9, indexes + b"\x0a\x01x")) is None
    assert dec.decode(framed(9, indexes + b"\x0a\x01x"))[3] == b'{"a":"x"}'
    past = uvarint(2 << 1) + uvarint(0) + uvarint(10_000 << 1)
    assert "message index 10000 at depth 1" in problem_of(dec, framed(9, past + b"\x0a\x01x"))[1]


@pytest.mark.parametrize("width", [10_000, 50_000])
def test_serialized_descriptor_of_a_wide_message(width):
    f = descriptor()
    m = f.message_type.add(name="M")
    wide = m.nested_type.add(name="Wide")
    for i in range(width):
        wide.field.add(name=f"f{i}", number=i + 1, type=5)                       # int32
    m.field.add(name="w", number=1, type=11, type_name=".p.M.Wide", label=3)   # repeated Wide w = 1
    dec = decoder(Schema("protobuf", serialized(f), (), 9))
    problem = problem_of(dec, framed(9, b"\x00" + b"\x0a\x00" * 1000))      # 1,000 empty Wide
    if width == 50_000:                   # protobuf (upb) takes messages of 64 kB at most
        assert problem[0] == "schema" and "exceeded maximum size" in problem[1], problem
    else:                                 # 10 million fields in 2,000 bytes
        assert problem[0] == "mismatch" and "fields in 2000 bytes" in problem[1], problem


def cycle(fmt: str, a: str, b: str, a_name: str, b_name: str) -> PayloadDecoder:
    return decoder(Schema(fmt, a, (Reference(b_name, "b", 1),), 1, None, "a", 1),
                   Schema(fmt, b, (Reference(a_name, "a", 1),), 2, None, "b", 1), validate=True)


def test_references_that_cycle():
    avro = cycle("avro", '{"type":"record","name":"A","fields":[{"name":"b","type":["null","B"]}]}',
                 '{"type":"record","name":"B","fields":[{"name":"a","type":["null","A"]}]}', "A", "B")
    problem = problem_of(avro, framed(1, b"\x00"))
    assert problem is None or problem[0] == "schema"
    text = cycle("protobuf", 'syntax = "proto3"; import "b.proto"; message A { B b = 1; }',
                 'syntax = "proto3"; import "a.proto"; message B { A a = 1; }', "a.proto", "b.proto")
    problem = problem_of(text, framed(1, b"\x00"))
    assert problem[0] == "schema" and "recursively imports itself" in problem[1]
    fa, fb = descriptor("a.proto"), descriptor("b.proto")
    fa.dependency.append("b.proto")
    fb.dependency.append("a.proto")
    fa.message_type.add(name="A")
    fb.message_type.add(name="B")
    problem = problem_of(cycle("protobuf", serialized(fa), serialized(fb), "a.proto", "b.proto"), framed(1, b"\x00"))
    assert problem[0] == "schema" and "b.proto" in problem[1]
    js = cycle("json", '{"type":"object","properties":{"b":{"$ref":"b.json"}}}',
               '{"type":"object","properties":{"a":{"$ref":"a.json"}}}', "a.json", "b.json")
    assert problem_of(js, framed(1, b'{"b": {"a": {"b": {}}}}')) is None
    assert problem_of(js, framed(1, b'{"b": 5}'))[0] == "mismatch"


def test_references_in_a_long_chain():
    # A chain of 100 schemas, each referencing the next: recursion stops at 32 (it had no bound for
    # serialized descriptors).
    protos, jsons = [], []
    for i in range(100):
        f = descriptor(f"f{i}.proto")
        refs: tuple[Reference, ...] = ()
        if i < 99:
            f.dependency.append(f"f{i + 1}.proto")
            refs = (Reference(f"f{i + 1}.proto", f"s{i + 1}", 1),)
        protos.append(Schema("protobuf", serialized(f), refs, i + 1, None, f"s{i}", 1))
        jsons.append(Schema("json", "{}", tuple(Reference(f"j{i + 1}", r.subject, 1) for r in refs), i + 1, None,
                            f"s{i}", 1))
    problem = problem_of(decoder(*protos), framed(1, b"\x00"))
    assert problem[0] == "schema" and "nested more than 32 deep" in problem[1]
    problem = problem_of(decoder(*jsons, validate=True), framed(1, b"{}"))
    assert problem[0] == "schema" and "nested more than 32 deep" in problem[1]


@pytest.mark.parametrize("obj, says", [
    ([1, 2], "not a Schema Registry schema"),
    ({"schema": 5}, "not a Schema Registry schema"),
    ({"schema": '"int"', "schemaType": 7}, "schemaType 7 is not"),
    ({"schema": '"int"', "schemaType": ["AVRO"]}, "schemaType"),
    ({"schema": '"int"', "references": {"a": 1}}, "not a list"),
    ({"schema": '"int"', "references": [{"name": "a", "subject": "b"}]}, "needs name, subject and version"),
    ({"schema": '"int"', "references": [{"name": "a", "subject": "b", "version": "x"}]}, "needs name"),
    ({"schema": '"int"', "references": [{"name": "a", "subject": "b", "version": 1}] * 1001}, "past the limit of 1000"),
    ({"schema": '"int"', "references": [orjson.loads(nested_json(900))]}, "needs name"),
])
def test_registry_json_of_other_shapes(obj, says):
    with quick(), pytest.raises(SchemaError, match=says) as caught:
        from_registry_json(obj, 1)
    assert len(str(caught.value)) < 300


def test_registry_json_odd_identities_are_left_out():
    s = from_registry_json({"schema": '"int"', "id": True, "version": 1 << 40, "guid": 5, "subject": []}, 3)
    assert (s.schema_id, s.version, s.guid, s.subject) == (3, None, None, None)


def test_schemas_records_of_other_shapes():
    key = b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    for value, says in ((b"[" * 2000, "not JSON"), (b'{"id": true, "schema": "\\"int\\""}', "without an id"),
                        (b'{"id": 1, "schema": 5}', "not a Schema Registry schema")):
        with pytest.raises(SchemaError, match=says):
            from_schemas_record(key, value)


def test_learned_schemas_are_held_to_a_total(monkeypatch):
    monkeypatch.setattr(store, "MAX_LEARNED_BYTES", 100)
    learned = LearnedStore()
    text = json.dumps({"type": "record", "name": "R", "fields": [{"name": "abcdef", "type": "int"}]})
    key, value = schemas_record(Schema("avro", text, (), 1, None, "a", 1))
    assert learned.learn(key, value) is not None
    key, value = schemas_record(Schema("avro", text, (), 2, None, "b", 1))
    with pytest.raises(SchemaError, match="more than 100 characters of schemas"):
        learned.learn(key, value)
    assert learned.by_id(2) is None and learned.by_id(1) is not None


# ---------------------------------------------------------------------------------------------------
# A Schema Registry that answers slowly, or with garbage


class Handler(http.server.BaseHTTPRequestHandler):
    answers: dict[str, tuple[float, int, bytes]] = {}      # path -> (seconds to wait, status, body); "trickle"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        wait, status, body = self.answers.get(self.path.split("?")[0], (0, 404, b'{"error_code": 40403, '
                                                                             b'"message": "Schema not found"}'))
        if body == b"trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(100):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            return
        time.sleep(wait)
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@contextlib.contextmanager
def registry(answers: dict[str, tuple[float, int, bytes]]) -> Iterator[str]:
    handler = type("H", (Handler,), {"answers": answers})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_registry_that_does_not_answer_in_time():
    with registry({"/schemas/ids/1": (5, 200, b'{"schema": "\\"int\\""}'),
                   "/schemas/ids/2": (0, 200, b"trickle")}) as url:
        reg = RegistryStore(url, timeout=0.3)
        with quick(1.5):
            assert reg.by_id(1) is None
        assert reg.errors[1].startswith(f"the registry at {url} did not answer")
        with quick(1.5):
            assert reg.by_id(2) is None                    # each read in time, the answer never whole
        assert reg.errors[2].startswith(f"the registry at {url} did not answer")     # within 0.9 s
        assert reg.by_id(1) is None                        # asked once
        with quick(1.5):
            assert reg.by_id(3) is None                    # not found: answered (a 404)
        assert "Schema not found" in reg.errors[3]


def test_a_registry_that_does_not_answer_is_given_up():
    with registry({f"/schemas/ids/{i}": (5, 200, b"{}") for i in range(1, 10)}) as url:
        reg = RegistryStore(url, timeout=0.2)
        with quick(3 * 0.6 + 1):
            for i in (1, 2, 3):
                assert reg.by_id(i) is None
        with quick(0.05):
            for i in range(4, 1000):
                assert reg.by_id(i) is None
        assert "not asked any more: it did not answer 3 look-ups in a row" in reg.errors.get(999)
        assert len(reg.errors) == 3                       # the ids asked after are not each kept
        dec = PayloadDecoder(reg)
        problem = dec.decode(framed(12345, b"\x02"))[4]
        assert problem[0] == "unknown" and "not asked any more" in problem[1]


GARBAGE = [
    (b"not json at all", "answered with what is not a schema"),
    (b"[1, 2, 3]", "answered with what is not a schema"),
    (b'"a string"', "answered with what is not a schema"),
    (b'{"schema": 5}', "not a Schema Registry schema"),
    (b'{"schema": "\\"int\\"", "schemaType": "COBOL"}', "COBOL"),
    (b'{"schema": "\\"int\\"", "references": 7}', ""),
    (b'{"schema": "\\"int\\"", "references": [{"name": 1}]}', ""),
    (orjson.dumps({"schema": DEEP_RECORDS}), "nested more than"),
    (b"[" * 100_000 + b"]" * 100_000, ""),                  # Python's json recurses: RecursionError
    (b"\xff\xfe\x00\x01", ""),
]


def test_a_registry_that_answers_garbage():
    with registry({f"/schemas/ids/{i}": (0, 200, body) for i, (body, _s) in enumerate(GARBAGE, 1)}) as url:
        reg = RegistryStore(url, timeout=1)
        for i, (_body, says) in enumerate(GARBAGE, 1):
            with quick():
                assert reg.by_id(i) is None
            assert reg.errors[i].startswith(f"the registry at {url} ") and says in reg.errors[i], reg.errors[i]
            assert len(reg.errors[i]) < 500
        dec = PayloadDecoder(reg)
        problem = dec.decode(framed(1, b"\x02"))[4]
        assert problem[0] == "unknown" and "not a schema" in problem[1]


def test_a_registry_that_finds_nothing_is_given_up(monkeypatch):
    monkeypatch.setattr("payloads.registry.REGISTRY_MISSES", 5)
    with registry({}) as url:
        reg = RegistryStore(url, timeout=1)
        for i in range(1, 6):
            assert reg.by_id(i) is None
        with quick(0.05):
            assert all(reg.by_id(i) is None for i in range(6, 10_000))
        assert "5 look-ups found no schema" in reg.errors.get(9999)


def test_the_client_is_given_a_timeout():
    reg = RegistryStore("http://127.0.0.1:9", timeout=0.5)
    rest = getattr(reg.client, "_rest_client", None)
    if rest is not None:
        assert rest.timeout == 0.5 and rest.max_retries == 1
    with quick():
        assert reg.by_id(1) is None                        # connection refused: quickly
    assert "did not answer" in reg.errors[1]


def test_every_error_raised_here_is_a_payload_error():
    for cls in (ValueMismatch, SchemaError):
        assert issubclass(cls, PayloadError)


def test_a_backtracking_pattern_and_fanned_out_references_cost_their_value_alone():
    """Found by reading the validator (tests/fuzz/regressions/schema_learning): a pattern that backtracks
    exponentially took minutes per value, and $refs fanning out 2^40 checks; each is now that value's mismatch."""
    from payloads.jsonvalues import PATTERN_SECONDS
    redos = JsonDecoder(Schema("json", '{"type": "string", "pattern": "^(a|aa)+$"}'), lambda r: None, validate=True)
    t0 = time.perf_counter()
    with pytest.raises(ValueMismatch, match=r"pattern '\^\(a\|aa\)\+\$' took more than 0.1 s"):
        redos.decode(b'"' + b"a" * 60 + b'!"', 0, None)
    assert time.perf_counter() - t0 < 10 * PATTERN_SECONDS
    assert redos.decode(b'"aaa"', 0, None) == b'"aaa"'
    with pytest.raises(ValueMismatch, match="does not match"):
        redos.decode(b'"ab"', 0, None)
    levels = {f"l{i}": {"allOf": [{"$ref": f"#/definitions/l{i + 1}"}, {"$ref": f"#/definitions/l{i + 1}"}]}
              for i in range(40)}
    levels["l40"] = {"type": "integer"}
    fanout = JsonDecoder(Schema("json", json.dumps({"definitions": levels, "$ref": "#/definitions/l0"})),
                         lambda r: None, validate=True)
    t0 = time.perf_counter()
    with pytest.raises(ValueMismatch, match="validation past its budget of keyword checks"):
        fanout.decode(b"1", 0, None)
    assert time.perf_counter() - t0 < 5
