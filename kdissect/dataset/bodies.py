"""Facts read out of decoded bodies: JSON text, the error that matters, throttling."""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from typing import Any

import orjson

from dissector.codecs import render_bytes
from dissector.records import RecordsSummary
from dissector.schema import error_name
from hotpath.speedups import plain_json


def _default(value: Any) -> Any:
    if type(value) is RecordsSummary:  # every records field: first, without a lookup of to_dict
        text = value.json_bytes()
        return value.to_dict() if text is None else _Fragment(text)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return render_bytes(bytes(value))
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:  # RecordsSummary and friends
        return to_dict()
    if is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in fields(value)}
    return str(value)


# orjson: every exchange writes two bodies, and the stdlib encoder was the dataset's
# largest single cost. Dataclasses go through _default: orjson would write every field of
# a RecordsSummary, the records' own bytes included, where the body must carry only the summary.
_STR_KEYS = orjson.OPT_PASSTHROUGH_DATACLASS
# Non-string keys are the raw unknown tags, keyed by tag number.
_OPTIONS = orjson.OPT_NON_STR_KEYS | _STR_KEYS
_dumps = orjson.dumps
_Fragment = orjson.Fragment     # JSON written already: the records summary's (RecordsSummary.json_bytes)
_EncodeError = orjson.JSONEncodeError


# A summary's values for plain_json, which writes them in place: an unbound method, called with the summary.
_summary_values = RecordsSummary.json_values


def body_bytes(body: dict[str, Any]) -> bytes:
    """The whole body as compact JSON (UTF-8): bytes via render_bytes, record data as its summary."""
    # Bodies of plain values and summaries, nearly all of them, are written in C without orjson's
    # walk and its call back for each summary; plain_json declines the rest, written as before.
    text = plain_json(body, RecordsSummary, _summary_values)
    if text is not None:
        return text
    try:
        # Allowing non-string keys makes orjson check every key, twice the time on small
        # bodies; they occur only with unknown tagged fields, so try without first.
        return _dumps(body, default=_default, option=_STR_KEYS)
    except _EncodeError:
        return _dumps(body, default=_default, option=_OPTIONS)


def body_json(body: dict[str, Any] | None) -> str | None:
    """The whole body as compact JSON: bytes via render_bytes, record data as its summary."""
    if body is None:
        return None
    return body_bytes(body).decode()


# In compact JSON a key is `"error_code":`; inside a string value its quotes would be
# escaped, so this cannot match text that merely mentions the name.
_NESTED_ERROR = re.compile(r'"error_code":(-?[1-9][0-9]*)')


def body_error(body: dict[str, Any] | None, body_text: str | None = None) -> tuple[int | None, str | None]:
    """(code, name): the top-level error, else the first non-zero nested one, else (0, "NONE").

    (None, None) when there is no decoded body to look in. ``body_text`` is the
    body's JSON from :func:`body_json`, when the caller has it already.
    """
    if body is None:
        return None, None
    code = body.get("error_code")
    if not isinstance(code, int) or code == 0:
        m = _NESTED_ERROR.search(body_text if body_text is not None else body_json(body) or "")
        code = int(m.group(1)) if m else 0
    return code, error_name(code)


def throttle_ms(body: dict[str, Any] | None) -> int | None:
    if body is None:
        return None
    value = body.get("throttle_time_ms")
    return value if isinstance(value, int) else None
