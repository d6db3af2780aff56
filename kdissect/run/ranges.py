"""One capture shared among workers by packet ranges, so that one busy connection uses every core.

A split by connection (:mod:`capture.shard`) leaves a capture of one connection to one worker. A
*range share* instead gives each worker a range of the capture's packets, counted as the pipeline
counts them (``stats.packets``, the clock every worker agrees on). Every worker reads the capture
from its start and runs everything that carries state from one frame to the next — TCP
reassembly, framing, pairing requests with responses, the frames that teach a connection or the
capture something (SASL, ApiVersions, Metadata, group apis) — exactly as one process does; so each
emits, packet for packet, the events one process emits. A worker writes the rows of the events
emitted while the clock is in its range and ignores the others; before its range it *skims*
(:mod:`dissector.skim`): Produce and Fetch bodies are not decoded, no rows are built. At its range's
end it stops reading; the last worker reads to the end and closes the connections. Ranges are
contiguous, so the shares' files read in name order hold one process's rows in one process's order.

Worker ``k``'s cost is its own range decoded plus the packets before it skimmed, so earlier ranges
are wider (:func:`range_starts`). Which split a capture gets is :func:`split_kind`'s choice, from
how its first packets spread over connections.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from capture import CaptureError, open_capture
from capture.pcapfile import MAGICS, skip_records
from capture.packet import parser_for, reverse_key

# Skimming a small Produce exchange costs about this fraction of decoding it into rows: compiled, 20.8k
# instructions against 102.3k (callgrind: decode_share skimming the first 10,000 and the first 40,000
# packets of a one-connection capture of small Produce requests, differenced; bench_instructions.py for
# the full decode). In CPU time it is less: the two shares of that capture of 200,000 exchanges, each
# decoded alone, end 0.15 s apart with 0.22 (worker 0 last), 0.05 s with 0.18, 0.01 s with 0.16 (CPU time,
# at load 3-5: a few hundredths are noise).
SKIM_COST = 0.17
# Packets whose connections are sampled to choose the split.
SAMPLE_PACKETS = 4000


@dataclass(frozen=True, slots=True)
class PacketRange:
    """Share ``index`` of ``count`` of a capture by packets: the events emitted while the pipeline's
    packet count is in ``[start, stop)`` (``stop`` None: to the end)."""

    index: int
    count: int
    start: int
    stop: int | None

    @property
    def whole(self) -> bool:
        return self.count == 1

    def describe(self) -> str:
        end = "the end" if self.stop is None else str(self.stop - 1)
        return f"packets {max(self.start, 1)} to {end}"


def range_starts(packets: int, count: int, skim: float = SKIM_COST) -> list[int]:
    """Where each of ``count`` ranges over ``packets`` starts, so that each worker does the same work:
    worker k skims the packets before its range (``skim`` of a full decode each) and decodes its own."""
    widths: list[float] = []
    before = 0.0
    for _ in range(count):
        width = 1.0 - skim * before      # each worker's cost: skim * before + width = 1
        widths.append(max(width, 0.05))
        before += widths[-1]
    scale = packets / before
    starts, at = [], 0.0
    for w in widths:
        starts.append(int(at))
        at += w * scale
    return starts


def packet_ranges(packets: int, count: int, skim: float = SKIM_COST) -> list[PacketRange]:
    """``count`` contiguous ranges covering a capture of about ``packets`` packets (the last runs to the end)."""
    starts = range_starts(packets, count, skim)
    # Clock values start at 1 (the first packet's events); range 0 takes everything before range 1.
    bounds = [0] + [max(s, 1) for s in starts[1:]]
    return [PacketRange(k, count, bounds[k], bounds[k + 1] if k + 1 < count else None) for k in range(count)]


@dataclass(frozen=True, slots=True)
class Survey:
    """A capture's packets, counted, and TCP payload bytes per connection in a sample spread over all of it."""

    packets: int
    loads: dict[bytes, int]


