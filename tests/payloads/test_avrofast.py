"""The translated Avro reader gives the fastavro path's JSON for every value, and hands back to fastavro
(the same answer, the same error message) every value it cannot read as fastavro would."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import random
import sys
from pathlib import Path

import fastavro
import pytest

from payloads import avrofast
from payloads.avro import AvroDecoder
from payloads.errors import ValueMismatch
from payloads.schema import Schema

REPO = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(REPO / "samples"))
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_payloads import EVENT, event  # noqa: E402
from record_payloads import ORDER_V1, ORDER_V2, order  # noqa: E402

UTC = dt.timezone.utc
# Every type the program reads, nested: fixed, float, maps of arrays, a recursive list, a three-way union.
EVERYTHING = {"type": "record", "name": "All", "namespace": "kd.t", "fields": [
    {"name": "flag", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "i", "type": "int"},
    {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    {"name": "grid", "type": {"type": "map", "values": {"type": "array", "items": ["null", "long", "string"]}}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
    {"name": "next", "type": ["null", "All"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "choice", "type": ["null", "kd.t.E", "Four", {"type": "record", "name": "X", "fields": []}]},
]}


def everything(i: int, depth: int = 0) -> dict:
    r = random.Random(i)
    return {"flag": bool(i % 2), "f": r.random() * 10 ** r.randint(-40, 38) * (-1) ** i, "i": r.randint(-2**31, 2**31 - 1),
            "fx": bytes(r.randrange(256) for _ in range(4)),
            "grid": {f"k{j}✓": [None, r.randint(-2**63, 2**63 - 1), "v" * j][: j % 4] for j in range(i % 4)},
            "at": dt.datetime(1, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=r.randint(0, 10**17)),
            "price": decimal.Decimal(r.randint(-10**8, 10**8)).scaleb(-3),
            "next": everything(i + 1, depth + 1) if depth < i % 3 else None,
            "e": "AB"[i % 2], "choice": [None, "B", b"four", {}][i % 4]}


CASES = [(EVENT, event, 300), (ORDER_V1, order, 60), (ORDER_V2, lambda i: order(i, True), 60),
         (EVERYTHING, everything, 200)]


def _decoder(schema: dict) -> AvroDecoder:
    return AvroDecoder(Schema("avro", json.dumps(schema)), lambda ref: None)


def _both(dec: AvroDecoder, data: bytes) -> tuple[object, object]:
    """(fast path, fastavro path): the JSON, or the mismatch message."""
    out = []
    for fast in (dec.fast, None):
        saved, dec.fast = dec.fast, fast
        try:
            out.append(dec.decode(data, 0, None))
        except ValueMismatch as exc:
            out.append(f"mismatch: {exc}")
        finally:
            dec.fast = saved
    return out[0], out[1]


def _values(schema: dict, make, n: int) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for i in range(n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, make(i))
        out.append(buf.getvalue())
    return out


@pytest.mark.parametrize(("schema", "make", "n"), CASES, ids=[c[0]["name"] for c in CASES])
def test_every_value_reads_as_fastavro_reads_it(schema, make, n):
    dec = _decoder(schema)
    assert dec.fast is not None
    for data in _values(schema, make, n):
        fast, slow = _both(dec, data)
        assert fast == slow and not str(fast).startswith("mismatch"), data


@pytest.mark.parametrize(("schema", "make", "n"), CASES, ids=[c[0]["name"] for c in CASES])
def test_a_damaged_value_gets_fastavros_answer(schema, make, n):
    """Every cut of a value, bytes added after it and bytes changed inside it."""
    dec = _decoder(schema)
    r = random.Random(7)
    for data in _values(schema, make, 8):
        damaged = [data[:k] for k in range(len(data))] + [data + b"\x00", data + b"\x80\x80"]
        for _ in range(60):
            b = bytearray(data)
            b[r.randrange(len(b))] = r.randrange(256)
            damaged.append(bytes(b))
        for d in damaged:
            fast, slow = _both(dec, d)
            assert fast == slow, d


def test_edges_of_the_wire_format():
    dec = _decoder({"type": "array", "items": "long"})
    # A block with a negative count carries its size; the largest and smallest longs; a varint too long.
    assert _both(dec, bytes([0x03, 0x04, 0x02, 0x04, 0x00])) == (b"[1,2]", b"[1,2]")
    big = _values({"type": "array", "items": "long"}, lambda i: [2**63 - 1, -2**63], 1)[0]
    assert _both(dec, big)[0] == b"[9223372036854775807,-9223372036854775808]"
    assert dec.fast.read(b"\x02" + b"\xff" * 10 + b"\x01\x00", 0) is avrofast.MISS
    boolean = _decoder({"type": "boolean"})
    assert boolean.fast.read(b"\x02", 0) is avrofast.MISS       # not 0 or 1: fastavro says what it is
    assert _both(boolean, b"\x01") == (b"true", b"true")


def test_schemas_only_fastavro_reads_stay_fastavros():
    for logical in ({"type": "string", "logicalType": "uuid"}, {"type": "int", "logicalType": "time-millis"},
                    {"type": "long", "logicalType": "local-timestamp-millis"},
                    {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 5}):
        assert _decoder({"type": "record", "name": "R", "fields": [{"name": "x", "type": logical}]}).fast is None


def test_a_deep_recursive_value_is_fastavros():
    chain = {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}
    dec = _decoder(chain)
    data = b"\x02" * 100 + b"\x00"
    assert dec.fast.read(data, 0) is avrofast.MISS
    assert dec.decode(data, 0, None).count(b"next") == 101


def test_a_wild_count_of_empty_items_is_a_mismatch_not_a_loop():
    """Nulls take no bytes: a block claiming 2^40 of them would have been appended for ever."""
    dec = _decoder({"type": "array", "items": "null"})
    wild = bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x00])              # zig-zag 2^40, then the end
    with pytest.raises(ValueMismatch, match="a block of 1099511627776 items with 1 bytes left"):
        dec.decode(wild, 0, None)
    assert _both(dec, bytes([0x06, 0x00])) == (b"[null,null,null]", b"[null,null,null]")
    # A length that would overflow a C index is a cut value, fastavro's to describe.
    text = _decoder({"type": "string"})
    assert text.fast.read(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01" + b"x", 0) is avrofast.MISS
