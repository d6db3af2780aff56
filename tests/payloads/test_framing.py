"""Framing: the schema id or GUID in front of a value or in its header, Protobuf's message indexes."""

from __future__ import annotations

import io
import uuid

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from payloads import ValueMismatch, message_indexes, prefix, unframed_format
from payloads.framing import header_ref, unframed_json


def test_magic_zero_and_a_four_byte_id():
    assert prefix(b"\x00\x00\x00\x01\x07abc") == (263, None, 5)
    assert prefix(b"\x00\x00\x00\x00\x07") == (7, None, 5)


def test_what_is_not_framing():
    assert prefix(b"\x00\x00\x00\x00") is None                  # too short
    assert prefix(b"\x00\x00\x00\x00\x00\x00\x00\x07") is None   # id 0: a big-endian number
    assert prefix(b"\x00\x80\x00\x00\x01") is None               # past a Java int
    assert prefix(b"{\"a\":1}") is None


def test_magic_one_is_a_guid_candidate():
    guid = uuid.uuid4()
    assert prefix(b"\x01" + guid.bytes + b"rest") == (None, str(guid), 17)
    assert header_ref(b"\x01" + guid.bytes + b"\x00") == (None, str(guid), 17)
    assert header_ref(b"\x00\x00\x00\x00\x05") == (5, None, 5)
    assert header_ref(b"\x02xx") is None and header_ref(None) is None


@pytest.mark.parametrize("indexes", [[0], [1], [0, 2], [3, 1, 4], [127, 300]])
def test_message_indexes_as_confluent_kafka_writes_them(indexes):
    sid = SchemaId("PROTOBUF", 9, None, indexes)
    data = sid.id_to_bytes() + b"MSG"
    assert prefix(data)[:2] == (9, None)
    got, at = message_indexes(data, 5)
    assert got == indexes and data[at:] == b"MSG"
    # ... and confluent-kafka reads back what we read
    back = SchemaId("PROTOBUF")
    rest = back.from_bytes(io.BytesIO(data))
    assert back.message_indexes == got and rest.read() == b"MSG"


def test_bad_message_indexes_are_a_mismatch():
    with pytest.raises(ValueMismatch):
        message_indexes(b"\x00\x00\x00\x00\x01\x04", 5)         # count 2, cut short
    with pytest.raises(ValueMismatch):
        message_indexes(b"\x00\x00\x00\x00\x01\x03", 5)         # count -2
    with pytest.raises(ValueMismatch):
        message_indexes(b"\x00\x00\x00\x00\x01" + b"\xff" * 11, 5)


@given(st.binary(max_size=64))
def test_message_indexes_read_or_refuse(data):
    try:
        indexes, at = message_indexes(data, 0)
    except ValueMismatch:
        return
    assert indexes and all(i >= 0 for i in indexes) and 0 < at <= len(data)


@pytest.mark.parametrize("value,fmt", [
    (b'{"a": [1, 2]}', "json-text"), (b"[]", "json-text"), (b"42", "json-text"), (b'"x"', "json-text"),
    (b"hello", "text"), ("grüße ✓".encode(), "text"), (b"", "text"), (b"line\ttab\n", "text"),
    (b"\xff\xfe", "binary"), (b"ab\x00cd", "binary"), (b"{broken", "text"), (b"2024 report", "text"),
])
def test_unframed_formats(value, fmt):
    assert unframed_format(value) == fmt


def test_unframed_json_is_rendered_compactly():
    assert unframed_json(b'{ "a" : [1, 2] }') == ("json-text", b'{"a":[1,2]}')
    assert unframed_json(b'{ "a" : 1 }', want=False) == ("json-text", None)