def survey(capture: Sequence[Path], every: int = 64, walk: int = 128 << 20) -> Survey | None:
    """Classic pcap files walked by their record headers (a few ms per 100,000 packets), every ``every``-th
    packet parsed for its connection; None for other formats, compressed or damaged files, where
    :func:`~kdissect.run.shares.estimate_packets` and :func:`connection_loads` guess from the first packets.
    Exact counts balance ranges (a guess from the first packets can be a fifth off: a producer's first
    requests travel alone, later ones several to a packet); a sample of the whole capture sees the
    connections that start late (a consumer after its producers). Past ``walk`` bytes in all, the rest
    of the packets are estimated from the bytes per packet so far."""
    total = walked_packets = walked_bytes = 0
    loads: dict[bytes, int] = {}
    for path in capture:
        try:
            with open(path, "rb") as f:
                head = f.read(24)
                found = MAGICS.get(head[:4])
                if found is None or len(head) < 24:
                    return None
                order, _frac, hlen = found
                size = os.fstat(f.fileno()).st_size
                u32 = struct.Struct(order + "I").unpack_from
                parse = parser_for(u32(head, 20)[0] & 0xFFFF)
                n, pos = _walk(f, size, min(size, walk), hlen, u32, parse, every, loads, order == "<")
                walked_packets += n
                walked_bytes += pos - 24
                if min(size, walk) < size and pos < size:
                    # The rest estimated, from the bytes per packet walked so far (in earlier files of a
                    # rotated capture too, when the walk ended before this one).
                    n += (size - pos) * walked_packets // max(walked_bytes, 1)
                elif pos != size:
                    return None             # damaged or cut: the readers' own accounting differs
                walk -= min(walk, size)
        except (OSError, ValueError, struct.error):
            return None
        total += n
    return Survey(total, loads)


# The walk reads the file in chunks of this size: a memory map of it would count every page it touched
# in the process's resident memory (100 MB more at the peak of a 537 MB capture). Each chunk is let go
# before the next is read, and small enough for the allocator to hand the same memory back: a new 4 MB
# chunk read while the last was held took fresh pages, 1,800 page faults (3-8 ms) a 7.5 MB capture.
_CHUNK = 256 << 10
# Larger captured lengths are skipped, not parsed: no link type's frames come near it.
_MAX_PARSED = 1 << 20


def _walk(f: BinaryIO, size: int, end: int, hlen: int, u32: Callable, parse: Callable | None, every: int,
          loads: dict[bytes, int], little: bool) -> tuple[int, int]:
    """Walk the records from offset 24 to ``end``: (records whose header starts before it, where the walk
    stopped), every ``every``-th record parsed into ``loads``."""
    pos, n = 24, 0
    base, buf = 24, b""
    while pos + hlen <= end:
        at = pos - base
        if at + hlen > len(buf):
            f.seek(pos)
            buf = b""
            base, buf, at = pos, f.read(_CHUNK), 0
            if len(buf) < hlen:
                break
        if n % every:
            # To the next record parsed, the chunk's end or ``end``, in C when compiled: this loop's own
            # steps took 10 ms of a 20,000-exchange capture's survey, before any worker starts.
            n, at = skip_records(buf, at, min(len(buf), end - base), hlen, little, n, every)
            pos = base + at
            continue
        caplen = u32(buf, at + 8)[0]
        if parse is not None and pos + hlen + caplen <= size and caplen <= _MAX_PARSED:
            if at + hlen + caplen > len(buf):
                f.seek(pos)
                buf = b""
                base, buf, at = pos, f.read(max(_CHUNK, hlen + caplen)), 0
            _add_load(loads, parse(buf[at + hlen:at + hlen + caplen], u32(buf, at + 12)[0]))
        pos += hlen + caplen
        n += 1
    return n, pos


def _add_load(loads: dict[bytes, int], seg: object) -> None:
    if type(seg) is not tuple:
        return
    key, payload = seg[0], seg[6]
    rkey = reverse_key(key)
    k = key if key < rkey else rkey
    loads[k] = loads.get(k, 0) + len(payload) + 1     # +1: a bare ACK costs a packet too


def connection_loads(path: str, sample: int = SAMPLE_PACKETS) -> dict[bytes, int]:
    """TCP payload bytes per connection (direction-independent key) in the first ``sample`` packets."""
    loads: dict[bytes, int] = {}
    try:
        src = open_capture(path)
    except (CaptureError, OSError):
        return loads
    try:
        n = 0
        for _ts, lt, data, wirelen in src:
            n += 1
            if n > sample:
                break
            parse = parser_for(lt)
            if parse is not None:
                _add_load(loads, parse(data, wirelen))
    except (CaptureError, OSError, ValueError):
        pass
    finally:
        src.close()
    return loads


def split_kind(loads: dict[bytes, int], count: int, skim: float = SKIM_COST) -> str:
    """``"ranges"`` or ``"connections"``: the split of a capture among ``count`` workers that finishes
    first, judged from its TCP payload bytes per connection (``loads``). By connection, the busiest share
    bounds the time; by ranges, worker 0's range, which costs what every other worker's does."""
    total = sum(loads.values())
    if count < 2 or not total:
        return "connections"
    shares = [0] * count
    for key, n in loads.items():
        shares[zlib.crc32(key) % count] += n
    hash_time = max(shares) / total
    range_time = range_starts(1_000_000, count, skim)[1] / 1_000_000
    return "ranges" if range_time < hash_time * 0.9 else "connections"
