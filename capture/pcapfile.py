"""Classic libpcap files: µs and ns magic, both byte orders, and Kuznetsov's 24-byte record variant.

A plain ``struct`` loop over 1 MiB chunks rather than scapy's ``RawPcapReader``:
scapy reads every record with two ``file.read`` calls and builds a metadata
object per packet, measured about 4x slower than this loop.

Compiled build (``pcapfile.pxd``): :func:`_plain_records` is a C loop over a pointer into its chunk
(every read inside the ``n`` bytes checked), where a record cost ~4,000 instructions in the
generator's ``struct`` call, Python-int arithmetic and slicing; as Python it reads the same fields
byte by byte. Only the compiled reader drops other shares' packets before they are read
(:meth:`PcapReader.drop_foreign`): hashing every frame to drop it early pays only in C.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from capture.packet import IPV4_AT
from capture.records import Dropped, RawRecord, problem
from capture.shard import Dropping, Share, frame_share
from capture.sources import Reader, SourceAdapter
from capture.stream import CHUNK, ByteStream
from hotpath import compiled_file
from dissector.events import Anomaly

MAX_SNAPLEN = 262144           # libpcap's and Wireshark's cap on a sane record
# Read size: below the C allocator's threshold for memory of its own (128 KiB), so each chunk reuses the
# last one's pages; a new 1 MiB chunk (stream.CHUNK) took fresh ones, ~2,300 page faults reading a 7.5 MB
# capture (~5 % of its decode's CPU). A record cut by a chunk's end is read whole by the loop below.
READ = 64 << 10
RESYNC_WINDOW = 1 << 20        # how far past a corrupt record header to look for the next good one

_COMPILED = compiled_file(__file__)

# magic -> (byte order, ns per fraction unit, record header length)
MAGICS: dict[bytes, tuple[str, int, int]] = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000, 16),
    b"\xa1\xb2\xc3\xd4": (">", 1000, 16),
    b"\x4d\x3c\xb2\xa1": ("<", 1, 16),
    b"\xa1\xb2\x3c\x4d": (">", 1, 16),
    b"\x34\xcd\xb2\xa1": ("<", 1000, 24),   # "modified" pcap: + ifindex, protocol, pkt_type, pad
    b"\xa1\xb2\xcd\x34": (">", 1000, 24),
}


class PcapReader(Reader):
    """Yields :data:`RawRecord` tuples from a pcap stream; damage goes to ``problems``."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self.problems: list[Anomaly] = []
        self.bytes_read = 0
        self.size = stream.size
        self.linktype = -1
        self.snaplen = 0
        self.caplen_over_wirelen = 0     # records whose caplen exceeds their original length
        self.records = 0
        self.last_ts = 0                 # of the last record read, dropped or not (set when reading ends)
        self._dropping = Dropping()

    def adapter(self) -> SourceAdapter:
        return SourceAdapter(self, self.problems, self.size, None, lambda: self.bytes_read,
                             lambda: self.caplen_over_wirelen, lambda: self.last_ts, self.drop_foreign)

    def drop_foreign(self, share: Share, seen: int = 0) -> bool:
        """Drop the packets of connections another share decodes before they are read into Python
        objects; runs of them are yielded as their number (see :class:`capture.shard.Dropping`).
        ``seen``: records before this file's first (a rotated capture's earlier files). True when
        it will (see the module docstring for when it does not).
        """
        if not _COMPILED or share.count <= 1:
            return False
        self._dropping = Dropping(share, seen)
        return True

    def close(self) -> None:
        self._stream.close()

    def _problem(self, kind: str, ts: int, detail: str, **extra: object) -> None:
        self.problems.append(problem(kind, ts, f"{self._stream.name}: {detail}", **extra))

    def __iter__(self) -> Iterator[RawRecord]:
        stream = self._stream
        read = stream.read
        head = read(24)
        magic = head[:4]
        order, frac_ns, hlen = MAGICS[magic]
        if len(head) < 24:
            self._problem("capture_truncated", 0, f"file ends inside the pcap header ({len(head)} of its 24 bytes)")
            return
        _, _, _, _, snaplen, network = struct.unpack(order + "HHiIII", head[4:24])
        # High bits carry the FCS length flag; the link type is the low 16.
        linktype = network & 0xFFFF
        self.linktype, self.snaplen = linktype, snaplen
        limit = max(snaplen if snaplen <= 0x10000000 else 0, MAX_SNAPLEN)
        soft = snaplen if 0 < snaplen < limit else limit    # above: inconsistent; above limit: corrupt
        over_snap = False
        little = order == "<"
        dropping = self._dropping
        base = dropping.seen
        l3, ethertype_at = IPV4_AT.get(linktype, (-1, -1)) if dropping.count > 1 else (-1, -1)
        unpack = struct.Struct(order + "IIII").unpack_from
        ns = 1_000_000_000
        buf = b""
        pos = 0
        n = 0
        offset_base = 24        # file offset of buf[0], for problem reports
        last_ts = 0
        count = 0
        over = 0
        try:
            while True:
                if n - pos < hlen:
                    more = read(READ)
                    self.bytes_read = stream.position
                    if not more:
                        break
                    offset_base += pos
                    buf = buf[pos:] + more
                    pos = 0
                    n = len(buf)
                    continue
                batch: list[RawRecord | Dropped] = []
                dropping.seen = base + count
                pos_after = _plain_records(buf, pos, n, hlen, little, frac_ns, soft, linktype, l3, ethertype_at,
                                           dropping, batch)
                if batch:
                    last_ts = dropping.last_ts
                    count = dropping.seen - base
                    pos = pos_after
                    for rec in batch:
                        yield rec  # type: ignore[misc]  # records and Dropped runs
                    continue
                # The record at pos needs more bytes, goes past the snaplen, or is longer than its packet.
                sec, frac, caplen, wirelen = unpack(buf, pos)
                end = pos + hlen + caplen
                if caplen > soft:
                    if caplen > limit:
                        buf, pos, n, offset_base = self._resync(
                            buf, pos, n, offset_base, last_ts, limit, unpack, hlen, frac_ns, caplen, count)
                        if pos < 0:
                            return
                        continue
                    if not over_snap:
                        over_snap = True
                        self._problem("caplen_exceeds_snaplen", sec * ns + frac * frac_ns,
                                      f"record {count + 1} holds {caplen} bytes, more than the file's snaplen "
                                      f"{snaplen}; read anyway (reported once)", record=count + 1, caplen=caplen)
                if end > n:
                    more = read(max(READ, end - n))
                    self.bytes_read = stream.position
                    if not more:
                        break
                    offset_base += pos
                    buf = buf[pos:] + more
                    pos = 0
                    n = len(buf)
                    continue
                if caplen > wirelen:
                    if not over:
                        self._problem(
                            "caplen_exceeds_wirelen", sec * ns + frac * frac_ns,
                            f"record {count + 1} holds {caplen} bytes but says the packet had {wirelen}: "
                            "a broken writer; trusting the captured bytes (reported once)",
                            record=count + 1, caplen=caplen, wirelen=wirelen)
                    over += 1
                last_ts = sec * ns + frac * frac_ns
                count += 1
                yield (last_ts, linktype, buf[pos + hlen:end], wirelen)
                pos = end
            # Loop ends at EOF: anything left over is a record cut short.
            left = n - pos
            if left:
                at = offset_base + pos
                if left < hlen:
                    self._problem("capture_truncated", last_ts,
                                  f"file ends {left} bytes into the header of record {count + 1} "
                                  f"(offset {at}); {count} records read", offset=at, records=count)
                else:
                    sec, frac, caplen, wirelen = unpack(buf, pos)
                    got = left - hlen
                    self._problem("capture_truncated", last_ts,
                                  f"file ends inside record {count + 1} (offset {at}): {got} of its "
                                  f"{caplen} bytes present; delivered as a truncated packet",
                                  offset=at, records=count, missing=caplen - got)
                    if got:
                        count += 1
                        last_ts = sec * ns + frac * frac_ns
                        yield (last_ts, linktype, buf[pos + hlen:], max(wirelen, caplen))
        finally:
            self.records = count
            self.last_ts = last_ts
            self.caplen_over_wirelen = over
            for p in stream.problems:
                p.ts = last_ts
                self.problems.append(p)
            stream.problems.clear()

    def _resync(self, buf: bytes, pos: int, n: int, offset_base: int, last_ts: int, limit: int,
                unpack: Callable[[bytes, int], tuple[int, ...]], hlen: int, frac_ns: int, caplen: int,
                count: int) -> tuple[bytes, int, int, int]:
        """Find the next plausible record header after a corrupt one; pos -1 means give up."""
        while n - pos < RESYNC_WINDOW:
            more = self._stream.read(CHUNK)
            self.bytes_read = self._stream.position
            if not more:
                break
            buf = buf[pos:] + more
            offset_base += pos
            pos = 0
            n = len(buf)
        at = offset_base + pos
        max_frac = 1_000_000_000 // frac_ns
        last_sec = last_ts // 1_000_000_000

        def plausible(p: int) -> bool:
            if p + hlen > n:
                return False
            s, f, c, w = unpack(buf, p)
            if c > limit or f >= max_frac or w > (1 << 24) or c > w + 64:
                return False
            return not last_ts or abs(s - last_sec) < 7 * 86400

        for p in range(pos + 1, min(n - hlen, pos + RESYNC_WINDOW) + 1):
            if plausible(p):
                c = unpack(buf, p)[2]
                nxt = p + hlen + c
                if nxt == n or (nxt < n and plausible(nxt)):
                    self._problem("capture_corrupt", last_ts,
                                  f"record {count + 1} at offset {at} claims {caplen} bytes (limit {limit}): "
                                  f"corrupt; skipped {p - pos} bytes to the next plausible record",
                                  offset=at, skipped=p - pos, records=count)
                    return buf, p, n, offset_base
        self._problem("capture_corrupt", last_ts,
                      f"record {count + 1} at offset {at} claims {caplen} bytes (limit {limit}) and no "
                      f"plausible record follows within {RESYNC_WINDOW} bytes; stopped after {count} records",
                      offset=at, records=count)
        return buf, -1, n, offset_base


