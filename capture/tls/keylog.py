"""NSS key log files and pcapng Decryption Secrets Blocks: client random -> secrets.

Format (one per line): ``LABEL <client random hex> <secret hex>``; comments,
blank lines, unknown labels and malformed lines (a log cut mid-line) are
skipped. Secrets stay in the file: the index keeps, per line, one 64-bit
number (the first 3 bytes of its client random and the line's offset, in a
sorted numpy array: 8 bytes a line), and a lookup reads only the lines of the
connection at hand. A file
that grows (a live client appending after each handshake) is re-read from
where the last read stopped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

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
# the line's full random is compared.
_OFFSET_BITS = 40
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_LINE = re.compile(rb"^(?:" + b"|".join(sorted(_BLABELS)) + rb") ([0-9a-fA-F]{6})[0-9a-fA-F]{58} ", re.M)


class _KeyFile:
    """One key log file: a sorted index of (random prefix, line offset), read incrementally."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._done = 0                      # bytes indexed so far (always at a line start)
        self._index: list[np.ndarray] = []  # sorted uint64 segments, one per read
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
            self._done, self._index = 0, []
        if size == self._done:
            return False
        parts: list[np.ndarray] = []
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
                    pos += end
                    tail = data[end:]
                    if len(tail) > _MAX_LINE:           # no newline for this long: not a key log line
                        pos, tail = pos + len(tail), b""
                if final and tail:
                    parts.append(self._entries(tail + b"\n", pos))
                    pos += len(tail)
        except OSError:
            return False
        self._done = pos
        found = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        del parts
        if not len(found):
            return False
        found.sort()
        self._index.append(found)
        if len(self._index) > 8:            # keep lookups cheap on a long-growing file
            merged = np.concatenate(self._index)
            self._index = []
            merged.sort()
            self._index = [merged]
        self.lines += len(found)
        return True

    @staticmethod
    def _entries(data: bytes, base: int) -> np.ndarray:
        import numpy as np
        # The regex finds candidate lines at C speed; the random must be hex and whole for a line to count.
        return np.fromiter(((int(m[1], 16) << _OFFSET_BITS) | (base + m.start()) for m in _LINE.finditer(data)),
                           dtype=np.uint64)

    def lookup(self, client_random: bytes) -> Secrets:
        import numpy as np
        prefix = int.from_bytes(client_random[:3], "big")
        lo = np.uint64(prefix << _OFFSET_BITS)
        offsets = []
        for index in self._index:
            i = int(np.searchsorted(index, lo, side="left"))
            while i < len(index) and int(index[i]) >> _OFFSET_BITS == prefix:
                offsets.append(int(index[i]) & _OFFSET_MASK)
                i += 1
        out: Secrets = {}
        if not offsets:
            return out
        try:
            with open(self.path, "rb") as f:
                for off in sorted(offsets):
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
