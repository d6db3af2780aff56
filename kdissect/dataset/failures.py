"""How the dataset's rows name what went wrong: a message's decode failures, and the exceptions a bug
in building rows raised (the ``decode_error`` column, ``dissector_error`` anomalies)."""

from __future__ import annotations

from dissector.events import Exchange
from dissector.schema import api_name


def raised(exc: BaseException) -> str:
    """``TypeError: ... at kdissect/dataset/bodies.py:48``: what raised, and the innermost line it came from."""
    where = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    at = f" at {where.tb_frame.f_code.co_filename}:{where.tb_lineno}" if where is not None else ""
    return f"{type(exc).__name__}: {exc}{at}"


def exchange_name(ex: Exchange) -> str:
    """``Produce v3 correlation id 7`` (or what is known of an exchange whose parts are odd)."""
    first = ex.request if ex.request is not None else ex.response
    api_key = getattr(first, "api_key", None)
    version = getattr(first, "api_version", None)
    try:
        name = api_name(api_key) if isinstance(api_key, int) else "unknown api"
    except Exception:  # noqa: BLE001  (naming must not fail where it reports a failure)
        name = f"api {api_key}"
    v = f" v{version}" if version is not None else ""
    return f"{name}{v} correlation id {getattr(first, 'correlation_id', None)}"


def failure_text(exchange: Exchange) -> str | None:
    parts = []
    for side, msg in (("request", exchange.request), ("response", exchange.response)):
        f = msg.failure if msg is not None else None
        if f is not None:
            parts.append(f"{side}: {f.error} at byte {f.offset}: {f.detail}")
    return "; ".join(parts) or None
