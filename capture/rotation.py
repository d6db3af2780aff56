"""Rotated captures: files that continue one another, read as one capture.

``tcpdump -C`` / ``-G``, dumpcap's ring buffer and ``kdissect live --keep-pcap``
cut one capture into files at whatever packet came next, so a TCP connection,
and an exchange, can start in one file and end in the next. Decoded file by
file, such an exchange is a ``no_response`` in the first and an
``orphan_response`` in the second, and the connection starts mid-stream.
:func:`capture_sets` finds the files that continue one another, and
:class:`ChainSource` reads such a set as one stream of records, so one pipeline
reassembles and pairs across the cut.

Which files form a set: in one directory, names equal once every run of digits
is masked and a trailing number dropped (``x.pcap``, ``x.pcap1``, ``x.pcap2``;
``dump-20261125-101500.pcap``, ``dump-20261125-101600.pcap``), the same link
type, and in time each file starts where the previous one ended: its first
packet no earlier than ``SLACK`` before the previous file's last packet and no
later than ``max_gap`` after it. Files named alike that overlap in time (two
taps of the same moments) or lie apart (separate recordings) stay separate.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from itertools import zip_longest
from dataclasses import dataclass
from pathlib import Path

from capture.capfile import PCAPNG_MAGIC, open_capture
from capture.errors import CaptureError
from capture.pcapfile import MAGICS, MAX_SNAPLEN
from capture.pcapng import _interface
from capture.records import RawRecord, RecordSource, problem
from capture.shard import Share
from capture.sources import Reader, SourceAdapter
from dissector.events import Anomaly

NS = 1_000_000_000
# A rotation writes the next packet to the next file: the gap is one inter-packet gap. Kafka clients
# talk at least every few seconds (fetch long-polls, heartbeats), so an active link never pauses this
# long, and separate recordings made one after another (a test harness restarting a broker) usually do.
MAX_GAP = 10 * NS
SLACK = NS                    # timestamps of one capture may step back a little (per-CPU clocks, -i any)
_TAIL = 1 << 16               # head of a pcapng read for its interface descriptions
_TAIL_MAX = 3 * (MAX_SNAPLEN + 24) + 24   # tail of a pcap holding its last three records
_SCAN_BUDGET = 1 << 20        # record headers tried in a tail before reading the file through instead


@dataclass(frozen=True, slots=True)
class FileSpan:
    """What deciding whether files continue one another needs: link type and first/last packet time."""

    path: Path
    linktype: int
    first_ts: int
    last_ts: int


def rotation_key(name: str) -> str:
    """The part of a file name a rotation keeps: digit runs masked, the trailing number dropped."""
    base, gz = (name[:-3], ".gz") if name.lower().endswith(".gz") else (name, "")
    return re.sub(r"\d+", "#", re.sub(r"\d+$", "", base)) + gz


def capture_sets(paths: Iterable[Path], max_gap: int = MAX_GAP,
                 probe_all: Callable[[list[Path]], Iterable[FileSpan | None]] | None = None) -> list[tuple[Path, ...]]:
    """``paths`` grouped into captures: a rotated set becomes one tuple, in time order; others stay alone.

    Only files that share a directory and a :func:`rotation_key` with another file are
    opened (one cheap look at their first and last packet); ``probe_all`` maps
    :func:`probe` over them (default: threads here, which inflate gzipped files in
    parallel as zlib lets go of the GIL; ``spark-decode`` passes a Spark job).
    The sets come in the order of their earliest-listed file.
    """
    paths = list(paths)
    groups: dict[tuple[Path, str], list[Path]] = {}
    for p in paths:
        groups.setdefault((p.parent, rotation_key(p.name)), []).append(p)
    candidates = [p for members in groups.values() if len(members) > 1 for p in members]
    spans = list((probe_all or _probe_in_threads)(candidates))
    span_of = {s.path: s for s in spans if s is not None}
    set_of: dict[Path, tuple[Path, ...]] = {}
    for members in groups.values():
        found = [span_of[p] for p in members if p in span_of]
        for chain in _chains(found, max_gap):
            set_of.update((p, chain) for p in chain)
    out: dict[tuple[Path, ...], None] = {}          # insertion-ordered, each set once
    for p in paths:
        out.setdefault(set_of.get(p, (p,)))
    return list(out)


def _probe_in_threads(paths: list[Path]) -> list[FileSpan | None]:
    if len(paths) < 4:
        return [probe(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor   # (and logging): only for sets of 4 files or more
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return list(pool.map(probe, paths))


def _chains(spans: list[FileSpan], max_gap: int) -> list[tuple[Path, ...]]:
    """Files named alike, linked in time order, each to the file it continues.

    Several sources may share a name pattern (``broker1-<time>.pcap``,
    ``broker2-<time>.pcap``) and so interleave in time: a file continues the
    open chain whose last file ends just before it starts and whose name differs
    from its own in the fewest numbers (then: the shortest gap).
    """
    done: list[list[FileSpan]] = []
    open_: list[list[FileSpan]] = []           # chains a later file may still continue
    for s in sorted(spans, key=lambda s: (s.first_ts, s.path.name)):
        # Files come in order of their start: a chain ended longer than max_gap ago stays ended.
        done += [c for c in open_ if c[-1].last_ts + max_gap < s.first_ts]
        open_ = [c for c in open_ if c[-1].last_ts + max_gap >= s.first_ts]
        fits = [c for c in open_ if _continues(c[-1], s, max_gap)]
        if fits:
            best = min(fits, key=lambda c: (_numbers_apart(c[-1].path.name, s.path.name), s.first_ts - c[-1].last_ts))
            best.append(s)
        else:
            open_.append([s])
    return [tuple(f.path for f in c) for c in done + open_ if len(c) > 1]


def _continues(prev: FileSpan, nxt: FileSpan, max_gap: int) -> bool:
    return (prev.linktype == nxt.linktype
            and prev.last_ts - SLACK <= nxt.first_ts <= prev.last_ts + max_gap)


def _numbers_apart(a: str, b: str) -> int:
    """How many of the numbers in two names differ (a missing number counts as one)."""
    na, nb = re.findall(r"\d+", a), re.findall(r"\d+", b)
    return sum(x != y for x, y in zip_longest(na, nb))


def probe(path: Path) -> FileSpan | None:
    """The file's link type and first and last packet times; None if it is not a capture or holds no packet.

    The last time comes from the file's tail: a constant cost for an uncompressed
    pcap or single-section pcapng; a gzipped pcap is inflated once (in zlib, nothing
    per packet in Python). Anything else is read through once.
    """
    try:
        source = open_capture(path)
    except CaptureError:
        return None
    try:
        first = next(iter(source), None)
    finally:
        source.close()
    if first is None:
        return None
    last = _pcap_last_ts(path)
    if last is None:
        last = _pcapng_last_ts(path)
    if last is None:
        last = _read_last_ts(path)
    return FileSpan(path, first[1], first[0], max(last, first[0]))


def _read_last_ts(path: Path) -> int:
    source = open_capture(path)
    ts = 0
    try:
        for ts, _, _, _ in source:
            pass
    finally:
        source.close()
    return ts


def _pcap_last_ts(path: Path) -> int | None:
    """The time of a pcap's last record, found from the end of the file; None if not found.

    A record is accepted as the last one when its length ends exactly at the end
    of the file and the two records before it chain up to it the same way (or
    the file's header is reached); a file cut inside its last record is not
    found this way and is read through instead.
    """
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                return _gzip_pcap_last_ts(path)
            f.seek(0)
            head = f.read(24)
            if head[:4] not in MAGICS or len(head) < 24:
                return None
            order, frac_ns, hlen = MAGICS[head[:4]]
            size = os.fstat(f.fileno()).st_size
            unpack = struct.Struct(order + "IIII").unpack_from
            start = max(24, size - _TAIL_MAX)
            f.seek(start)
            return _last_record(f.read(size - start), start == 24, unpack, hlen, frac_ns)
    except OSError:
        return None


def _pcapng_last_ts(path: Path) -> int | None:
    """The time of an uncompressed pcapng's last Enhanced Packet Block, walking back from the end.

    Every pcapng block ends with its own length, so the last blocks are found
    without reading the rest. The interfaces are those described before the first
    packet, as rotating writers lay files out; an interface block met on the way
    back, or a block that does not check out, gives None (the caller reads the file
    through). A file of several sections whose later ones describe their interfaces
    differently could be given a wrong time; at worst that keeps it out of a set.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(_TAIL)
            if len(head) < 28 or head[:4] != PCAPNG_MAGIC:
                return None
            order = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}.get(head[8:12])
            if order is None:
                return None
            u32 = struct.Struct(order + "I").unpack_from
            interfaces = []
            pos = u32(head, 4)[0]
            while pos + 12 <= len(head):            # interfaces (and secrets) before the first packet
                btype, blen = struct.unpack_from(order + "II", head, pos)
                if btype in (2, 3, 6) or blen < 12 or pos + blen > len(head):
                    break
                if btype == 1:
                    interfaces.append(_interface(head, pos, blen, order))
                pos += blen
            if not interfaces:
                return None
            size = os.fstat(f.fileno()).st_size
            end = size
            for _ in range(64):                    # statistics and other blocks may follow the last packet
                if end < pos + 12:
                    return None
                f.seek(end - 4)
                blen = u32(f.read(4), 0)[0]
                if blen < 12 or blen % 4 or blen > end - pos:
                    return None
                f.seek(end - blen)
                block = f.read(blen)
                btype, first_len = struct.unpack_from(order + "II", block, 0)
                if first_len != blen or btype in (0x0A0D0D0A, 1):
                    return None                    # another section, or an interface described late
                if btype == 6 and blen >= 32:
                    iface, hi, lo = struct.unpack_from(order + "III", block, 8)
                    if iface >= len(interfaces):
                        return None
                    i = interfaces[iface]
                    return ((hi << 32) | lo) * i.mul // i.div + i.offset_ns
                end -= blen
    except OSError:
        return None
    return None


