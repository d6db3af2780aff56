"""The pure-Python twins of ``_speedups.pyx``: the same names, arguments and results.

They run when kdissect runs as Python (``KDISSECT_PURE``, a checkout edited since its build, or no
compiler); ``speedups.py`` chooses. ``tests/hotpath/test_speedups.py`` holds each pair to the same
results.
"""
from __future__ import annotations

import zlib
from typing import Any

import orjson

from hotpath.crc import crc32c as _crc32c_package

# RecordsSummary.to_dict()'s keys, in its order: the order summary_json's values come in.
SUMMARY_KEYS = ("total_bytes", "magics", "batch_count", "record_count", "legacy_wrappers", "first_offset",
                "last_offset", "first_timestamp", "max_timestamp", "codec", "producer_id", "producer_epoch",
                "base_sequence", "transactional", "control", "crc_checked", "crc_failures", "first_crc",
                "partial_tail", "tail_bytes", "error", "error_offset")


def crc32c_of(b: bytes, start: int, end: int) -> int:
    """CRC-32C of ``b[start:end]``."""
    if not 0 <= start <= end <= len(b):
        raise ValueError(f"bytes {start}..{end} of {len(b)}")
    return _crc32c_package(memoryview(b)[start:end])


def frame_share(buf: bytes, start: int, caplen: int, l3: int, ethertype_at: int, count: int) -> int:
    """The share (0..count-1) of the TCP/IPv4 connection of the frame ``buf[start:start + caplen]``,
    whose IP header is at ``l3`` and ethertype, if any, at ``ethertype_at``: CRC-32 of the smaller of
    the connection's 4-tuple key and its reverse, modulo ``count``. -1 for any other frame."""
    if start < 0 or caplen < 0 or start + caplen > len(buf) or count < 1:
        return -1
    if l3 < 0 or (ethertype_at >= 0 and ethertype_at > l3 - 2) or caplen < l3 + 40:
        return -1
    ip = start + l3
    if ethertype_at >= 0 and buf[start + ethertype_at:start + ethertype_at + 2] != b"\x08\x00":
        return -1
    offset = buf[ip + 32]       # the TCP header's data offset, in its high nibble
    if buf[ip] != 0x45 or buf[ip + 9] != 6 or buf[ip + 6] & 0x3F or buf[ip + 7] or offset < 0x50:
        return -1               # not IPv4 without options, not TCP, a fragment, or a short TCP header
    payload_at = l3 + 20 + ((offset >> 4) << 2)
    ip_end = l3 + int.from_bytes(buf[ip + 2:ip + 4], "big")
    if payload_at > ip_end or ip_end > caplen:
        return -1
    key = buf[ip + 12:ip + 24]      # source, destination, source port, destination port
    reverse = key[4:8] + key[0:4] + key[10:12] + key[8:10]
    return zlib.crc32(min(key, reverse)) % count


def summary_json(values: tuple[Any, ...]) -> bytes | None:
    """A records summary's dict (``SUMMARY_KEYS`` and these ``values``) as compact JSON, as orjson
    writes it; None where orjson would not write it (an int past 64 bits)."""
    try:
        return orjson.dumps(dict(zip(SUMMARY_KEYS, values)))
    except orjson.JSONEncodeError:
        return None


def find(text: bytes, key: bytes, start: int) -> int:
    """``text.find(key, start)`` for ``0 <= start <= len(text)``, else -1."""
    return text.find(key, start) if 0 <= start <= len(text) else -1


def reserve_list(values: list[Any], n: int) -> int:
    """A Python list cannot be told to make room: nothing to do."""
    return 0


def clear_keeping_capacity(values: list[Any]) -> None:
    """Empty ``values`` (Python frees its storage)."""
    values.clear()
