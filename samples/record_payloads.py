#!/usr/bin/env python3
"""Record the record-payload samples: Schema Registry serializers producing to tansu, consumed back.

    sudo python samples/record_payloads.py [--out samples/payloads] [--only NAME[,NAME]]

Per scenario, as ``samples/record.py`` does: a fresh netns ``kd-<name>`` (lo MTU 1500, GSO off),
tansu inside it, ``tcpdump --immediate-mode`` on its lo (stopped once the file stops growing, so
nothing is left in the kernel's ring), and the clients in a child process inside the netns. The
clients are confluent-kafka's ``AvroSerializer``, ``ProtobufSerializer`` and ``JSONSerializer``
with the ``mock://`` Schema Registry their library provides, one producer per codec (none, gzip,
snappy, lz4, zstd), then a consumer group reading every topic back.

Each sample is a folder ``<out>/<name>/`` holding ``<name>.pcap``, ``truth.json`` (what the
producers were given, record by record, with the offsets their delivery reports named; nothing in
it comes from the capture) and ``schemas/``: what the registry held, exported as the registry's
own JSON (``{id}.json``: ``schema``, ``schemaType``, ``references``, ``id``, ``guid``, ``subject``,
``version``) — the folder ``kdissect decode --schemas`` reads.

Values in ``truth.json`` that JSON has no type for are tagged: ``{"$bytes": base64}``,
``{"$decimal": "12.30"}``, ``{"$timestamp-millis": epoch ms}``, ``{"$date": days}``. Protobuf
values are the producer's message in Protobuf's canonical JSON mapping (``json_format``).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.brokers import netns, record_scenarios, run_tansu, tcpdump  # noqa: E402

TANSU_PORT = 9092
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 6            # records per producer: small samples, every codec
REGISTRY = "mock://kdissect-samples"
UTC = dt.timezone.utc

# -- schemas --------------------------------------------------------------------------------

ORDER_V1 = {
    "type": "record", "name": "Order", "namespace": "kd.shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ship_on", "type": {"type": "int", "logicalType": "date"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line",
            "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
                       {"name": "price", "type": "double"}]}}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "digest", "type": "bytes"},
        {"name": "payment", "type": ["null",
                                     {"type": "record", "name": "Card", "fields": [{"name": "last4", "type": "string"}]},
                                     {"type": "record", "name": "Transfer", "fields": [{"name": "iban", "type": "string"}]}],
         "default": None},
    ],
}
# v2 adds a field with a default: a compatible change, a second schema id on the same subject.
ORDER_V2 = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "channel", "type": "string", "default": "web"}]}

PROTO = """\
syntax = "proto3";
package kd.shop;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/duration.proto";

message Item {
  string sku = 1;
  int32 qty = 2;
}

