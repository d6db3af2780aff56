"""Guessing the api of a response whose request was never captured.

A capture that starts late holds responses to requests sent before it began.
Every response schema is tried; the guess stands only when the candidates that
decode the frame completely and plausibly all belong to one api key. Among that
key's versions the one this connection's client was seen using wins, else the
newest that fits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from dissector import schema
from dissector.decoders import DECODE_ERRORS, Decoders, message_source
from dissector.framing import parse_response_header

MAX_INFER_SIZE = 1 << 20  # beyond this, trying ~370 schemas costs more than a guess is worth


@dataclass
class InferenceBudget:
    """Full searches that found nothing, counted across the connections of one capture.

    A search over every schema costs milliseconds; a damaged or hostile capture of
    many connections, each sending frames no schema fits, would otherwise cost that
    per frame. Past ``limit`` misses, each connection searches fully only now and then.
    """

    limit: int = 4096
    misses: int = 0


@dataclass
class Inference:
    api_key: int
    api_version: int
    header_version: int
    body: dict[str, Any]
    candidates: list[tuple[int, int]]


def _plausible(value: Any) -> bool:
    """No unknown error codes, negative throttles or mangled strings anywhere in the body."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):  # raw unknown tags, keyed by tag number
                continue
            if key.endswith("error_code") and isinstance(item, int) and not schema.is_known_error(item):
                return False
            if key == "throttle_time_ms" and isinstance(item, int) and not 0 <= item < 86_400_000:
                return False
            if not _plausible(item):
                return False
        return True
    if isinstance(value, list):
        return all(_plausible(item) for item in value)
    if isinstance(value, str):
        return "\ufffd" not in value and value.isprintable()
    return True


def _every_response() -> list[tuple[int, int]]:
    out = []
    for api_key in schema.api_keys():
        lo, hi = schema.version_range(api_key)  # type: ignore[misc]
        out += [(api_key, v) for v in range(lo, hi + 1)]
    return out


_EVERY = _every_response()


@functools.cache
def _layout(api_key: int, version: int) -> tuple[int, str]:
    """(header version, decoder source): versions that share both decode alike, so one attempt
    answers for all of them (368 response schemas have 208 layouts). At most 368 entries."""
    return schema.response_header_version(api_key, version), message_source(schema.message(api_key, "response", version))


def infer_response(decoders: Decoders, frame: bytes, seen_versions: dict[int, int] | None = None,
                   candidates: list[tuple[int, int]] | None = None) -> Inference | None:
    """Try every response schema (or only ``candidates``); None unless one api key fits."""
    if len(frame) < 4 or len(frame) > MAX_INFER_SIZE:
        return None
    order = candidates if candidates is not None else _EVERY
    header_cache: dict[int, int | None] = {}
    tried: dict[tuple[int, str], dict | None] = {}
    fits: list[tuple[int, int, int, dict]] = []
    for api_key, version in order:
        layout = _layout(api_key, version)
        if layout not in tried:
            tried[layout] = _fit(decoders, api_key, version, frame, layout[0], header_cache)
        body = tried[layout]
        if body is not None:
            fits.append((api_key, version, layout[0], body))
    keys = {f[0] for f in fits}
    if len(keys) != 1:
        return None
    api_key = keys.pop()
    chosen = None
    if seen_versions and api_key in seen_versions:
        chosen = next((f for f in fits if f[1] == seen_versions[api_key]), None)
    if chosen is None:
        chosen = fits[-1]
    return Inference(api_key, chosen[1], chosen[2], chosen[3], [(f[0], f[1]) for f in fits])


def _fit(decoders: Decoders, api_key: int, version: int, frame: bytes, hv: int,
         header_cache: dict[int, int | None]) -> dict | None:
    """The body when ``frame`` decodes completely and plausibly as this response, else None.

    Calls the decoder directly: a failed attempt is the common case here, and locating where a
    body failed (``decoders.run``) costs more than the attempt."""
    if hv not in header_cache:
        try:
            header_cache[hv] = parse_response_header(frame, hv)[1]
        except DECODE_ERRORS:
            header_cache[hv] = None
    start = header_cache[hv]
    if start is not None and not decoders.unchecked(len(frame)):
        d = decoders.decode_large(api_key, "response", version, frame, start)      # within the budget
        if d is None or d.failure is not None or d.end != len(frame) or not d.body or not _plausible(d.body):
            return None
        return d.body
    fn = decoders.get(api_key, "response", version) if start is not None else None
    if fn is None:
        return None
    body: dict[str, Any] = {}
    try:
        end = fn(frame, start, body)
    except DECODE_ERRORS:
        return None
    if end != len(frame) or not body or not _plausible(body):
        return None
    return body
