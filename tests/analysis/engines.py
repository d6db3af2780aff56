"""Comparing one analysis' tables between the two engines: rows in any order, floats equal to 6
significant digits (a relative difference below 1e-6), everything else (timestamps are ISO-8601 text to the
microsecond in the JSON results) exactly."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from analysis import session

RELATIVE = 1e-6


def _split(value: Any, floats: list[float]) -> Any:
    """``value`` with each float moved to ``floats`` and replaced by a marker: what must be equal exactly."""
    if isinstance(value, float):
        floats.append(value)
        return "<float>"
    if isinstance(value, list):
        return [_split(v, floats) for v in value]
    if isinstance(value, dict):
        return {k: _split(v, floats) for k, v in value.items()}
    return value


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or math.isclose(x, y, rel_tol=RELATIVE, abs_tol=1e-12)
                                    for x, y in zip(a, b))


def _unmatched(a: list[dict], b: list[dict]) -> tuple[list[dict], list[dict]]:
    """The rows of ``a`` and of ``b`` left once every row is paired with an equal one of the other side."""
    pending: dict[str, list[tuple[list[float], dict]]] = defaultdict(list)
    for row in b:
        floats: list[float] = []
        pending[json.dumps(_split(row, floats), sort_keys=True)].append((floats, row))
    left = []
    for row in a:
        floats = []
        candidates = pending.get(json.dumps(_split(row, floats), sort_keys=True), [])
        match = next((i for i, (other, _) in enumerate(candidates) if _close(floats, other)), None)
        if match is None:
            left.append(row)
        else:
            candidates.pop(match)
    return left, [row for rows in pending.values() for _, row in rows]


def differences(a: dict[str, list[dict]], b: dict[str, list[dict]], limit: int = 3) -> dict[str, str]:
    """Per table that differs between two JSON results (``output.as_json``), what differs: tables only one
    has, or up to ``limit`` rows only one side has."""
    out = {}
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            out[name] = "only in " + ("the first" if name in a else "the second")
            continue
        only_a, only_b = _unmatched(a[name], b[name])
        if only_a or only_b:
            out[name] = f"{len(a[name])} vs {len(b[name])} rows; first only: {only_a[:limit]}; " \
                        f"second only: {only_b[:limit]}"
    return out


@contextlib.contextmanager
def connect_mode(on: bool) -> Iterator[None]:
    """pyspark builds Spark Connect columns while its process is marked as Connect's (an environment variable)
    and classic ones otherwise: each engine's queries are built with the mark as its session needs it."""
    saved = os.environ.pop(session.CONNECT_MODE_ENV, None)
    if on:
        os.environ[session.CONNECT_MODE_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(session.CONNECT_MODE_ENV, None)
        if saved is not None:
            os.environ[session.CONNECT_MODE_ENV] = saved