def _gzip_pcap_last_ts(path: Path) -> int | None:
    """As :func:`_pcap_last_ts` for a gzipped pcap: inflated once, only the last ``_TAIL_MAX`` bytes kept."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    head = b""
    tail = bytearray()
    total = 0
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                while chunk:
                    out = inflate.decompress(chunk)
                    if len(head) < 24:
                        head += out[:24 - len(head)]
                    total += len(out)
                    tail += out
                    if len(tail) > 2 * _TAIL_MAX:            # trimmed now and then, not per chunk
                        del tail[:len(tail) - _TAIL_MAX]
                    chunk = inflate.unused_data      # a next gzip member
                    if chunk:
                        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except (OSError, zlib.error):
        return None
    if head[:4] not in MAGICS or len(head) < 24:
        return None
    order, frac_ns, hlen = MAGICS[head[:4]]
    at_header = len(tail) == total                 # nothing was let go: the file's header is in it
    buf = bytes(tail[24:]) if at_header else bytes(tail)
    return _last_record(buf, at_header, struct.Struct(order + "IIII").unpack_from, hlen, frac_ns)


def _last_record(buf: bytes, at_header: bool, unpack, hlen: int, frac_ns: int) -> int | None:  # type: ignore[no-untyped-def]
    """The time of the record ending exactly at the end of ``buf`` that two records chain up to.

    A record is at most ``MAX_SNAPLEN`` long, so only that far back is searched, and
    at most ``_SCAN_BUDGET`` headers are looked at in all: a tail that explains
    nothing (damage, or bytes made to look like many candidates) gives None soon,
    and the caller reads the file through.
    """
    end = len(buf)
    frac_max = NS // frac_ns
    budget = [_SCAN_BUDGET]
    for p in range(end - hlen, max(-1, end - hlen - MAX_SNAPLEN - 1), -1):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        sec, frac, caplen, _ = unpack(buf, p)
        if p + hlen + caplen != end or frac >= frac_max:
            continue
        if _chains_back(buf, p, 2, at_header, unpack, hlen, frac_max, sec, budget):
            return sec * NS + frac * frac_ns
    return None


def _chains_back(buf: bytes, p: int, depth: int, at_header: bool, unpack, hlen: int,  # type: ignore[no-untyped-def]
                 frac_max: int, sec: int, budget: list[int]) -> bool:
    """Whether ``depth`` records end exactly at ``p``, each plausibly before the next in time."""
    if depth == 0 or (p == 0 and at_header):
        return True
    for q in range(p - hlen, max(-1, p - hlen - MAX_SNAPLEN - 1), -1):
        budget[0] -= 1
        if budget[0] < 0:
            return False
        qsec, qfrac, qcap, _ = unpack(buf, q)
        if (q + hlen + qcap == p and qfrac < frac_max and qsec <= sec + 1
                and _chains_back(buf, q, depth - 1, at_header, unpack, hlen, frac_max, qsec, budget)):
            return True
    return False


class ChainSource(Reader):
    """The records of several capture files, one after the other, as one :class:`RecordSource`.

    Every reader's reports go to this source's ``problems`` (their details name the
    file), pcapng secrets blocks to its ``tls_secrets``. The first file is opened
    at once, so a non-capture fails here as with :func:`open_capture`; a later file
    that does not open is a ``capture_corrupt`` anomaly and the set goes on.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        self.paths = [os.fspath(p) for p in paths]
        if not self.paths:
            raise CaptureError("no capture file given")
        self.problems: list[Anomaly] = []
        self.tls_secrets: list[bytes] = []
        sizes = [_size(p) for p in self.paths]
        self.size: int | None = None if None in sizes else sum(sizes)  # type: ignore[arg-type]
        self.records = 0
        self.last_ts = 0        # of the last record read, dropped or not
        self._done_bytes = 0
        self._done_over = 0
        self._current: RecordSource | None = self._adopt(open_capture(self.paths[0]))
        self._first = self._current
        self._share: Share | None = None

    def adapter(self) -> SourceAdapter:
        return SourceAdapter(self, self.problems, self.size, self.tls_secrets, lambda: self.bytes_read,
                             lambda: self.caplen_over_wirelen, lambda: self.last_ts, self.drop_foreign)

    def drop_foreign(self, share: Share) -> bool:
        """As the readers' ``drop_foreign``, for every file: their record counts run on."""
        self._share = share
        drop = getattr(self._first, "drop_foreign", None)
        return drop is not None and bool(drop(share))

    def _adopt(self, reader: RecordSource) -> RecordSource:
        reader.problems = self.problems
        if hasattr(reader, "tls_secrets"):
            reader.tls_secrets = self.tls_secrets  # type: ignore[attr-defined]
        return reader

    @property
    def bytes_read(self) -> int:
        return self._done_bytes + (self._current.bytes_read if self._current is not None else 0)

    @property
    def caplen_over_wirelen(self) -> int:
        return self._done_over + getattr(self._current, "caplen_over_wirelen", 0)

    def __iter__(self) -> Iterator[RawRecord]:
        for i, path in enumerate(self.paths):
            if i == 0:
                reader = self._first
            else:
                try:
                    reader = self._current = self._adopt(open_capture(path))
                    if self._share is not None and hasattr(reader, "drop_foreign"):
                        # The earlier files' records, dropped ones included: the count the pipeline keeps.
                        reader.drop_foreign(self._share, self.records)
                except CaptureError as exc:
                    self.problems.append(problem("capture_corrupt", self.last_ts,
                                                 f"{exc}; the rotated capture goes on with the next file"))
                    continue
            try:
                yield from reader  # type: ignore[misc]
            finally:
                self.last_ts = getattr(reader, "last_ts", self.last_ts)
                self._finish(reader)  # type: ignore[arg-type]

    def _finish(self, reader: RecordSource) -> None:
        self._done_bytes += reader.bytes_read
        self._done_over += getattr(reader, "caplen_over_wirelen", 0)
        self.records += getattr(reader, "records", 0)
        self._current = None
        reader.close()

    def close(self) -> None:
        if self._current is not None:
            self._current.close()


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def open_captures(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> RecordSource:
    """One file's reader, or a :class:`ChainSource` over a rotated set given as several paths."""
    if isinstance(paths, (str, os.PathLike)):
        return open_capture(paths)
    paths = list(paths)
    return open_capture(paths[0]) if len(paths) == 1 else ChainSource(paths)
