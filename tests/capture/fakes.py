"""Test doubles for the dissector side of the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field

from dissector.events import Anomaly, Direction


@dataclass
class RecordingConnection:
    """Records what the pipeline feeds: per direction, the bytes with '<gap N>' markers."""

    mid_stream: bool = False
    calls: list[tuple] = field(default_factory=list)
    streams: dict[Direction, list] = field(default_factory=lambda: {Direction.TO_BROKER: [], Direction.TO_CLIENT: []})
    closed: bool = False

    def feed(self, direction: Direction, data: bytes, ts: int) -> list:
        assert not self.closed
        self.calls.append(("feed", direction, data, ts))
        self.streams[direction].append(data)
        return []

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list:
        self.calls.append(("gap", direction, nbytes, ts))
        self.streams[direction].append(nbytes)
        return [Anomaly("gap", direction, ts, f"{nbytes} bytes", None, {"bytes": nbytes})]

    def close(self, ts: int) -> list:
        self.closed = True
        self.calls.append(("close", ts))
        return []

    def data(self, direction: Direction) -> bytes:
        return b"".join(x for x in self.streams[direction] if isinstance(x, bytes))

    def gaps(self, direction: Direction) -> list:
        return [x for x in self.streams[direction] if not isinstance(x, bytes)]


class Recorder:
    """A connection factory that keeps every connection it made."""

    def __init__(self) -> None:
        self.made: list[RecordingConnection] = []

    def __call__(self, mid_stream: bool) -> RecordingConnection:
        c = RecordingConnection(mid_stream)
        self.made.append(c)
        return c
