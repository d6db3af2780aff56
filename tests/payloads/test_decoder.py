"""Values serialized by confluent-kafka's own serializers (mock:// registry) decode to what they were given;
what does not decode is a problem naming why, never an exception."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import orjson
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from payloads import DirectoryStore, LearnedStore, PayloadDecoder, Schema, schemas_record, write_schema
from payloads.registry import RegistryStore
from payloads.store import _Index

UTC = dt.timezone.utc
CTX = SerializationContext("t", MessageField.VALUE)
RECORD = {"type": "record", "name": "R", "namespace": "kd", "fields": [
    {"name": "n", "type": "long"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "blob", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "maybe", "type": ["null", "double"]},
    {"name": "nan", "type": "double"},
]}


def registry(name: str):
    return SchemaRegistryClient.new_client({"url": f"mock://{name}"})


def store_of(client, *ids: int) -> _Index:
    idx = _Index()
    for i in ids:
        s = client.get_schema(i)
        idx.add(Schema({"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}[s.schema_type or "AVRO"],
                       s.schema_str, (), i))
    return idx


def test_avro_renderings():
    sr = registry("renderings")
    ser = AvroSerializer(sr, json.dumps(RECORD))
    value = {"n": -3, "price": decimal.Decimal("-1.500"), "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
             "local": dt.datetime(2024, 1, 2, 3, 4, 5, 7000), "day": dt.date(2000, 2, 29),
             "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "blob": b"\x00\xff\x10\x20", "maybe": None,
             "nan": float("nan")}
    data = ser(value, CTX)
    sid, guid, fmt, decoded, problem = PayloadDecoder(store_of(sr, 1)).decode(data)
    assert (sid, guid, fmt, problem) == (1, None, "avro", None)
    assert orjson.loads(decoded) == {
        "n": -3, "price": "-1.500", "at": "2024-01-02T03:04:05.000006Z", "local": "2024-01-02T03:04:05.007000",
        "day": "2000-02-29", "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "blob": "AP8QIA==", "maybe": None,
        "nan": None}


def test_avro_references_resolve_by_subject_and_version():
    sr = registry("refs")
    from confluent_kafka.schema_registry import Schema as SrSchema, SchemaReference
    address = {"type": "record", "name": "Address", "namespace": "kd", "fields": [{"name": "city", "type": "string"}]}
    sr.register_schema("address", SrSchema(json.dumps(address), "AVRO"))
    person = {"type": "record", "name": "Person", "namespace": "kd",
              "fields": [{"name": "home", "type": "kd.Address"}]}
    ref = SchemaReference("kd.Address", "address", 1)
    sr.register_schema("person-value", SrSchema(json.dumps(person), "AVRO", [ref]))
    ser = AvroSerializer(sr, SrSchema(json.dumps(person), "AVRO", [ref]), conf={"auto.register.schemas": False,
                                                                               "use.latest.version": True})
    data = ser({"home": {"city": "Lyon"}}, SerializationContext("person", MessageField.VALUE))
    store = RegistryStore("mock://refs", client=sr)
    sid, _g, fmt, decoded, problem = PayloadDecoder(store).decode(data)
    assert (fmt, problem, orjson.loads(decoded)) == ("avro", None, {"home": {"city": "Lyon"}})
    # Without the referenced schema: the schema is not usable, said once per value.
    bare = _Index()
    bare.add(store.by_id(sid))
    *_, problem = PayloadDecoder(bare).decode(data)
    assert problem[0] == "schema" and "reference kd.Address (address version 1) not found" in problem[1]


def test_header_guid_framing():
    sr = registry("guid")
    ser = AvroSerializer(sr, json.dumps("string"), conf={"schema.id.serializer": header_schema_id_serializer})
    headers: list = []
    data = ser("hi", SerializationContext("t", MessageField.VALUE, headers))
    (name, header), = headers
    assert name == "__value_schema_id" and data == b"\x04hi"
    rs = sr.get_version("t-value", 1)
    idx = _Index()
    idx.add(Schema("avro", rs.schema.schema_str, (), rs.schema_id, rs.guid))
    assert PayloadDecoder(idx).decode(data, header) == (rs.schema_id, rs.guid, "avro", b'"hi"', None)


def test_json_schema_values_and_validation():
    sr = registry("json")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    data = JSONSerializer(json.dumps(schema), sr)({"a": 5}, CTX)
    assert PayloadDecoder(store_of(sr, 1)).decode(data)[2:] == ("json", b'{"a":5}', None)
    wrong = data[:5] + b'{"a": "five"}'
    assert PayloadDecoder(store_of(sr, 1)).decode(wrong)[3:] == (b'{"a":"five"}', None)   # not asked to validate
    *_, decoded, problem = PayloadDecoder(store_of(sr, 1), validate=True).decode(wrong)
    assert decoded is None and problem == ("mismatch", "does not match schema 1 (json): a: 'five' is not of type "
                                                       "'integer'")


def test_mismatches_and_unknown_ids_are_problems():
    sr = registry("bad")
    data = AvroSerializer(sr, json.dumps(RECORD["fields"][0]["type"]))(7, CTX)    # "long"
    dec = PayloadDecoder(store_of(sr, 1))
    assert dec.decode(data + b"\x01")[4] == ("mismatch", "does not match schema 1 (avro): 1 byte left after the value")
    assert dec.decode(data[:5])[4][0] == "mismatch"
    assert dec.decode(b"\x00\x00\x00\x00\x09\x02")[4] == (
        "unknown", "schema id 9 unknown (not in the schemas given, nor learned from the capture's _schemas records)")
    # Nothing given nor learned: framing only, no problem.
    assert PayloadDecoder().decode(b"\x00\x00\x00\x00\x09\x02") == (9, None, None, None, None)


def test_a_schema_that_does_not_compile_is_reported_not_raised():
    idx = _Index()
    idx.add(Schema("avro", '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}', (), 3))
    idx.add(Schema("protobuf", "syntax = \"proto3\"; message M { strin a = 1; }", (), 4))
    dec = PayloadDecoder(idx)
    for sid in (3, 4):
        *_, problem = dec.decode(b"\x00\x00\x00\x00" + bytes([sid]) + b"\x00\x02")
        assert problem[0] == "schema", problem


def test_protobuf_from_text_with_well_known_types_and_nested_indexes():
    proto = ('syntax = "proto3"; package p; import "google/protobuf/timestamp.proto";\n'
             'message A { string x = 1; message B { google.protobuf.Timestamp t = 1; int64 big = 2; } }')
    idx = _Index()
    idx.add(Schema("protobuf", proto, (), 5))
    dec = PayloadDecoder(idx)
    from google.protobuf import descriptor_pool  # noqa: F401 - the message built by a pool of its own
    cls = dec.compiled(idx.by_id(5)).message_class([0, 0])
    msg = cls()
    msg.t.FromSeconds(86400)
    msg.big = 1 << 40
    data = b"\x00\x00\x00\x00\x05" + b"\x04\x00\x00" + msg.SerializeToString()      # indexes [0, 0]
    assert dec.decode(data) == (5, None, "protobuf",
                                b'{"t":"1970-01-02T00:00:00Z","big":"1099511627776"}', None)
    *_, problem = dec.decode(b"\x00\x00\x00\x00\x05" + b"\x02\x06" + msg.SerializeToString())  # index [3]
    assert problem[0] == "mismatch" and "message index 3" in problem[1]


def test_schemas_learned_from_schemas_records_and_written_as_registry_json(tmp_path: Path):
    learned = LearnedStore()
    s = Schema("avro", '"string"', (), 12, None, "t-value", 1)
    key, value = schemas_record(s)
    assert json.loads(key) == {"keytype": "SCHEMA", "subject": "t-value", "version": 1, "magic": 1}
    dec = PayloadDecoder(learned=learned)
    assert not dec.active
    assert dec.learn(b'{"keytype":"NOOP","magic":0}', None) is None
    assert dec.learn(key, value) == s and dec.active
    assert dec.learn(key, value) is None                               # seen twice (written, then read)
    assert dec.decode(b"\x00\x00\x00\x00\x0c\x04hi")[2:] == ("avro", b'"hi"', None)
    path = write_schema(tmp_path, s)
    assert path.name == "12.json"
    assert DirectoryStore(tmp_path).by_id(12) == s


def test_preloaded_schemas_count_from_their_date_on():
    clock = [0]
    learned = LearnedStore(lambda: clock[0])
    learned.preload([(10, Schema("avro", '"string"', (), 4))])
    assert learned.by_id(4) is None
    clock[0] = 11
    assert learned.by_id(4) is not None


def test_directory_store_reads_every_layout(tmp_path: Path):
    (tmp_path / "1.json").write_text(json.dumps({"schema": '"int"'}))                       # /schemas/ids/1
    (tmp_path / "2.avsc").write_text('"string"')
    (tmp_path / "3.proto").write_text('syntax = "proto3"; message M { string a = 1; }')
    (tmp_path / "4.schema.json").write_text('{"type": "string"}')
    (tmp_path / "orders-v2.json").write_text(json.dumps({"subject": "orders", "version": 2, "id": 9,
                                                          "schemaType": "JSON", "schema": "{}"}))
    d = DirectoryStore(tmp_path)
    assert [d.by_id(i).format for i in (1, 2, 3, 4, 9)] == ["avro", "avro", "protobuf", "json", "json"]
    assert d.by_subject("orders", 2).schema_id == 9
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(Exception, match="junk.json"):
        DirectoryStore(tmp_path)


def test_registry_store_caches_what_it_fetched(tmp_path: Path):
    sr = registry("cache")
    AvroSerializer(sr, json.dumps("string"))("x", CTX)
    text = sr.get_schema(1).schema_str
    store = RegistryStore("mock://cache", cache=tmp_path, client=sr)
    assert store.by_id(1).text == text
    assert store.by_id(2) is None and "Schema Not Found" in store.errors[2]
    assert json.loads((tmp_path / "1.json").read_text())["schema"] == text
    # A second decode reads the cache first: no registry needed.
    again = RegistryStore("http://127.0.0.1:9", cache=tmp_path, client=object())
    assert again.by_id(1).text == text


def test_the_memo_keeps_no_amplified_json_and_a_raising_decoder_costs_its_value_alone():
    """Found by fuzzing (payload_decoder): a few bytes of Avro nulls render as ~300 KB of JSON, and the memo
    kept 4,096 of them (1.4 GB). And whatever a decoder raises is that value's problem, not the caller's."""
    idx = _Index()
    idx.add(Schema("avro", json.dumps({"type": "array", "items": "null"}), (), 7))
    dec = PayloadDecoder(idx)
    for n in range(1, 64):
        value = b"\x00\x00\x00\x00\x07" + bytes([0xC0, 0xA9, 0x07]) + bytes([n * 2]) + b"\x00"   # 60,000 + n nulls
        sid, _guid, fmt, decoded, problem = dec.decode(value)
        assert (sid, fmt, problem) == (7, "avro", None) and decoded.count(b"null") == 60_000 + n
    assert len(dec._memo) == 0
    assert dec.decode(b"\x00\x00\x00\x00\x07\x02\x00")[3] == b"[null]" and len(dec._memo) == 1

    class Broken:
        def decode(self, data, start, indexes):
            raise RuntimeError("a bug")
    schema = idx.by_id(7)
    dec._compiled[id(schema)] = Broken()
    dec._fast.clear()
    assert dec.decode(b"\x00\x00\x00\x00\x07\x04\x00") == (None, None, None, None,
                                                          ("error", "decoding raised RuntimeError: a bug"))
