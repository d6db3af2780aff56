"""Kafka 0.7 frames built by hand from the wire format (no dependency on the dissector).

Used where no real 0.7 peer can send the bytes: the broker's side of every
exchange, compressed and nested sets, corrupt CRCs, per-partition errors.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

PRODUCE, FETCH, MULTIFETCH, MULTIPRODUCE, OFFSETS = range(5)


def message(payload: bytes, codec: int | None = None, *, bad_crc: bool = False) -> bytes:
    """Magic 0 without a codec, magic 1 (attributes = codec) with one."""
    crc = zlib.crc32(payload) ^ (1 if bad_crc else 0)
    if codec is None:
        return struct.pack(">ibI", 5 + len(payload), 0, crc) + payload
    return struct.pack(">ibbI", 6 + len(payload), 1, codec, crc) + payload


def gzip_wrapper(inner_set: bytes) -> bytes:
    return message(gzip.compress(inner_set), 1)


def snappy_wrapper(inner_set: bytes, xerial: bool = True) -> bytes:
    raw = bytes(cramjam.snappy.compress_raw(inner_set))
    if xerial:   # what snappy-java's SnappyOutputStream (Kafka 0.7.2) writes
        raw = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw
    return message(raw, 2)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _tp(topic: str, partition: int) -> bytes:
    t = topic.encode()
    return struct.pack(">h", len(t)) + t + struct.pack(">i", partition)


def produce(topic: str, partition: int, messages: bytes) -> bytes:
    return frame(struct.pack(">h", PRODUCE) + _tp(topic, partition) + struct.pack(">i", len(messages)) + messages)


def fetch(topic: str, partition: int, offset: int, max_size: int = 1 << 20) -> bytes:
    return frame(struct.pack(">h", FETCH) + _tp(topic, partition) + struct.pack(">qi", offset, max_size))


def offsets(topic: str, partition: int, time: int = -1, max_number: int = 1) -> bytes:
    return frame(struct.pack(">h", OFFSETS) + _tp(topic, partition) + struct.pack(">qi", time, max_number))


def multifetch(entries: list[tuple[str, int, int, int]]) -> bytes:
    body = struct.pack(">hh", MULTIFETCH, len(entries))
    for topic, partition, offset, max_size in entries:
        body += _tp(topic, partition) + struct.pack(">qi", offset, max_size)
    return frame(body)


def multiproduce(entries: list[tuple[str, int, bytes]]) -> bytes:
    body = struct.pack(">hh", MULTIPRODUCE, len(entries))
    for topic, partition, messages in entries:
        body += _tp(topic, partition) + struct.pack(">i", len(messages)) + messages
    return frame(body)


def fetch_response(messages: bytes = b"", error: int = 0) -> bytes:
    return frame(struct.pack(">h", error) + messages)


def offsets_response(values: list[int], error: int = 0) -> bytes:
    return frame(struct.pack(">hi", error, len(values)) + b"".join(struct.pack(">q", v) for v in values))


def multifetch_response(sets: list[tuple[int, bytes]], error: int = 0) -> bytes:
    body = struct.pack(">h", error)
    for err, messages in sets:
        body += struct.pack(">ih", 2 + len(messages), err) + messages
    return frame(body)