message Basket {
  string id = 1;
  repeated Item items = 2;
  google.protobuf.Timestamp created = 3;
  google.protobuf.StringValue coupon = 4;
  int64 total_cents = 5;
  bytes token = 6;
  enum State { OPEN = 0; PAID = 1; ABANDONED = 2; }
  State state = 7;
  map<string, string> labels = 8;
  google.protobuf.Duration ttl = 9;
  double weight = 10;
}
"""

EVENT_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event", "type": "object",
    "properties": {
        "id": {"type": "integer"}, "kind": {"type": "string", "enum": ["click", "view", "buy"]},
        "user": {"type": "string"}, "score": {"type": "number"}, "flags": {"type": "array", "items": {"type": "boolean"}},
        "meta": {"type": ["object", "null"]},
    },
    "required": ["id", "kind", "user"],
}


# -- values -----------------------------------------------------------------------------------

def order(i: int, v2: bool = False) -> dict:
    base = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    value = {
        "id": 1000 + i, "customer": f"customer-{i % 4}", "note": None if i % 3 else f"note {i} ✓",
        "amount": decimal.Decimal(f"{i * 7}.{i % 10}5"), "placed_at": base + dt.timedelta(seconds=i, milliseconds=7 * i),
        "ship_on": dt.date(2024, 5, 2) + dt.timedelta(days=i % 5), "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "lines": [{"sku": f"sku-{j}", "qty": j + 1, "price": 1.25 * (j + 1)} for j in range(i % 3 + 1)],
        "tags": {"src": "sample", "n": str(i)}, "digest": bytes((i * 13 + j) % 256 for j in range(8)),
        "payment": [None, ("kd.shop.Card", {"last4": f"{i:04d}"}), ("kd.shop.Transfer", {"iban": f"DE{i:020d}"})][i % 3],
    }
    if v2:
        value["channel"] = ["web", "app"][i % 2]
    return value


def tagged(value: object) -> object:
    """A producer input as JSON, types JSON lacks tagged (see the module docstring)."""
    if isinstance(value, decimal.Decimal):
        return {"$decimal": format(value, "f")}
    if isinstance(value, dt.datetime):
        return {"$timestamp-millis": int(value.timestamp() * 1000)}
    if isinstance(value, dt.date):
        return {"$date": (value - dt.date(1970, 1, 1)).days}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, tuple):          # an Avro union branch chosen by name
        return {"$branch": value[0], "value": tagged(value[1])}
    if isinstance(value, dict):
        return {k: tagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tagged(v) for v in value]
    return value


def event(i: int) -> dict:
    return {"id": i, "kind": ["click", "view", "buy"][i % 3], "user": f"u{i % 5}", "score": i / 8,
            "flags": [bool(i & 1), bool(i & 2)], "meta": None if i % 2 else {"ip": f"10.0.0.{i}", "n": i}}


# -- clients (run inside the netns) -----------------------------------------------------------

class Truth:
    def __init__(self) -> None:
        self.records: list[dict] = []
        self.notes: list[str] = []
        self.clients: list[dict] = []

    def delivered(self, client_id: str, key: object, value: object, headers: bool = False):
        def cb(err, msg) -> None:
            entry = {"client_id": client_id, "topic": msg.topic(), "partition": msg.partition(),
                     "offset": msg.offset() if err is None else None, "error": err.name() if err else None,
                     "key": key, "value": value}
            if headers:
                entry["header_framed"] = True
            self.records.append(entry)
        return cb


def _serializing_producer(bs: str, client_id: str, codec: str, key_ser, value_ser):
    from confluent_kafka import SerializingProducer
    return SerializingProducer({"bootstrap.servers": bs, "client.id": client_id, "compression.type": codec,
                                "linger.ms": 50, "key.serializer": key_ser, "value.serializer": value_ser})


def _registry():
    from confluent_kafka.schema_registry import SchemaRegistryClient
    return SchemaRegistryClient.new_client({"url": REGISTRY})


def _consume(bs: str, topics: list[str], expect: int, group: str, truth: Truth, timeout: float = 40) -> None:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bs, "client.id": f"{group}-consumer", "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 8000})
    c.subscribe(topics)
    got = 0
    deadline = time.monotonic() + timeout
    while got < expect and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
    c.close()
    truth.clients.append({"client_id": f"{group}-consumer", "role": "consumer", "topics": topics, "consumed": got})
    if got < expect:
        truth.notes.append(f"{group}: consumed {got} of {expect}")


def _export_schemas(sr, out: Path) -> None:
    """What the mock registry holds, as the registry's JSON per id (``GET /schemas/ids/{id}`` plus the
    identity fields), Protobuf schemas as .proto text (what a registry serves; the Python serializer
    registers a base64 descriptor, which a registry turns into text)."""
    out.mkdir(parents=True, exist_ok=True)
    for subject in sr.get_subjects():
        for version in sr.get_versions(subject):
            rs = sr.get_version(subject, version)
            s = rs.schema
            text = s.schema_str
            if s.schema_type == "PROTOBUF" and "syntax" not in text:
                text = PROTO             # the serializer's base64 descriptor of PROTO
            doc = {"subject": subject, "version": version, "id": rs.schema_id, "guid": rs.guid,
                   "schemaType": s.schema_type or "AVRO",
                   "references": [{"name": r.name, "subject": r.subject, "version": r.version}
                                  for r in s.references or ()],
                   "schema": text}
            (out / f"{rs.schema_id}.json").write_text(json.dumps(doc, indent=2) + "\n")


def sc_avro(bs: str, out: Path, truth: Truth) -> None:
    from confluent_kafka.schema_registry import header_schema_id_serializer
    from confluent_kafka.schema_registry.avro import AvroSerializer
    sr = _registry()
    key_ser = AvroSerializer(sr, json.dumps("string"))
    n = 0
    for codec in CODECS:
        topic = f"avro-{codec}"
        cid = f"kd-avro-{codec}"
        p = _serializing_producer(bs, cid, codec, key_ser, AvroSerializer(sr, json.dumps(ORDER_V1)))
        for i in range(PER_CODEC):
            k, v = f"order-{i}", order(n + i)
            p.produce(topic, key=k, value=v, on_delivery=truth.delivered(cid, k, tagged(v)))
        p.flush(30)
        n += PER_CODEC
    # Schema evolution on one topic: v1 then v2 values, two value schema ids.
    cid = "kd-avro-evolve"
    p1 = _serializing_producer(bs, cid, "zstd", key_ser, AvroSerializer(sr, json.dumps(ORDER_V1)))
    for i in range(3):
        k, v = f"order-{i}", order(100 + i)
        p1.produce("avro-evolve", key=k, value=v, on_delivery=truth.delivered(cid, k, tagged(v)))
    p1.flush(30)
    p2 = _serializing_producer(bs, cid, "zstd", key_ser, AvroSerializer(sr, json.dumps(ORDER_V2)))
    for i in range(3):
        k, v = f"order-{i}", order(103 + i, v2=True)
        p2.produce("avro-evolve", key=k, value=v, on_delivery=truth.delivered(cid, k, tagged(v)))
    p2.flush(30)
    # Newer serializers: the schema's GUID in the __value_schema_id header, the value unprefixed.
    cid = "kd-avro-headers"
    value_ser = AvroSerializer(sr, json.dumps(ORDER_V1), conf={"schema.id.serializer": header_schema_id_serializer})
    p3 = _serializing_producer(bs, cid, "lz4", key_ser, value_ser)
    for i in range(3):
        k, v = f"order-{i}", order(200 + i)
        p3.produce("avro-headers", key=k, value=v, headers=[],
                   on_delivery=truth.delivered(cid, k, tagged(v), headers=True))
    p3.flush(30)
    topics = [f"avro-{c}" for c in CODECS] + ["avro-evolve", "avro-headers"]
    _consume(bs, topics, len(truth.records), "kd-avro-readers", truth)
    _export_schemas(sr, out)


def _basket_class():
    """The Basket message compiled from PROTO by grpcio-tools' protoc, as a producer's generated code is."""
    import importlib
    tmp = Path(tempfile.mkdtemp(prefix="kd-proto-"))
    (tmp / "kd_shop.proto").write_text(PROTO)
    from grpc_tools import protoc
    include = str(Path(protoc.__file__).parent / "_proto")
    if protoc.main(["protoc", f"-I{tmp}", f"-I{include}", f"--python_out={tmp}", "kd_shop.proto"]) != 0:
        raise RuntimeError("protoc failed")
    sys.path.insert(0, str(tmp))
    return importlib.import_module("kd_shop_pb2")


def basket(pb, i: int):
    b = pb.Basket(id=f"basket-{i}", total_cents=(1 << 40) + i, token=bytes(range(i % 7 + 1)), state=i % 3,
                  weight=0.5 * i)
    for j in range(i % 3):
        b.items.add(sku=f"sku-{j}", qty=j + 1)
    b.created.FromDatetime(dt.datetime(2024, 5, 1, 12, 0, i, 250000 * (i % 4), tzinfo=UTC))
    if i % 2:
        b.coupon.value = f"SAVE{i}"
    b.labels["src"] = "sample"
    if i % 3 == 0:
        b.ttl.FromSeconds(60 * i + 1)
    return b


def sc_protobuf(bs: str, out: Path, truth: Truth) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import StringSerializer
    from google.protobuf import json_format
    pb = _basket_class()
    sr = _registry()
    n = 0
    for codec in CODECS:
        topic = f"proto-{codec}"
        cid = f"kd-proto-{codec}"
        ser = ProtobufSerializer(pb.Basket, sr, {"use.deprecated.format": False})
        p = _serializing_producer(bs, cid, codec, StringSerializer("utf_8"), ser)
        for i in range(PER_CODEC):
            k, msg = f"basket-{n + i}", basket(pb, n + i)
            v = json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                          always_print_fields_with_no_presence=True)
            p.produce(topic, key=k, value=msg, on_delivery=truth.delivered(cid, k, v))
        p.flush(30)
        n += PER_CODEC
    _consume(bs, [f"proto-{c}" for c in CODECS], len(truth.records), "kd-proto-readers", truth)
    _export_schemas(sr, out)


def sc_json(bs: str, out: Path, truth: Truth) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import StringSerializer
    sr = _registry()
    n = 0
    for codec in CODECS:
        topic = f"json-{codec}"
        cid = f"kd-json-{codec}"
        p = _serializing_producer(bs, cid, codec, StringSerializer("utf_8"),
                                  JSONSerializer(json.dumps(EVENT_SCHEMA), sr))
        for i in range(PER_CODEC):
            k, v = f"user-{(n + i) % 5}", event(n + i)
            p.produce(topic, key=k, value=v, on_delivery=truth.delivered(cid, k, v))
        p.flush(30)
        n += PER_CODEC
    _consume(bs, [f"json-{c}" for c in CODECS], len(truth.records), "kd-json-readers", truth)
    _export_schemas(sr, out)


def sc_mixed(bs: str, out: Path, truth: Truth) -> None:
    """Framed JSON Schema values and plain JSON on one topic: a second client, no registry."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import StringSerializer
    sr = _registry()
    cid = "kd-mixed-registry"
    p = _serializing_producer(bs, cid, "snappy", StringSerializer("utf_8"), JSONSerializer(json.dumps(EVENT_SCHEMA), sr))
    for i in range(PER_CODEC):
        k, v = f"user-{i % 5}", event(i)
        p.produce("events", key=k, value=v, on_delivery=truth.delivered(cid, k, v))
    p.flush(30)
    cid = "kd-mixed-plain"
    plain = Producer({"bootstrap.servers": bs, "client.id": cid, "compression.type": "gzip", "linger.ms": 50})
    for i in range(PER_CODEC, 2 * PER_CODEC):
        k, v = f"user-{i % 5}", event(i)
        plain.produce("events", key=k.encode(), value=json.dumps(v).encode(),
                      on_delivery=truth.delivered(cid, k, v))
    plain.flush(30)
    _consume(bs, ["events"], len(truth.records), "kd-mixed-readers", truth)
    _export_schemas(sr, out)


