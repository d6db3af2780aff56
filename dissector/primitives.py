"""Kafka's variable-length primitives, read by every body decoder: unsigned varints, uuids and
tagged-field sections.

Both the decoders :mod:`dissector.decoders` writes and executes and those written ahead of time
(``dissector/schema/_decoders.py``) call them, so they live apart from either.
"""

from __future__ import annotations

from base64 import urlsafe_b64encode
from typing import Callable

from dissector.errors import BadLength, BadVarint, Underflow


def read_uvarint(b: bytes, o: int) -> tuple[int, int]:
    """Kafka's unsigned varint, at most 5 bytes (32 bits)."""
    value = 0
    shift = 0
    for _ in range(5):
        c = b[o]
        o += 1
        value |= (c & 0x7F) << shift
        if c < 0x80:
            return value, o
        shift += 7
    raise BadVarint(f"unsigned varint longer than 5 bytes at offset {o - 5}")


def read_uuid(b: bytes, o: int) -> str:
    raw = b[o:o + 16]
    if len(raw) != 16:
        raise Underflow("uuid needs 16 bytes")
    # Kafka prints uuids as unpadded url-safe base64; users will grep for that form.
    return urlsafe_b64encode(raw)[:22].decode("ascii")


def read_tags_budgeted(b: bytes, o: int, r: dict, known: dict | None, k: list[int]) -> int:
    """:func:`read_tags` for budgeted decoders, whose tag readers take the budget too."""
    return read_tags(b, o, r, {tag: _with_budget(fn, k) for tag, fn in known.items()} if known else None)


def _with_budget(fn: Callable[[bytes, int, dict, list[int]], int],
                 k: list[int]) -> Callable[[bytes, int, dict], int]:
    return lambda b, o, r: fn(b, o, r, k)


def read_tags(b: bytes, o: int, r: dict, known: dict | None) -> int:
    """A tagged-field section: known tags decoded by name, unknown ones kept raw."""
    n = b[o]
    o += 1
    if n > 127:
        n, o = read_uvarint(b, o - 1)
    if n == 0:
        return o
    end_of_buffer = len(b)
    if n > end_of_buffer - o:
        raise BadLength(f"{n} tagged fields but only {end_of_buffer - o} bytes left")
    for _ in range(n):
        tag, o = read_uvarint(b, o)
        size, o = read_uvarint(b, o)
        end = o + size
        if end > end_of_buffer:
            raise Underflow(f"tagged field {tag} of {size} bytes runs past the end")
        fn = known.get(tag) if known else None
        if fn is not None:
            if fn(b, o, r) != end:
                raise BadLength(f"tagged field {tag} does not fill its {size} bytes")
        else:
            unknown = r.get("_unknown_tags")
            if unknown is None:
                unknown = r["_unknown_tags"] = {}
            unknown[tag] = b[o:end]
        o = end
    return o
