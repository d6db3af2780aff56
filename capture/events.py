"""What the capture layer hands on: each dissector event (or capture anomaly, or connection end) with
the connection it belongs to.

Compiled build (``events.pxd``): :class:`CaptureEvent` is an extension type, so the modules that cimport
it (the fast path, ``kdissect.run.decode``) read its two fields from a C struct.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capture.flows import ConnectionEnd, ConnectionInfo
from dissector.events import Anomaly, Direction, Event


@dataclass
class CaptureEvent:
    """A dissector event (or capture anomaly / connection end) and the connection it belongs to."""

    conn: ConnectionInfo | None              # None for capture-level problems (file damage, fragments)
    event: Event | ConnectionEnd


def anomaly(kind: str, direction: Direction | None, ts: int, detail: str,
            offset: int | None = None, **extra: Any) -> Anomaly:
    """An anomaly about one direction of a connection, at ``offset`` of its stream if known."""
    return Anomaly(kind=kind, direction=direction, ts=ts, detail=detail, stream_offset=offset, extra=extra)