def sc_schemas_topic(bs: str, out: Path, truth: Truth) -> None:
    """A registry's own records in ``_schemas`` (written, then read back from the start as a registry
    does when it starts), then Avro values whose ids they explain."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import StringSerializer
    sr = _registry()
    # Register first (as the serializer would on its first value), so the ids are the registry's.
    sr.register_schema("orders-value", _schema_obj(ORDER_V1))
    sr.register_schema("orders-value", _schema_obj(ORDER_V2))
    store = Producer({"bootstrap.servers": bs, "client.id": "kd-registry", "acks": "all"})
    # The layout a Schema Registry writes (kafkastore.topic): a NOOP first, a config record, one
    # SCHEMA record per registered version.
    store.produce("_schemas", key=json.dumps({"keytype": "NOOP", "magic": 0}).encode(), value=None)
    store.produce("_schemas", key=json.dumps({"keytype": "CONFIG", "subject": None, "magic": 0}).encode(),
                  value=json.dumps({"compatibilityLevel": "BACKWARD"}).encode())
    for version in sr.get_versions("orders-value"):
        rs = sr.get_version("orders-value", version)
        key = {"keytype": "SCHEMA", "subject": "orders-value", "version": version, "magic": 1}
        value = {"subject": "orders-value", "version": version, "id": rs.schema_id,
                 "schema": rs.schema.schema_str, "deleted": False}
        store.produce("_schemas", key=json.dumps(key).encode(), value=json.dumps(value).encode())
    store.flush(30)
    reader = Consumer({"bootstrap.servers": bs, "client.id": "kd-registry-reader", "group.id": "kd-registry-reader",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.subscribe(["_schemas"])
    got, deadline = 0, time.monotonic() + 30
    while got < 4 and time.monotonic() < deadline:
        m = reader.poll(0.2)
        if m is not None and not m.error():
            got += 1
    reader.close()
    truth.clients.append({"client_id": "kd-registry-reader", "role": "consumer", "topics": ["_schemas"],
                          "consumed": got})
    cid = "kd-orders"
    for schema, start in ((ORDER_V1, 0), (ORDER_V2, 4)):
        p = _serializing_producer(bs, cid, "gzip", StringSerializer("utf_8"),
                                  AvroSerializer(sr, json.dumps(schema), conf={"auto.register.schemas": False,
                                                                               "use.latest.version": False}))
        for i in range(start, start + 4):
            k, v = f"order-{i}", order(i, v2=schema is ORDER_V2)
            p.produce("orders", key=k, value=v, on_delivery=truth.delivered(cid, k, tagged(v)))
        p.flush(30)
    _consume(bs, ["orders"], 8, "kd-orders-readers", truth)
    _export_schemas(sr, out)


def sc_bad_values(bs: str, out: Path, truth: Truth) -> None:
    """Good Avro values and, from a second producer writing bytes itself (as a client with a broken
    serializer does), a framed value cut short (corrupt) and one naming a schema id the registry
    never gave (unknown), on the same topic."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext, StringSerializer
    sr = _registry()
    cid = "kd-good"
    ser = AvroSerializer(sr, json.dumps(ORDER_V1))
    p = _serializing_producer(bs, cid, "none", StringSerializer("utf_8"), ser)
    for i in range(4):
        k, v = f"order-{i}", order(i)
        p.produce("orders", key=k, value=v, on_delivery=truth.delivered(cid, k, tagged(v)))
    p.flush(30)
    good = ser(order(9), SerializationContext("orders", MessageField.VALUE))
    cid = "kd-broken"
    raw = Producer({"bootstrap.servers": bs, "client.id": cid, "linger.ms": 50})
    for k, v, what in ((b"order-corrupt", good[:len(good) // 2], "corrupt"),
                       (b"order-unknown", b"\x00\x00\x00\x03\xe7" + good[5:], "unknown")):
        cb = truth.delivered(cid, k.decode(), {"$raw": base64.b64encode(v).decode()})

        def noted(err, msg, cb=cb, what=what) -> None:
            cb(err, msg)
            truth.records[-1]["expect"] = what
        raw.produce("orders", key=k, value=v, on_delivery=noted)
    raw.flush(30)
    for i in range(4, 6):
        k, v = f"order-{i}", order(i)
        p.produce("orders", key=k, value=v, on_delivery=truth.delivered("kd-good", k, tagged(v)))
    p.flush(30)
    _consume(bs, ["orders"], len(truth.records), "kd-orders-readers", truth)
    _export_schemas(sr, out)


# -- hostile values: what anyone who can produce to a topic can send ----------------------------

NODE = {"type": "record", "name": "Node", "namespace": "kd.hostile",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
BLANKS = {"type": "record", "name": "Blanks", "namespace": "kd.hostile",
          "fields": [{"name": "blanks", "type": {"type": "array", "items": "null"}}]}
TREE_PROTO = """\
syntax = "proto3";
package kd.hostile;

message Tree {
  int32 v = 1;
  Tree child = 2;
}
"""


def _tree_bytes(depth: int) -> bytes:
    """A Tree message nested ``depth`` deep, as Protobuf's wire format writes it (field 2, length-delimited)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)
    inner = b"\x08\x01"                       # v = 1
    for _ in range(depth):
        inner = b"\x08\x01\x12" + varint(len(inner)) + inner
    return inner


def _hostile_schemas(first_id: int) -> list[tuple[int, str, str, str]]:
    """(id, schemaType, schema text, what is wrong with it) of the SCHEMA records a hostile client writes
    into ``_schemas``."""
    deep: object = "int"
    for _ in range(300):
        deep = {"type": "array", "items": deep}
    wide = {"type": "record", "name": "Wide", "fields": [{"name": f"f{i}", "type": "int"} for i in range(20_000)]}
    endless = {"type": "record", "name": "Endless", "fields": [{"name": "again", "type": "Endless"}]}
    return [(first_id, "AVRO", json.dumps(deep), "nested 600 levels deep"),
            (first_id + 1, "AVRO", json.dumps(endless), "a record that contains itself on every path"),
            (first_id + 2, "AVRO", json.dumps(wide), "20,000 fields"),
            (first_id + 3, "AVRO", "{\"type\": \"record\", \"name\": ", "not JSON"),
            (first_id + 4, "PROTOBUF", "syntax = \"proto3\";\nmessage Broken {\n  int32 = ;\n", "protoc rejects it")]


def sc_hostile_values(bs: str, out: Path, truth: Truth) -> None:
    """Well-formed values beside hostile ones on the same topics, the hostile ones written by a client
    producing bytes itself: an Avro value of a recursive schema nested 150,000 deep (it took a decoder
    down with SIGSEGV), blocks of nulls claiming 2^40 items and 100 x 60,000, a Protobuf message nested
    3,000 deep, JSON nested 300 (past what a JSON writer renders) and 100,000 deep, and ``_schemas``
    records whose schemas are hostile, with values naming them."""
    import hashlib

    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import StringSerializer
    sr = _registry()
    node_id = sr.register_schema("nodes-value", _schema_obj(NODE))
    blanks_id = sr.register_schema("blanks-value", _schema_obj(BLANKS))
    tree_id = sr.register_schema("trees-value", Schema(TREE_PROTO, "PROTOBUF"))
    event_id = sr.register_schema("events-value", Schema(json.dumps(EVENT_SCHEMA), "JSON"))

    def framed(sid: int, body: bytes) -> bytes:
        return b"\x00" + sid.to_bytes(4, "big") + body

    good = "kd-good"
    nodes = _serializing_producer(bs, good, "none", StringSerializer("utf_8"), AvroSerializer(sr, json.dumps(NODE)))
    events = _serializing_producer(bs, good + "-json", "none", StringSerializer("utf_8"),
                                   JSONSerializer(json.dumps(EVENT_SCHEMA), sr))
    plain = Producer({"bootstrap.servers": bs, "client.id": good + "-raw", "linger.ms": 50})

    def good_values(start: int) -> None:
        for i in range(start, start + 2):
            chain = None
            for j in range(i % 3 + 1):
                chain = {"v": j, "next": chain}
            nodes.produce("nodes", key=f"node-{i}", value=chain, on_delivery=truth.delivered(good, f"node-{i}", chain))
            k, v = f"user-{i}", event(i)
            events.produce("events", key=k, value=v, on_delivery=truth.delivered(good + "-json", k, v))
            blanks = {"blanks": [None] * i}
            plain.produce("blanks", key=f"blanks-{i}".encode(), value=framed(blanks_id, bytes([i * 2]) + (b"\x00" if i else b"")),
                          on_delivery=truth.delivered(good + "-raw", f"blanks-{i}", blanks))
            tree = {"v": 1, "child": {"v": 1}} if i % 2 else {"v": 1}
            plain.produce("trees", key=f"tree-{i}".encode(), value=framed(tree_id, b"\x00" + _tree_bytes(i % 2)),
                          on_delivery=truth.delivered(good + "-raw", f"tree-{i}", tree))
        nodes.flush(30)
        events.flush(30)
        plain.flush(30)

    good_values(0)
    cid = "kd-hostile"
    raw = Producer({"bootstrap.servers": bs, "client.id": cid, "linger.ms": 50, "message.max.bytes": 2_000_000})
    store = Producer({"bootstrap.servers": bs, "client.id": "kd-registry", "acks": "all"})
    hostile_schemas = _hostile_schemas(900)
    for sid, kind, text, _what in hostile_schemas:
        key = {"keytype": "SCHEMA", "subject": f"learned-{sid}-value", "version": 1, "magic": 1}
        value = {"subject": f"learned-{sid}-value", "version": 1, "id": sid, "schemaType": kind, "schema": text,
                 "deleted": False}
        store.produce("_schemas", key=json.dumps(key).encode(), value=json.dumps(value).encode())
    store.flush(30)
    hostile = [("nodes", b"deep", framed(node_id, b"\x00\x02" * 150_000 + b"\x00\x00"), "nested 150,000 deep"),
               ("blanks", b"blanks-wild", framed(blanks_id, bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x00])),
                "a block of 2^40 nulls"),
               ("blanks", b"blanks-many", framed(blanks_id, bytes([0xC0, 0xA9, 0x07]) * 100 + b"\x00"),
                "100 blocks of 60,000 nulls"),
               ("trees", b"tree-deep", framed(tree_id, b"\x00" + _tree_bytes(3000)), "a message nested 3,000 deep"),
               ("events", b"json-300", framed(event_id, b"[" * 300 + b"]" * 300), "JSON nested 300 deep"),
               ("events", b"json-deep", framed(event_id, b"[" * 100_000), "JSON nested 100,000 deep, cut"),
               ("nodes", b"cut", framed(node_id, b"\x00\x02\x00"), "cut short")]
    hostile += [("learned", f"learned-{sid}".encode(), framed(sid, b"\x00\x00"), f"its schema: {what}")
                for sid, _kind, _text, what in hostile_schemas]
    for topic, k, v, what in hostile:
        cb = truth.delivered(cid, k.decode(), {"$sha256": hashlib.sha256(v).hexdigest(), "$size": len(v)})

        def noted(err, msg, cb=cb, what=what) -> None:
            cb(err, msg)
            truth.records[-1]["expect"] = what
        raw.produce(topic, key=k, value=v, on_delivery=noted)
    raw.flush(30)
    good_values(2)
    topics = ["nodes", "blanks", "trees", "events", "learned", "_schemas"]
    _consume(bs, topics, len(truth.records) + len(hostile_schemas), "kd-hostile-readers", truth, timeout=60)
    _export_schemas(sr, out)


def _schema_obj(schema: dict):
    from confluent_kafka.schema_registry import Schema
    return Schema(json.dumps(schema), "AVRO")


SCENARIOS = {
    "avro": sc_avro,
    "protobuf": sc_protobuf,
    "json": sc_json,
    "mixed-json": sc_mixed,
    "schemas-topic": sc_schemas_topic,
    "bad-values": sc_bad_values,
    "hostile-values": sc_hostile_values,
}


def run_client(name: str, bootstrap: str, folder: str) -> None:
    truth = Truth()
    out = Path(folder)
    SCENARIOS[name](bootstrap, out / "schemas", truth)
    import confluent_kafka
    import fastavro
    import google.protobuf
    v = confluent_kafka.version()            # a str in 2.16, a (str, int) tuple in older releases
    doc = {"sample": name, "registry": REGISTRY,
           "libraries": {"confluent-kafka": v[0] if isinstance(v, tuple) else v,
                         "librdkafka": confluent_kafka.libversion()[0], "fastavro": fastavro.__version__,
                         "protobuf": google.protobuf.__version__},
           "clients": truth.clients, "notes": truth.notes,
           "records": sorted(truth.records, key=lambda r: (r["topic"], r["partition"], r["offset"] or -1))}
    (out / "truth.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def record(name: str, out_dir: Path) -> None:
    folder = out_dir / name
    with tempfile.TemporaryDirectory(prefix="kd-pay-") as tmp, ExitStack() as stack:
        work = Path(tmp) / name
        work.mkdir()
        ns = stack.enter_context(netns(f"kd-pay-{name}"))
        bs = stack.enter_context(run_tansu(TANSU_PORT, ns=ns, log=Path(tmp) / "tansu.log"))
        pcap = work / f"{name}.pcap"
        with tcpdump(pcap, ns=ns, immediate=True, bpf=["tcp", "port", str(TANSU_PORT)]):
            with open(Path(tmp) / "client.log", "wb") as log:
                rc = subprocess.call(["ip", "netns", "exec", ns, sys.executable, __file__, "--client", name,
                                      "--bootstrap", bs, "--folder", str(work)],
                                     stdout=log, stderr=subprocess.STDOUT, timeout=300)
            if rc != 0:
                sys.stderr.write((Path(tmp) / "client.log").read_text(errors="replace")[-4000:])
                raise RuntimeError(f"{name}: client process failed (rc={rc})")
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(work, folder)
    truth = json.loads((folder / "truth.json").read_text())
    failed = [r for r in truth["records"] if r["error"]]
    print(f"{name}: {(folder / f'{name}.pcap').stat().st_size} bytes, {len(truth['records'])} records "
          f"({len(failed)} failed), schemas {sorted(p.name for p in (folder / 'schemas').iterdir())}, "
          f"notes {truth['notes']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "payloads"))
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default="", help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        run_client(args.client, args.bootstrap, args.folder)
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tcpdump)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record_scenarios(SCENARIOS, args.only, lambda name: record(name, out))


if __name__ == "__main__":
    main()
