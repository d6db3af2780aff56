"""The decoding side of a live capture: a record source that follows the spool the dumper writes.

Segments (``000001.pcapng``, ...) are read in order with the ordinary pcapng
reader over a stream that, at the end of the bytes written so far, waits for
more instead of ending — until the segment is complete (the next one exists,
or the dumper has exited). A decoded segment is deleted, or moved to
``keep_dir``, which frees its room in the spool.

The source also keeps the consumer's clock: ``boundary`` is a capture time
(ns); the first record at or after it, or — when the decoder is idle and
caught up — the wall clock passing it, calls ``on_boundary``. The live writer
rotates its files there, so rows land in the interval their packets were
captured in, however far behind decoding runs.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from capture.pcapng import PcapngReader
from capture.records import RawRecord
from capture.sources import Reader, SourceAdapter
from dissector.events import Anomaly

POLL = 0.02          # seconds between looks at a segment that has not grown
IDLE_SLACK_NS = 1_000_000_000   # the dumper writes within 0.5 s: a quiet clock this far past is final
NEVER = 1 << 62


class _Aborted(Exception):
    """Raised inside the reader when decoding must stop now."""


class FollowStream:
    """What :class:`PcapngReader` reads: a file that may still be growing."""

    __slots__ = ("_f", "_idle", "_is_complete", "compressed", "name", "problems", "size")

    def __init__(self, path: Path, name: str, is_complete: Callable[[], bool], idle: Callable[[], None]) -> None:
        self._f: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by close())
        self._is_complete = is_complete
        self._idle = idle
        self.name = name
        self.problems: list[Anomaly] = []
        self.size: int | None = None
        self.compressed = False

    def read(self, n: int) -> bytes:
        while True:
            data = self._f.read(n)
            if data:
                return data
            if self._is_complete():
                return self._f.read(n)       # written before it was marked complete
            self._idle()
            time.sleep(POLL)

    @property
    def position(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()


class SpoolSource(Reader):
    """A :class:`~capture.records.RecordSource` over a spool directory being written by a dumper."""

    def __init__(self, directory: Path, name: str, dumper_done: Callable[[], bool], *,
                 keep_dir: Path | None = None, keep_prefix: str = "live", undecoded_dir: Path | None = None) -> None:
        self.directory = directory
        self.name = name
        self._dumper_done = dumper_done
        self.keep_dir = keep_dir
        self.keep_prefix = keep_prefix
        self.undecoded_dir = undecoded_dir
        self.problems: list[Anomaly] = []
        self.size: int | None = None
        self.boundary = NEVER
        self.on_boundary: Callable[[int], None] | None = None
        self.on_end: Callable[[], None] | None = None   # called once the dumper is done, before the last records
        self.segments_done = 0
        self.kept: list[Path] = []            # decoded segments moved to keep_dir
        self.undecoded: list[Path] = []       # segments left when decoding was aborted
        self._done_bytes = 0
        self._stream: FollowStream | None = None
        self._aborted = False
        self._seq = 0

    def adapter(self) -> SourceAdapter:
        return SourceAdapter(self, self.problems, self.size, bytes_read=lambda: self.bytes_read)

    # -- the consumer's controls (thread-safe: plain attribute writes) ---------------------------

    def abort(self) -> None:
        """Stop decoding at the next record (or wait); what was decoded stays decoded."""
        self._aborted = True
        self.boundary = 0

    @property
    def bytes_read(self) -> int:
        s = self._stream
        return self._done_bytes + (s.position if s is not None else 0)

    def backlog(self) -> int:
        """Bytes written to the spool and not yet decoded."""
        total = 0
        try:
            for entry in os.scandir(self.directory):
                if entry.name.endswith(".pcapng"):
                    total += entry.stat().st_size
        except OSError:
            return 0
        return max(0, total - (self._stream.position if self._stream is not None else 0))

    # -- reading --------------------------------------------------------------------------------

    def _path(self, seq: int) -> Path:
        return self.directory / f"{seq:06d}.pcapng"

    def _settled_ns(self) -> int:
        """A capture time before which every packet is already in the spool (the idle clock)."""
        return time.time_ns() - IDLE_SLACK_NS

    def _idle(self) -> None:
        if self._aborted:
            raise _Aborted
        settled = self._settled_ns()
        if self.on_boundary is not None and settled >= self.boundary:
            self.on_boundary(settled)

    def _wait_for(self, path: Path) -> bool:
        """True when ``path`` exists; False when the dumper ended without writing it."""
        while not path.exists():
            if self._dumper_done():
                return path.exists()
            self._idle()
            time.sleep(POLL)
        return True

    def __iter__(self) -> Iterator[RawRecord]:
        try:
            while True:
                self._seq += 1
                path = self._path(self._seq)
                if not self._wait_for(path):
                    break
                nxt = self._path(self._seq + 1)
                stream = FollowStream(path, self.name, lambda nxt=nxt: nxt.exists() or self._dumper_done(),
                                      self._idle)
                self._stream = stream
                reader = PcapngReader(stream)     # type: ignore[arg-type]
                reader.problems = self.problems   # drops and damage reach the pipeline in order
                try:
                    for rec in reader:
                        if rec[0] >= self.boundary:
                            if self._aborted:
                                raise _Aborted
                            if self.on_boundary is not None:
                                self.on_boundary(rec[0])
                        yield rec
                finally:
                    self._done_bytes += stream.position
                    self._stream = None
                    stream.close()
                self._retire(path)
        except _Aborted:
            pass
        finally:
            if self.on_end is not None:
                self.on_end()

    def _retire(self, path: Path) -> None:
        self.segments_done += 1
        if self.keep_dir is not None:
            dest = self.keep_dir / f"{self.keep_prefix}-{self._seq:06d}.pcapng"
            shutil.move(path, dest)
            self.kept.append(dest)
        else:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Put away what was not decoded (aborted), then remove the spool directory."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        try:
            left = sorted(p for p in self.directory.iterdir() if p.suffix == ".pcapng")
        except OSError:
            left = []
        for p in left:
            if self.undecoded_dir is not None and p.stat().st_size > 0:
                self.undecoded_dir.mkdir(parents=True, exist_ok=True)
                dest = self.undecoded_dir / f"{self.keep_prefix}-{p.stem}.pcapng"
                shutil.move(p, dest)
                self.undecoded.append(dest)
            else:
                p.unlink(missing_ok=True)
        try:
            self.directory.rmdir()
        except OSError:
            pass
