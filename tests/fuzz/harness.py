"""What every fuzz target shares: its declaration, its structured input and its one failure."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_CHUNK = struct.Struct(">BH")
MAX_DECOMPRESSED = 4 << 20      # per input: large enough for every seed, small enough for the RSS ceiling


class InvariantBroken(AssertionError):
    """A target's invariant does not hold: a bug to fix, with the input as its regression test."""


def chunks(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Split a structured input into (tag, bytes); a short tail is one last chunk."""
    pos, n = 0, len(data)
    while pos + 3 <= n:
        tag, length = _CHUNK.unpack_from(data, pos)
        pos += 3
        yield tag, data[pos:pos + length]
        pos += length


def pack_chunks(items: list[tuple[int, bytes]]) -> bytes:
    return b"".join(_CHUNK.pack(tag, len(b)) + b for tag, b in items)


@dataclass(frozen=True)
class Target:
    fn: Callable[[bytes], None]
    rss_mb: int          # libFuzzer -rss_limit_mb
    time_limit: int      # seconds per input (libFuzzer -timeout)
    max_len: int         # bytes per input (libFuzzer -max_len)
    warm: Callable[[], object] | None = None     # once per process, before the first input (protoc runs)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
