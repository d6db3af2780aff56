"""The Avro reader gives fastavro's values for every value fastavro reads, says what is wrong with a damaged
one (at most reading less than fastavro, never something else), and holds its budgets against hostile
bytes and schemas: depth, counts past the bytes, records that never end. Compiled and pure alike."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import random
import importlib.util
import sys
import time
from pathlib import Path

import fastavro
import pytest

from payloads import avrofast
from payloads.avro import AvroDecoder
from payloads.errors import SchemaError, ValueMismatch
from payloads.limits import MAX_DEPTH
from payloads.render import to_json
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


def _decoder(schema: dict, impl=avrofast) -> AvroDecoder:
    return AvroDecoder(Schema("avro", json.dumps(schema)), lambda ref: None, impl)


def _pure():
    """payloads/avrofast.py as Python, whichever build the process imported."""
    spec = importlib.util.spec_from_file_location("kd_avrofast_pure", REPO / "payloads" / "avrofast.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PURE = _pure()


def _named(value):
    """fastavro's ``(name, value)`` branches of a union of several named types as ``{name: value}``."""
    if type(value) is tuple:
        return {value[0]: _named(value[1])}
    if type(value) is dict:
        return {k: _named(v) for k, v in value.items()}
    if type(value) is list:
        return [_named(v) for v in value]
    return value


def _exact(node):
    """A parsed schema whose decimals fastavro renders exactly: it rounds a damaged value's digits to the
    declared precision, where the reader here gives them all."""
    if type(node) is dict:
        return {k: 1000 if k == "precision" else _exact(v) for k, v in node.items()}
    if type(node) is list:
        return [_exact(v) for v in node]
    return node


def _fastavro(dec: AvroDecoder, data: bytes) -> object:
    """The oracle: fastavro's reader (safe here: the values are small), as JSON or "error"."""
    fo = io.BytesIO(data)
    try:
        value = fastavro.schemaless_reader(fo, _exact(dec.parsed), None, return_named_type=True,
                                           return_named_type_override=True)
        if fo.tell() != len(data):
            return "error"
        return to_json(_named(value))
    except Exception:  # noqa: BLE001 - fastavro raises whatever the bytes lead to
        return "error"


def _ours(dec: AvroDecoder, data: bytes) -> object:
    try:
        return dec.decode(data, 0, None)
    except ValueMismatch as exc:
        return f"mismatch: {exc}"


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
    dec, pure = _decoder(schema), _decoder(schema, PURE)
    for data in _values(schema, make, n):
        ours = _ours(dec, data)
        assert ours == _fastavro(dec, data) == _ours(pure, data), data


@pytest.mark.parametrize(("schema", "make", "n"), CASES, ids=[c[0]["name"] for c in CASES])
def test_a_damaged_value_is_a_mismatch_or_fastavros_value(schema, make, n):
    """Every cut of a value, bytes added after it and bytes changed inside it: compiled and pure say the same,
    and what they read, fastavro reads alike; what fastavro cannot read, they call a mismatch."""
    dec, pure = _decoder(schema), _decoder(schema, PURE)
    r = random.Random(7)
    for data in _values(schema, make, 8):
        damaged = [data[:k] for k in range(len(data))] + [data + b"\x00", data + b"\x80\x80"]
        for _ in range(60):
            b = bytearray(data)
            b[r.randrange(len(b))] = r.randrange(256)
            damaged.append(bytes(b))
        for d in damaged:
            ours = _ours(dec, d)
            assert ours == _ours(pure, d), d
            if not str(ours).startswith("mismatch"):
                assert ours == _fastavro(dec, d), d
            elif _fastavro(dec, d) == "error":
                assert str(ours).startswith("mismatch: "), d


