"""Which share of a capture a TCP connection belongs to, when several processes split one capture.

Every worker reads the whole file and keeps only the connections whose
4-tuple falls in its share, so each connection is reassembled and decoded by
exactly one worker, start to end. The hash must be the same in every process
and on every machine (a Spark task decodes one share somewhere else), so it
is CRC-32 of the direction-independent key, never Python's salted ``hash``.

Compiled build: the readers (``pcapfile.pxd``, ``pcapng.pxd``) cimport the C twin of
:func:`frame_share` (``hotpath._speedups.frame_share``), which hashes a frame in place, so that a
reader drops another share's packet before it becomes a Python object (``drop_foreign``, noted in a
:class:`Dropping`); only they do. ``shard.pxd`` makes :class:`Share` and :class:`Dropping` extension types.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from capture.packet import fast_ipv4, reverse_key


def share_of(key: bytes, shares: int) -> int:
    """The share (0..shares-1) of the connection whose packets carry flow key ``key`` (either direction)."""
    rkey = reverse_key(key)
    return zlib.crc32(key if key < rkey else rkey) % shares


def frame_share(buf: bytes, start: int, caplen: int, l3: int, ethertype_at: int, count: int) -> int:
    """The share of the connection of the frame ``buf[start:start + caplen]`` if ``fast_ipv4`` reads
    it as TCP/IPv4 with its IP header at ``l3``, else -1, by fast_ipv4's own rules.
    """
    if start < 0 or caplen < 0 or start + caplen > len(buf) or count < 1:
        return -1
    if l3 < 0 or (ethertype_at >= 0 and ethertype_at > l3 - 2):     # the ethertype, if any, before the IP header
        return -1
    seg = fast_ipv4(buf[start:start + caplen], l3, ethertype_at)
    return -1 if seg is None else share_of(seg[0], count)


@dataclass(frozen=True)
class Share:
    """Share ``index`` of ``count`` (0-based). Share 0 also owns capture-level reports."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"share {self.index} of {self.count} does not exist")

    @property
    def whole(self) -> bool:
        return self.count == 1


class Dropping:
    """A record reader's note of which share it keeps, for readers that drop the others' packets
    before they become Python objects (``drop_foreign``).

    ``seen`` counts every record read so far, dropped or not, across the files of a rotated
    capture: the pipeline's packet count is the clock all shares agree on (cross-share topic
    names depend on it), so a run of dropped records reaches the pipeline as one int, their
    number. The 4096th records are never dropped: the pipeline's periodic work (idle sweeps,
    hole expiry) runs at those packets with their timestamps, the same in every share.
    """

    __slots__ = ("count", "index", "last_ts", "seen")

    def __init__(self, share: Share | None = None, seen: int = 0) -> None:
        self.index = share.index if share is not None else 0
        self.count = share.count if share is not None else 1     # 1: keep everything
        self.seen = seen
        self.last_ts = 0


class ShareFilter:
    """``foreign(key)``: True for a packet of a connection another share decodes.

    Asked only for packets of flows this share has not created, so it costs
    nothing on the per-packet fast path. Answers are remembered (both
    directions) to skip a foreign connection's later packets with one lookup;
    the memory is dropped whole when it grows past ``limit`` keys.
    """

    __slots__ = ("_count", "_foreign", "_index", "_limit")

    def __init__(self, share: Share, limit: int = 200_000) -> None:
        self._index = share.index
        self._count = share.count
        self._foreign: set[bytes] = set()
        self._limit = limit

    def foreign(self, key: bytes) -> bool:
        if key in self._foreign:
            return True
        if share_of(key, self._count) == self._index:
            return False
        if len(self._foreign) >= self._limit:
            self._foreign.clear()
        self._foreign.add(key)
        self._foreign.add(reverse_key(key))
        return True
