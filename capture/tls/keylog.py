"""NSS key log files and pcapng Decryption Secrets Blocks: client random -> secrets.

Format (one per line): ``LABEL <client random hex> <secret hex>``; comments,
blank lines, unknown labels and malformed lines (a log cut mid-line) are
skipped. Secrets stay in the file: the index keeps, per line, one 64-bit
number (the first 3 bytes of its client random and the line's offset) in an
unnamed temporary file, split by the random's first byte, so memory does not
grow with the key log; a lookup reads one part of the index and only
the lines of the connection at hand. A file
that grows (a live client appending after each handshake) is re-read from
where the last read stopped.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np      # imported where a key log is read: a decode without one never loads numpy

from capture.tls.errors import KeyLogError

CLIENT_RANDOM = "CLIENT_RANDOM"                     # TLS 1.2 and earlier: the master secret
TLS13_LABELS = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")
LABELS = frozenset((CLIENT_RANDOM, *TLS13_LABELS))
_BLABELS = frozenset(label.encode() for label in LABELS)
_CHUNK = 1 << 20
_MAX_LINE = 1024                                    # longer lines are not key log lines

Secrets = dict[str, bytes]


# Said once per connection in the anomaly, and in the summary.
HOW_TO_GET_KEYS = ("decrypt with --tls-keylog FILE, a key log written by jSSLKeyLog (Java clients and brokers), "
                   "SSLContext.keylog_filename (Python clients) or SSLKEYLOGFILE (OpenSSL 3.5+ programs)")


def parse_line(line: bytes) -> tuple[str, bytes, bytes] | None:
    """(label, client random, secret) of a key log line, or None for anything else."""
    parts = line.split()
    if len(parts) != 3 or parts[0] not in _BLABELS or len(parts[1]) != 64 or len(parts[2]) not in (96, 64, 128):
        return None
    try:
        return parts[0].decode(), bytes.fromhex(parts[1].decode()), bytes.fromhex(parts[2].decode())
    except ValueError:
        return None


def check_readable(path: str) -> None:
    """Raise :class:`KeyLogError` (one line, naming only the file) unless ``path`` is a readable file."""
    if os.path.isdir(path):
        raise KeyLogError(f"TLS key log {path}: is a directory")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise KeyLogError(f"TLS key log {path}: cannot read: {exc.strerror or exc}") from None


# One uint64 per indexed line: the client random's first 3 bytes above the line's offset (40 bits,
# files up to 1 TiB). A prefix shared by two randoms costs one more line read, never a wrong key:
# the line's full random is compared. The entries live on disk (see _Index), so memory stays the
# same whatever the key log's size.
_OFFSET_BITS = 40
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_PART_SHIFT = 56                                    # the random's first byte names an index part
_FLUSH = 64 << 10                                   # entries gathered in memory before they go to disk
_MAX_RUNS = 4                                       # runs on disk before they are merged into one
_LINE = re.compile(rb"^(?:" + b"|".join(sorted(_BLABELS)) + rb") ([0-9a-fA-F]{6})[0-9a-fA-F]{58} ", re.M)


def _scratch() -> IO[bytes]:
    """An unnamed temporary file for index entries (offsets only, never secrets); in memory if none can be made."""
    import tempfile
    try:
        return tempfile.TemporaryFile(prefix="kdissect-keylog-")
    except OSError:
        return io.BytesIO()             # no usable $TMPDIR: still correct, memory grows 8 B a line


class _Index:
    """Index entries in an unnamed temporary file (it goes with the process, however that ends).

    Entries arrive in sorted runs; per run only where each of the 256 parts (the
    random's first byte) starts is kept in memory, and runs are merged when
    there are too many, so a lookup reads one part: 31 KB at a million lines.
    """

    def __init__(self) -> None:
        self._file = _scratch()
        self._runs: list[tuple[int, np.ndarray]] = []     # (byte offset in the file, 257 part bounds)
        self._end = 0

    def add(self, entries: np.ndarray) -> None:
        import numpy as np
        entries.sort()
        first = (entries >> np.uint64(_PART_SHIFT)).astype(np.uint8)
        self._runs.append((self._end, np.searchsorted(first, np.arange(257), side="left")))
        self._file.seek(self._end)
        self._file.write(entries.tobytes())
        self._end += entries.nbytes
        if len(self._runs) > _MAX_RUNS:
            self._merge()

    def part(self, first: int) -> np.ndarray:
        """Every entry whose random starts with the byte ``first``."""
        import numpy as np
        pieces = []
        for start, bounds in self._runs:
            lo, hi = int(bounds[first]), int(bounds[first + 1])
            if hi > lo:
                self._file.seek(start + 8 * lo)
                pieces.append(np.frombuffer(self._file.read(8 * (hi - lo)), dtype=np.uint64))
        if len(pieces) == 1:
            return pieces[0]
        return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint64)

    def _merge(self) -> None:
        import numpy as np
        merged = _scratch()
        bounds = [0]
        for first in range(256):                          # one part in memory at a time
            entries = np.sort(self.part(first))
            merged.write(entries.tobytes())
            bounds.append(bounds[-1] + len(entries))
        self._file.close()
        self._file, self._end = merged, merged.tell()
        self._runs = [(0, np.array(bounds, dtype=np.int64))]

    def close(self) -> None:
        self._file.close()


class _KeyFile:
    """One key log file: an on-disk index of (random prefix, line offset), read incrementally."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._done = 0                      # bytes indexed so far (always at a line start)
        self._index: _Index | None = None   # made at the first indexed line
        self.lines = 0
        check_readable(path)

    def update(self, final: bool) -> bool:
        """Index lines appended since the last call; with ``final`` a last line without newline too."""
        import numpy as np
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return False
        if size < self._done:               # truncated and rewritten: start over
            if self._index is not None:
                self._index.close()
            self._index, self._done, self.lines = None, 0, 0
        if size == self._done:
            return False
        before = self.lines
        parts: list[np.ndarray] = []
        pending = 0
        try:
            with open(self.path, "rb") as f:
                f.seek(self._done)
                pos, tail = self._done, b""
                while True:
                    chunk = f.read(_CHUNK)
                    if not chunk:
                        break
                    data = tail + chunk
                    end = data.rfind(b"\n") + 1          # whole lines only; the rest waits for more
                    if end:
                        parts.append(self._entries(data[:end], pos))
                        pending += len(parts[-1])
                        if pending >= _FLUSH:           # bounded memory: this much goes to disk
                            self._store(parts)
                            parts, pending = [], 0
                    pos += end
                    tail = data[end:]
                    if len(tail) > _MAX_LINE:           # no newline for this long: not a key log line
                        pos, tail = pos + len(tail), b""
                if final and tail:
                    parts.append(self._entries(tail + b"\n", pos))
                    pos += len(tail)
                self._store(parts)
        except OSError:
            return self.lines > before
        self._done = pos
        return self.lines > before

    @staticmethod
    def _entries(data: bytes, base: int) -> np.ndarray:
        import numpy as np
        # The regex finds candidate lines at C speed; the random must be hex and whole for a line to count.
        return np.fromiter(((int(m[1], 16) << _OFFSET_BITS) | (base + m.start()) for m in _LINE.finditer(data)),
                           dtype=np.uint64)

    def _store(self, parts: list[np.ndarray]) -> None:
        import numpy as np
        found = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        if not len(found):
            return
        if self._index is None:
            self._index = _Index()
        self._index.add(found)
        self.lines += len(found)

    def lookup(self, client_random: bytes) -> Secrets:
        import numpy as np
        out: Secrets = {}
        if self._index is None or len(client_random) < 3:
            return out
        prefix = int.from_bytes(client_random[:3], "big")
        try:
            entries = self._index.part(client_random[0])
        except OSError:
            return out
        hits = entries[(entries >> np.uint64(_OFFSET_BITS)) == np.uint64(prefix)] & np.uint64(_OFFSET_MASK)
        if not len(hits):
            return out
        try:
            with open(self.path, "rb") as f:
                for off in sorted(int(h) for h in hits):
                    f.seek(off)
                    got = parse_line(f.readline(_MAX_LINE))
                    if got is not None and got[1] == client_random:
                        out[got[0]] = got[2]
        except OSError:
            pass
        return out


class KeyLog:
    """Every key source of a capture: key log files and the capture's own secrets blocks."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = (), *, live: bool = False) -> None:
        self._files = [_KeyFile(os.fspath(p)) for p in paths]
        self._live = live
        self._embedded: dict[bytes, Secrets] = {}
        self.blocks: list[bytes] = []        # pcapng DSB payloads, appended by the reader
        self.generation = 0                  # grows whenever new key lines were indexed
        self._indexed = False                # files are indexed at the first lookup: opening is cheap

    @property
    def configured(self) -> bool:
        """Whether any key source exists (so TLS on any port is worth following)."""
        return bool(self._files or self.blocks or self._embedded)

    @property
    def live(self) -> bool:
        return self._live

    def add_text(self, text: bytes) -> None:
        """Key log lines from a pcapng Decryption Secrets Block (kept in memory: part of the capture)."""
        for line in text.splitlines():
            got = parse_line(line)
            if got is not None:
                self._embedded.setdefault(got[1], {})[got[0]] = got[2]

    def lookup(self, client_random: bytes) -> Secrets:
        """The secrets logged for ``client_random`` (empty if none)."""
        while self.blocks:
            self.add_text(self.blocks.pop(0))
        if not self._indexed:
            self._indexed = True
            for f in self._files:
                f.update(final=not self._live)
        out = dict(self._embedded.get(client_random, {}))
        for f in self._files:
            out.update(f.lookup(client_random))
        return out

    def refresh(self) -> bool:
        """Live: index lines appended since the last look; True if there were any."""
        grew = bool(self.blocks)
        self._indexed = True
        for f in self._files:
            grew = f.update(final=False) or grew
        if grew:
            self.generation += 1
        return grew

    @property
    def lines(self) -> int:
        return sum(f.lines for f in self._files) + sum(len(s) for s in self._embedded.values())