def _plain_records(b: bytes, pos: int, n: int, hlen: int, little: bool, frac_ns: int, soft: int,
                   linktype: int, l3: int, ethertype_at: int, dropping: Dropping,
                   out: list[RawRecord | Dropped]) -> int:
    """Append the records from ``pos`` on that need nothing said about them (whole in ``b``,
    within the snaplen, no longer than their packet) to ``out``; return where the first other
    one starts. The reader's loop, which handles that one, yields these as they are.
    ``dropping.seen`` and ``.last_ts`` count and time every record taken, kept or not.

    With ``l3`` >= 0 (see :meth:`PcapReader.drop_foreign`), a TCP/IPv4 frame whose IP
    header is at ``l3`` and whose connection is another share's is dropped, and each run of
    dropped records goes to ``out`` as its length.
    """
    p = b
    seen = dropping.seen
    index = dropping.index
    count = dropping.count
    dropped = 0
    ts = 0
    while n - pos >= hlen:
        if little:
            sec = p[pos] | (p[pos + 1] << 8) | (p[pos + 2] << 16) | (p[pos + 3] << 24)
            frac = p[pos + 4] | (p[pos + 5] << 8) | (p[pos + 6] << 16) | (p[pos + 7] << 24)
            caplen = p[pos + 8] | (p[pos + 9] << 8) | (p[pos + 10] << 16) | (p[pos + 11] << 24)
            wirelen = p[pos + 12] | (p[pos + 13] << 8) | (p[pos + 14] << 16) | (p[pos + 15] << 24)
        else:
            sec = (p[pos] << 24) | (p[pos + 1] << 16) | (p[pos + 2] << 8) | p[pos + 3]
            frac = (p[pos + 4] << 24) | (p[pos + 5] << 16) | (p[pos + 6] << 8) | p[pos + 7]
            caplen = (p[pos + 8] << 24) | (p[pos + 9] << 16) | (p[pos + 10] << 8) | p[pos + 11]
            wirelen = (p[pos + 12] << 24) | (p[pos + 13] << 16) | (p[pos + 14] << 8) | p[pos + 15]
        end = pos + hlen + caplen
        if caplen > soft or end > n or caplen > wirelen:
            break
        ts = sec * 1_000_000_000 + frac * frac_ns
        seen += 1
        if l3 >= 0 and seen & 4095 and frame_share(b, pos + hlen, caplen, l3, ethertype_at, count) not in (-1, index):
            dropped += 1
        else:
            if dropped:
                out.append(dropped)
                dropped = 0
            out.append((ts, linktype, p[pos + hlen:end], wirelen))
        pos = end
    if dropped:
        out.append(dropped)
    if seen != dropping.seen:
        dropping.seen = seen
        dropping.last_ts = ts
    return pos


def skip_records(b: bytes, at: int, stop: int, hlen: int, little: bool, n: int, every: int) -> tuple[int, int]:
    """Step over records of ``b`` by their headers' captured lengths, from offset ``at``, the ``n``-th
    record: (records counted, offset reached). Stops at a record whose header does not end within
    ``stop`` (at most ``len(b)``) and at one whose index is a multiple of ``every``, which the caller
    looks into (:func:`kdissect.run.ranges.survey`: walked in C, every 64th record parsed in Python)."""
    p = b
    if stop > len(b):
        stop = len(b)
    while at + hlen <= stop and n % every:
        c = at + 8
        if little:
            caplen = p[c] | (p[c + 1] << 8) | (p[c + 2] << 16) | (p[c + 3] << 24)
        else:
            caplen = (p[c] << 24) | (p[c + 1] << 16) | (p[c + 2] << 8) | p[c + 3]
        at += hlen + caplen
        n += 1
    return n, at
