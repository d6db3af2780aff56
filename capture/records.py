"""What every capture source yields, and how it reports damage.

A record is a plain tuple ``(ts_ns, linktype, data, wirelen)`` rather than a
dataclass: one is made per packet, and tuples are the cheapest object Python has.
Damage is appended to the source's ``problems`` list (drained by the pipeline
between records), so the per-record path never has to check a record's type (but for the
runs of records a reader drops for another share, see ``Dropped``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from dissector.events import Anomaly

# (capture timestamp in ns since the epoch, link type, captured bytes, original length)
RawRecord = tuple[int, int, bytes, int]
# A file reader asked to drop other shares' packets (``drop_foreign``, capture.shard.Dropping)
# yields each run of them as an int, their number, between the records it keeps.
Dropped = int


class RecordSource(Protocol):
    """A capture file or a live socket, as the pipeline sees it."""

    problems: list[Anomaly]      # appended in order; the consumer pops them
    bytes_read: int              # bytes consumed from the underlying file/socket (for progress)
    size: int | None             # total bytes to read when known (file size), else None

    # Typed as records: a Dropped run comes only after drop_foreign, which only the pipeline calls.
    def __iter__(self) -> Iterator[RawRecord]: ...

    def close(self) -> None: ...


def problem(kind: str, ts: int, detail: str, **extra: object) -> Anomaly:
    """A capture-level anomaly (no direction: it is not about one TCP stream)."""
    return Anomaly(kind=kind, direction=None, ts=ts, detail=detail, extra=dict(extra))
