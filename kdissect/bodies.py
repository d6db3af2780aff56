"""Facts read out of decoded bodies: JSON text, the error that matters, throttling."""

from __future__ import annotations

import json
from typing import Any

from dissector.codecs import render_bytes
from dissector.schema import error_name

def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return render_bytes(bytes(value))
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:  # RecordsSummary and friends
        return to_dict()
    return str(value)


# One encoder for every body: building one per call costs more than encoding a small body.
_ENCODE = json.JSONEncoder(default=_default, separators=(",", ":"), ensure_ascii=False).encode


def body_json(body: dict[str, Any] | None) -> str | None:
    """The whole body as compact JSON: bytes via render_bytes, record data as its summary."""
    if body is None:
        return None
    return _ENCODE(body)


def _first_nested_error(node: Any) -> int:
    if isinstance(node, dict):
        code = node.get("error_code")
        if isinstance(code, int) and code != 0:
            return code
        for v in node.values():
            if isinstance(v, (dict, list)):
                found = _first_nested_error(v)
                if found:
                    return found
    elif isinstance(node, list):
        for v in node:
            if isinstance(v, (dict, list)):
                found = _first_nested_error(v)
                if found:
                    return found
    return 0


def body_error(body: dict[str, Any] | None) -> tuple[int | None, str | None]:
    """(code, name): the top-level error, else the first non-zero nested one, else (0, "NONE").

    (None, None) when there is no decoded body to look in.
    """
    if body is None:
        return None, None
    code = body.get("error_code")
    if not isinstance(code, int) or code == 0:
        code = _first_nested_error(body)
    return code, error_name(code)


def throttle_ms(body: dict[str, Any] | None) -> int | None:
    if body is None:
        return None
    value = body.get("throttle_time_ms")
    return value if isinstance(value, int) else None