def test_edges_of_the_wire_format():
    for impl in (avrofast, PURE):
        dec = _decoder({"type": "array", "items": "long"}, impl)
        # A block with a negative count carries its size; the largest and smallest longs; a varint too long.
        assert dec.decode(bytes([0x03, 0x04, 0x02, 0x04, 0x00]), 0, None) == b"[1,2]"
        big = _values({"type": "array", "items": "long"}, lambda i: [2**63 - 1, -2**63], 1)[0]
        assert dec.decode(big, 0, None) == b"[9223372036854775807,-9223372036854775808]"
        with pytest.raises(ValueMismatch, match="a number longer than 64 bits at byte 1"):
            dec.decode(b"\x02" + b"\xff" * 10 + b"\x01\x00", 0, None)
        boolean = _decoder({"type": "boolean"}, impl)
        with pytest.raises(ValueMismatch, match="a boolean of 2 at byte 0"):
            boolean.decode(b"\x02", 0, None)
        assert boolean.decode(b"\x01", 0, None) == b"true"
        with pytest.raises(ValueMismatch, match="1 byte left after the value"):
            boolean.decode(b"\x01\x00", 0, None)
        text = _decoder({"type": "string"}, impl)
        with pytest.raises(ValueMismatch, match="text that is not UTF-8, ending at byte 2"):
            text.decode(b"\x02\xff", 0, None)
        with pytest.raises(ValueMismatch, match="a negative length"):
            text.decode(b"\x01", 0, None)
        # A length that would overflow a C index is a cut value, not a wild read.
        with pytest.raises(ValueMismatch, match="with 1 bytes left"):
            text.decode(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01" + b"x", 0, None)
        # A block count of -2^63 (found by fuzzing: its negation stayed negative in C, not in Python).
        with pytest.raises(ValueMismatch, match="a block of -9223372036854775808 items at byte 0"):
            dec.decode(b"\xff" * 9 + b"\x01" + b"\x00", 0, None)
        union = _decoder(["null", "string"], impl)
        with pytest.raises(ValueMismatch, match="union branch -1 at byte 0 of a union of 2"):
            union.decode(b"\x01", 0, None)      # fastavro took -1 as the last branch


def test_logical_types_fastavro_converts_read_as_fastavro_reads_them():
    import uuid
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tm", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "l", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "d", "type": {"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 5,
                               "scale": 2}},
        {"name": "either", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 1},
                                    "bytes"]},
        {"name": "odd", "type": {"type": "string", "logicalType": "not-a-known-type"}}]}
    values = [{"u": uuid.UUID(int=i * 7919), "t": dt.time(i % 24, i % 60, 1, 5000), "tm": dt.time(1, 2, 3, i),
               "l": dt.datetime(2024, 5, 1, 12, i % 60, 7, 123000), "d": decimal.Decimal(f"-{i}.25"),
               "either": [None, decimal.Decimal("12.5"), b"raw"][i % 3], "odd": "x" * i} for i in range(30)]
    dec, pure = _decoder(schema), _decoder(schema, PURE)
    for data in _values(schema, lambda i: values[i], 30):
        assert _ours(dec, data) == _fastavro(dec, data) == _ours(pure, data)
    bad = _values(schema, lambda i: {**values[1], "u": "not a uuid"}, 1)[0]
    assert _ours(dec, bad).startswith("mismatch: a uuid that does not convert")


def test_a_recursive_value_stops_at_the_depth_limit():
    chain = {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}
    for impl in (avrofast, PURE):
        dec = _decoder(chain, impl)
        assert dec.decode(b"\x02" * (MAX_DEPTH - 1) + b"\x00", 0, None).count(b"next") == MAX_DEPTH
        # Past it, however deep the bytes go (a million levels took the process down with SIGSEGV).
        for n in (MAX_DEPTH, 1_000_000):
            t0 = time.perf_counter()
            with pytest.raises(ValueMismatch, match=f"nested more than {MAX_DEPTH} levels deep at byte {MAX_DEPTH}"):
                dec.decode(b"\x02" * n + b"\x00", 0, None)
            assert time.perf_counter() - t0 < 1
    # Arrays and maps count as levels too (each is a level of the JSON).
    nested = {"type": "record", "name": "A", "fields": [{"name": "a", "type": {"type": "array", "items": "A"}}]}
    dec = _decoder(nested)
    with pytest.raises(ValueMismatch, match="nested more than"):
        dec.decode(b"\x02" * 1000 + b"\x00", 0, None)


def test_a_record_that_never_ends_is_a_schema_error():
    for schema in ({"type": "record", "name": "R", "fields": [{"name": "r", "type": "R"}]},
                   ["null", {"type": "record", "name": "S", "fields": [
                       {"name": "x", "type": "int"},
                       {"name": "t", "type": {"type": "record", "name": "T", "fields": [{"name": "s", "type": "S"}]}}]}]):
        with pytest.raises(SchemaError, match="contains itself on every path"):
            _decoder(schema)


def test_a_wild_count_of_empty_items_is_a_mismatch_not_a_loop():
    """Nulls take no bytes: a block claiming 2^40 of them would have been appended for ever, and blocks
    claiming 60,000 each would add up; a value holds at most MAX_EMPTY_ITEMS beyond its size."""
    for impl in (avrofast, PURE):
        dec = _decoder({"type": "array", "items": "null"}, impl)
        wild = bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x00])              # zig-zag 2^40, then the end
        with pytest.raises(ValueMismatch, match="a block of 1099511627776 items with 1 bytes left"):
            dec.decode(wild, 0, None)
        assert dec.decode(bytes([0x06, 0x00]), 0, None) == b"[null,null,null]"
        many = bytes([0xC0, 0xA9, 0x07]) * 100 + b"\x00"                     # 100 blocks of 60,000
        with pytest.raises(ValueMismatch, match="a block of 60000 items"):
            dec.decode(many, 0, None)
