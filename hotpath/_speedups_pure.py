"""The pure-Python twins of ``_speedups.pyx``: the same names, arguments and results.

One is elsewhere: ``frame_share``'s is ``capture.shard.frame_share``, which follows the rules of the
packet parser it stands for (``capture.packet.fast_ipv4``) rather than a second copy of them here.

They run when kdissect runs as Python (``KDISSECT_PURE``, a checkout edited since its build, or no
compiler); ``speedups.py`` chooses. ``tests/hotpath/test_speedups.py`` holds each pair to the same
results.
"""
from __future__ import annotations

from collections.abc import Callable
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


def summary_json(values: tuple[Any, ...]) -> bytes | None:
    """A records summary's dict (``SUMMARY_KEYS`` and these ``values``) as compact JSON, as orjson
    writes it; None where orjson would not write it (an int past 64 bits)."""
    try:
        return orjson.dumps(dict(zip(SUMMARY_KEYS, values)))
    except orjson.JSONEncodeError:
        return None


def plain_json(value: Any, summary_type: type, summary_values: Callable[[Any], tuple[Any, ...]]) -> bytes | None:
    """``value`` as compact JSON, as orjson writes it, an object of exactly ``summary_type`` written
    as ``summary_json(summary_values(object))``; None for any other object orjson would hand to a
    default (bytes, dataclasses) or a value it refuses."""
    def summary(obj: Any) -> orjson.Fragment:
        text = summary_json(summary_values(obj)) if type(obj) is summary_type else None
        if text is None:
            raise TypeError(type(obj).__name__)
        return orjson.Fragment(text)

    try:
        return orjson.dumps(value, default=summary, option=orjson.OPT_PASSTHROUGH_DATACLASS)
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
