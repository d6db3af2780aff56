"""Decoded values as JSON text: what ``key_decoded`` / ``value_decoded`` hold.

One rendering for every format, documented in the README ("Record payloads"):

* bytes (Avro ``bytes`` and ``fixed``): base64 (RFC 4648, padded), as Protobuf's JSON mapping does;
* Avro ``decimal``: a string holding the exact decimal (``"12.30"``);
* Avro ``timestamp-*``: RFC 3339 in UTC (``"2024-05-01T12:00:00.123000Z"``, microseconds when not 0);
  ``local-timestamp-*`` the same without the ``Z``; ``date`` ``"2024-05-01"``; ``time-*``
  ``"12:00:00.123000"``; ``uuid`` its canonical text;
* Avro unions: the value itself; where a union has more than one named branch (records, enums, fixed) such a
  value is wrapped as ``{"<full name>": value}`` to say which one;
* NaN and infinities: null (JSON has no such numbers);
* Protobuf: its canonical JSON mapping (:mod:`payloads.protobuf`).
"""

from __future__ import annotations

import base64
import decimal
from typing import Any

import orjson

OPTIONS = orjson.OPT_UTC_Z


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    raise TypeError(f"{type(value).__name__} has no JSON rendering")


def to_json(value: Any) -> bytes:
    """``value`` as compact JSON text (UTF-8); TypeError for a value with no rendering."""
    return orjson.dumps(value, default=_default, option=OPTIONS)
