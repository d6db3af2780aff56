"""A record source as a capture run uses it, chosen once when the run starts.

Sources differ in what they offer beyond their records: a reader counts the bytes it read (progress)
and the records whose captured length exceeds their original one, a pcapng file carries TLS secrets,
a file reader may drop other shares' packets itself. Each reader (a :class:`Reader`) says so once, in
its :meth:`Reader.adapter`; anything else (tests, a replay) is bare records and offers nothing. A run
asks the :class:`SourceAdapter`, never the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from capture.records import Dropped, RawRecord
from capture.shard import Share
from dissector.events import Anomaly


def _zero() -> int:
    return 0


@dataclass
class SourceAdapter:
    """What a run needs of its source, in one typed place."""

    records: Iterable[RawRecord | Dropped]
    problems: list[Anomaly] = field(default_factory=list)   # the source's own list: the run pops from it
    size: int | None = None                  # bytes to read, when known
    tls_secrets: list[bytes] | None = None   # pcapng secrets blocks, growing as the file is read
    bytes_read: Callable[[], int] | None = None          # None: nothing counted (bare records)
    caplen_over_wirelen: Callable[[], int] = _zero
    last_ts: Callable[[], int] = _zero       # the last record's, dropped or not (after dropping)
    drop_foreign: Callable[[Share], Any] | None = None   # the reader drops other shares' packets itself


class Reader:
    """A capture file or socket reader: what it offers a run, said once."""

    def adapter(self) -> SourceAdapter:
        raise NotImplementedError


def adapt(source: Reader | SourceAdapter | Iterable[RawRecord]) -> SourceAdapter:
    """The adapter a run uses for ``source``: a reader's own, else bare records."""
    if isinstance(source, SourceAdapter):
        return source
    if isinstance(source, Reader):
        return source.adapter()
    return SourceAdapter(source)
