"""Byte streams under the file readers: plain or gzip, with damage turned into problems."""

from __future__ import annotations

import io
import os
import zlib
from typing import BinaryIO

from capture.errors import CaptureError
from capture.records import problem
from dissector.events import Anomaly

CHUNK = 1 << 20   # read size: large enough to amortise calls, small enough to keep RSS flat

_OTHER_COMPRESSION = {
    b"\xfd7zXZ": "xz",
    b"BZh": "bzip2",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"\x04\x22\x4d\x18": "lz4",
}


class _Gunzip:
    """Streaming gunzip that, unlike ``gzip.GzipFile``, hands out everything decoded before damage.

    GzipFile.read(n) raises on a cut member and drops what it had decoded for
    that call; here each piece is returned as soon as it is decoded, and the
    error is raised only when nothing decoded is left. Concatenated members are
    followed; output is produced at most ``CHUNK`` at a time (no zip bombs).
    """

    __slots__ = ("_d", "_in_member", "_raw", "_tail")

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._tail = b""
        self._in_member = False

    def piece(self) -> bytes:
        """The next decoded bytes; b"" at a clean end; EOFError / zlib.error on damage."""
        while True:
            if self._tail:
                src, self._tail = self._tail, b""
            else:
                src = self._raw.read(CHUNK)
                if not src:
                    if self._in_member:
                        raise EOFError("compressed stream cut short")
                    return b""
            self._in_member = True
            data = self._d.decompress(src, CHUNK)
            self._tail = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data + self._tail
                self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._in_member = False
                self._tail = rest.lstrip(b"\0")       # tar-style zero padding after the last member
            if data:
                return data


class _Prefixed:
    """A pipe's first bytes, already read, then the pipe."""

    __slots__ = ("_head", "_raw")

    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head, self._raw = head, raw

    def read(self, n: int) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._raw.read(n)


class ByteStream:
    """``read(n)`` over a file, transparently gunzipped; never raises on damage.

    A corrupt or cut gzip member ends the stream and leaves an anomaly in
    ``problems``; ``position`` is the offset in the file on disk (compressed),
    which is what a progress bar compares with the file size.
    """

    __slots__ = ("_buf", "_ended", "_gz", "_raw", "compressed", "name", "problems", "seekable", "size")

    def __init__(self, raw: BinaryIO, name: str) -> None:
        self._raw = raw
        self.name = name
        self.problems: list[Anomaly] = []
        self._ended = False
        try:
            self.size: int | None = os.fstat(raw.fileno()).st_size
        except (OSError, AttributeError, io.UnsupportedOperation):
            self.size = None
        self.seekable = raw.seekable()
        if not self.seekable:
            self.size = None                   # a pipe's st_size is 0, not its length
        head = raw.read(2)
        if self.seekable:
            raw.seek(0)
        self._buf = b"" if self.seekable else head      # a pipe (``kdissect show -``): handed back by read()
        self.compressed = head == b"\x1f\x8b"
        if self.compressed and self._buf:
            self._gz = _Gunzip(_Prefixed(self._buf, raw))
            self._buf = b""
        else:
            self._gz = _Gunzip(raw) if self.compressed else None

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ByteStream:
        name = os.fspath(path)
        try:
            raw = open(name, "rb")  # noqa: SIM115  (owned by the stream, closed by close())
        except OSError as exc:
            raise CaptureError(f"{name}: cannot open: {exc.strerror or exc}") from None
        if os.path.isdir(name):
            raw.close()
            raise CaptureError(f"{name}: is a directory")
        return cls(raw, name)

    def unread(self, data: bytes) -> None:
        """Hand ``data`` out again before what follows: how a pipe, which cannot be reopened, is sniffed."""
        self._buf = data + self._buf

    def read(self, n: int) -> bytes:
        if self._gz is None:
            if self._buf:
                out, self._buf = self._buf[:n], self._buf[n:]
                return out + self._raw.read(n - len(out)) if len(out) < n else out
            return self._raw.read(n)
        if self._ended:
            out, self._buf = self._buf, b""
            return out
        parts = [self._buf]
        have = len(self._buf)
        try:
            while have < n:
                piece = self._gz.piece()
                if not piece:
                    break
                parts.append(piece)
                have += len(piece)
        except (EOFError, zlib.error) as exc:
            self._ended = True
            cut = isinstance(exc, EOFError)
            self.problems.append(problem(
                "capture_truncated" if cut else "capture_corrupt", 0,
                f"{self.name}: gzip stream {'cut short' if cut else f'corrupt ({exc})'}; "
                "stopped reading there", offset=self.position))
        data = b"".join(parts)
        out, self._buf = data[:n], data[n:]
        return out

    @property
    def position(self) -> int:
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self) -> None:
        self._raw.close()


def describe_unknown(head: bytes) -> str:
    """Why ``head`` is not a capture file, for the one-line error."""
    if not head:
        return "empty file"
    for magic, what in _OTHER_COMPRESSION.items():
        if head.startswith(magic):
            return f"{what}-compressed: decompress it first (only gzip is read directly)"
    if head[:1] in (b"{", b"[", b"<") or all(32 <= b < 127 or b in (9, 10, 13) for b in head[:16]):
        return "looks like text, not a pcap or pcapng capture"
    return f"not a pcap or pcapng capture (starts with {head[:8].hex()})"
