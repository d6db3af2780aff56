"""pcapng files: several sections, several interfaces each with its own link type and clock.

Handles Enhanced, Simple and obsolete Packet Blocks; skips every other block
type except Interface Statistics (their drop counters are reported). Same
chunked ``struct`` loop as :mod:`capture.pcapfile`, for the same speed reason.

Compiled build (``pcapng.pxd``): as for :mod:`capture.pcapfile`, only the compiled reader drops other
shares' packets before they are read: hashing every frame to drop it early pays only in C.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from capture.packet import IPV4_AT
from capture.records import RawRecord, problem
from capture.shard import Dropping, Share, frame_share
from capture.sources import Reader, SourceAdapter
from capture.stream import CHUNK, ByteStream
from hotpath import compiled_file
from dissector.events import Anomaly

_COMPILED = compiled_file(__file__)

SHB = 0x0A0D0D0A
IDB, PB, SPB, NRB, ISB, EPB = 1, 2, 3, 4, 5, 6
DSB = 10                     # Decryption Secrets Block
DSB_TLS_KEY_LOG = 0x544C534B  # "TLSK": NSS key log lines
KNOWN_BLOCKS = frozenset({SHB, IDB, PB, SPB, NRB, ISB, EPB, 7, 9, 10, 0x0BAD, 0x40000BAD})
BOM = 0x1A2B3C4D
MAX_BLOCK = 1 << 26          # 64 MiB: larger than any real packet block
RESYNC_WINDOW = 1 << 20

OPT_IF_NAME, OPT_IF_TSRESOL, OPT_IF_TSOFFSET = 2, 9, 14
OPT_EPB_DROPCOUNT = 4
OPT_ISB_IFDROP, OPT_ISB_OSDROP = 5, 7


@dataclass
class Interface:
    linktype: int
    snaplen: int
    mul: int            # ns = raw * mul // div + offset_ns
    div: int
    offset_ns: int
    name: str | None


def _options(buf: bytes, start: int, end: int, order: str) -> Iterator[tuple[int, bytes]]:
    hdr = struct.Struct(order + "HH").unpack_from
    while start + 4 <= end:
        code, length = hdr(buf, start)
        if code == 0:
            return
        value = buf[start + 4:start + 4 + length]
        if len(value) < length:
            return
        yield code, value
        start += 4 + ((length + 3) & ~3)


def _interface(buf: bytes, pos: int, blen: int, order: str) -> Interface:
    linktype, _, snaplen = struct.unpack_from(order + "HHI", buf, pos + 8)
    mul, div, offset_ns, name = 1000, 1, 0, None     # default resolution: microseconds
    for code, value in _options(buf, pos + 16, pos + blen - 4, order):
        if code == OPT_IF_TSRESOL and value:
            r = value[0]
            if r & 0x80:
                mul, div = 1_000_000_000, 1 << (r & 0x7F)
            elif r <= 9:
                mul, div = 10 ** (9 - r), 1
            else:
                mul, div = 1, 10 ** (r - 9)
        elif code == OPT_IF_TSOFFSET and len(value) == 8:
            offset_ns = struct.unpack(order + "q", value)[0] * 1_000_000_000
        elif code == OPT_IF_NAME:
            name = value.rstrip(b"\0").decode("utf-8", "replace")
    return Interface(linktype, snaplen, mul, div, offset_ns, name)


class PcapngReader(Reader):
    """Yields :data:`RawRecord` tuples from a pcapng stream; damage goes to ``problems``."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self.problems: list[Anomaly] = []
        self.bytes_read = 0
        self.size = stream.size
        self.records = 0
        self.sections = 0
        self.interfaces: list[Interface] = []     # of the current section
        self.caplen_over_wirelen = 0
        self.tls_secrets: list[bytes] = []        # TLS key log text of DSBs, in file order (TLS layer reads it)
        self._buf = b""
        self._pos = 0
        self._base = 0          # file offset of _buf[0]
        self._order = "<"       # byte order of the current section
        self.last_ts = 0        # of the last record read, dropped or not (set when reading ends)
        self._dropping = Dropping()

    def adapter(self) -> SourceAdapter:
        return SourceAdapter(self, self.problems, self.size, self.tls_secrets, lambda: self.bytes_read,
                             lambda: self.caplen_over_wirelen, lambda: self.last_ts, self.drop_foreign)

    def drop_foreign(self, share: Share, seen: int = 0) -> bool:
        """As :meth:`capture.pcapfile.PcapReader.drop_foreign`, for the Enhanced Packet Blocks of the fast path."""
        if not _COMPILED or share.count <= 1:
            return False
        self._dropping = Dropping(share, seen)
        return True

    def close(self) -> None:
        self._stream.close()

    def _problem(self, kind: str, ts: int, detail: str, **extra: object) -> None:
        self.problems.append(problem(kind, ts, f"{self._stream.name}: {detail}", **extra))

    def _fill(self, need: int) -> bool:
        """Make ``need`` bytes available from ``_pos``; False at end of file."""
        while len(self._buf) - self._pos < need:
            more = self._stream.read(max(CHUNK, need))
            self.bytes_read = self._stream.position
            if not more:
                return False
            self._base += self._pos
            self._buf = self._buf[self._pos:] + more
            self._pos = 0
        return True

    def __iter__(self) -> Iterator[RawRecord]:
        last_ts = 0
        count = 0
        order = "<"
        ifaces: list[Interface] = []
        hdr = struct.Struct("<II").unpack_from
        epb = struct.Struct("<IIIII").unpack_from
        block = struct.Struct("<IIIIIII").unpack_from     # an EPB's header and fixed fields at once
        u32 = struct.Struct("<I").unpack_from
        over = 0
        spb_note = False
        # Per interface: linktype, and ts = units * mul // div + offset; div is 0 when mul
        # units are whole nanoseconds (the usual µs and ns), which spares the division.
        # With l3, et_at: where fast_ipv4 reads the frame, when other shares' packets are dropped (else -1).
        conv: list[tuple[int, int, int, int, int, int]] = []
        dropping = self._dropping
        base, shares, mine = dropping.seen, dropping.count, dropping.index
        dropped = 0
        try:
            while True:
                # Fast path: whole, consistent Enhanced Packet Blocks without options, one after
                # another. The position stays local until a block leaves the path.
                buf, pos = self._buf, self._pos
                n = len(buf)
                while n - pos >= 32:
                    btype, blen, iface, hi, lo, caplen, wirelen = block(buf, pos)
                    end = pos + blen
                    if (btype != EPB or end > n or iface >= len(conv) or caplen > wirelen
                            or blen != 32 + ((caplen + 3) & ~3) or u32(buf, end - 4)[0] != blen):
                        break
                    lt, mul, div, off, l3, et_at = conv[iface]
                    last_ts = (((hi << 32) | lo) * mul // div if div else ((hi << 32) | lo) * mul) + off
                    count += 1
                    start = pos + 28
                    pos = end
                    if (l3 >= 0 and (base + count) & 4095
                            and frame_share(buf, start, caplen, l3, et_at, shares) not in (-1, mine)):
                        dropped += 1
                        continue
                    if dropped:
                        yield dropped  # type: ignore[misc]  # a Dropped run
                        dropped = 0
                    yield (last_ts, lt, buf[start:start + caplen], wirelen)
                if dropped:
                    yield dropped  # type: ignore[misc]  # a Dropped run
                    dropped = 0
                self._pos = pos
                if not self._fill(8):
                    left = len(self._buf) - self._pos
                    if left:
                        self._problem("capture_truncated", last_ts,
                                      f"file ends {left} bytes into a block header (offset "
                                      f"{self._base + self._pos}); {count} packets read",
                                      offset=self._base + self._pos, records=count)
                    return
                buf, pos = self._buf, self._pos
                btype, blen = hdr(buf, pos)
                if btype == SHB:
                    if not self._fill(28):
                        self._problem("capture_truncated", last_ts,
                                      f"file ends inside a section header block ({len(self._buf) - self._pos} of "
                                      "its first 28 bytes)", offset=self._base + self._pos)
                        return
                    buf, pos = self._buf, self._pos
                    bom = buf[pos + 8:pos + 12]
                    if bom == b"\x4d\x3c\x2b\x1a":
                        order = "<"
                    elif bom == b"\x1a\x2b\x3c\x4d":
                        order = ">"
                    else:
                        if self._resync(last_ts, count, "section header with a bad byte-order magic"):
                            continue
                        return
                    hdr = struct.Struct(order + "II").unpack_from
                    epb = struct.Struct(order + "IIIII").unpack_from
                    block = struct.Struct(order + "IIIIIII").unpack_from
                    u32 = struct.Struct(order + "I").unpack_from
                    btype, blen = hdr(buf, pos)
                    major = struct.unpack_from(order + "H", buf, pos + 12)[0]
                    if major != 1:
                        self._problem("capture_corrupt", last_ts,
                                      f"section {self.sections + 1} has pcapng version {major}; stopped",
                                      offset=self._base + pos)
                        return
                    self.sections += 1
                    self._order = order
                    ifaces = self.interfaces = []
                    conv = []
                if blen < 12 or blen & 3 or blen > MAX_BLOCK:
                    if self._resync(last_ts, count, f"block of type {btype:#x} with length {blen}"):
                        continue
                    return
                if not self._fill(blen):
                    got = len(self._buf) - self._pos
                    at = self._base + self._pos
                    self._problem("capture_truncated", last_ts,
                                  f"file ends inside a block of type {btype:#x} (offset {at}): {got} of "
                                  f"{blen} bytes present; {count} packets read", offset=at, records=count)
                    return
                buf, pos = self._buf, self._pos
                if u32(buf, pos + blen - 4)[0] != blen:
                    if self._resync(last_ts, count, f"block of type {btype:#x} whose trailing length "
                                                    "does not match its leading length"):
                        continue
                    return
                self._pos = pos + blen
                if btype == EPB:
                    if blen < 32:
                        self._bad_packet_block(last_ts, pos, blen, 0, 0, 1)
                        continue
                    iface, hi, lo, caplen, wirelen = epb(buf, pos + 8)
                    if caplen > blen - 32 or iface >= len(ifaces):
                        self._bad_packet_block(last_ts, pos, blen, caplen, iface, len(ifaces))
                        continue
                    itf = ifaces[iface]
                    last_ts = ((hi << 32) | lo) * itf.mul // itf.div + itf.offset_ns
                    if caplen > wirelen:
                        if not over:
                            self._over(last_ts, count, caplen, wirelen)
                        over += 1
                    if blen > 32 + ((caplen + 3) & ~3):
                        self._packet_options(buf, pos + 28 + ((caplen + 3) & ~3), pos + blen - 4,
                                             order, last_ts)
                    count += 1
                    yield (last_ts, itf.linktype, buf[pos + 28:pos + 28 + caplen], wirelen)
                elif btype == SPB:
                    if not ifaces or blen < 16:
                        self._bad_packet_block(last_ts, pos, blen, 0, 0, 0)
                        continue
                    itf = ifaces[0]
                    wirelen = u32(buf, pos + 8)[0]
                    caplen = min(wirelen, blen - 16)
                    if itf.snaplen:
                        caplen = min(caplen, itf.snaplen)
                    if not spb_note:
                        spb_note = True
                        self._problem("no_timestamps", last_ts,
                                      "Simple Packet Blocks carry no timestamp; using the previous packet's")
                    count += 1
                    yield (last_ts, itf.linktype, buf[pos + 12:pos + 12 + caplen], wirelen)
                elif btype == PB:
                    if blen < 32:
                        self._bad_packet_block(last_ts, pos, blen, 0, 0, 1)
                        continue
                    iface, _drops, hi, lo, caplen, wirelen = struct.unpack_from(order + "HHIIII", buf, pos + 8)
                    if caplen > blen - 32 or iface >= len(ifaces):
                        self._bad_packet_block(last_ts, pos, blen, caplen, iface, len(ifaces))
                        continue
                    itf = ifaces[iface]
                    last_ts = ((hi << 32) | lo) * itf.mul // itf.div + itf.offset_ns
                    count += 1
                    yield (last_ts, itf.linktype, buf[pos + 28:pos + 28 + caplen], wirelen)
                elif btype == IDB:
                    if blen < 20:
                        self._problem("capture_corrupt", last_ts, "interface block too short; skipped",
                                      offset=self._base + pos)
                        continue
                    itf = _interface(buf, pos, blen, order)
                    ifaces.append(itf)
                    conv.append((itf.linktype, itf.mul, 0 if itf.div == 1 else itf.div, itf.offset_ns,
                                 *(IPV4_AT.get(itf.linktype, (-1, -1)) if shares > 1 else (-1, -1))))
                elif btype == ISB and blen >= 24:
                    self._statistics(buf, pos, blen, order, last_ts, ifaces)
                elif btype == DSB and blen >= 20:
                    stype, slen = struct.unpack_from(order + "II", buf, pos + 8)
                    if stype == DSB_TLS_KEY_LOG and 16 + slen <= blen - 4:
                        self.tls_secrets.append(bytes(buf[pos + 16:pos + 16 + slen]))
        finally:
            self.records = count
            self.last_ts = last_ts
            self.caplen_over_wirelen = over
            for p in self._stream.problems:
                p.ts = last_ts
                self.problems.append(p)
            self._stream.problems.clear()

    def _over(self, ts: int, count: int, caplen: int, wirelen: int) -> None:
        self._problem("caplen_exceeds_wirelen", ts,
                      f"packet {count + 1} holds {caplen} bytes but says the packet had {wirelen}: "
                      "a broken writer; trusting the captured bytes (reported once)",
                      record=count + 1, caplen=caplen, wirelen=wirelen)

    def _bad_packet_block(self, ts: int, pos: int, blen: int, caplen: int, iface: int, nifaces: int) -> None:
        at = self._base + pos
        if iface >= nifaces:
            why = f"names interface {iface} but the section declares {nifaces}"
        else:
            why = f"claims {caplen} captured bytes in a {blen}-byte block"
        self._problem("capture_corrupt", ts, f"packet block at offset {at} {why}; skipped", offset=at)

    def _packet_options(self, buf: bytes, start: int, end: int, order: str, ts: int) -> None:
        for code, value in _options(buf, start, end, order):
            if code == OPT_EPB_DROPCOUNT and len(value) == 8:
                drops = struct.unpack(order + "Q", value)[0]
                if drops:
                    self._problem("capture_drops", ts,
                                  f"the capturing tool lost {drops} packets before this one", dropped=drops)

    def _statistics(self, buf: bytes, pos: int, blen: int, order: str, ts: int,
                    ifaces: list[Interface]) -> None:
        iface = struct.unpack_from(order + "I", buf, pos + 8)[0]
        for code, value in _options(buf, pos + 20, pos + blen - 4, order):
            if code in (OPT_ISB_IFDROP, OPT_ISB_OSDROP) and len(value) == 8:
                drops = struct.unpack(order + "Q", value)[0]
                if drops:
                    where = "interface" if code == OPT_ISB_IFDROP else "operating system"
                    name = ifaces[iface].name if iface < len(ifaces) else None
                    self._problem("capture_drops", ts,
                                  f"{drops} packets dropped by the {where} on interface "
                                  f"{name or iface} (capture statistics)", dropped=drops, interface=iface)

    def _resync(self, ts: int, count: int, what: str) -> bool:
        """Skip to the next plausible block after a corrupt one; False means give up."""
        self._fill(RESYNC_WINDOW)
        buf, pos = self._buf, self._pos
        at = self._base + pos
        end = min(len(buf) - 12, pos + RESYNC_WINDOW)
        for p in range(pos + 4, end + 1, 4):
            t = struct.unpack_from(self._order + "I", buf, p)[0]
            if t == SHB:
                bom = buf[p + 8:p + 12]
                order = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else ""
                if not order:
                    continue
            elif t in KNOWN_BLOCKS:
                order = self._order        # a resync stays inside the current section
            else:
                continue
            ln = struct.unpack_from(order + "I", buf, p + 4)[0]
            if ln < 12 or ln & 3 or ln > MAX_BLOCK or p + ln > len(buf):
                continue
            if struct.unpack_from(order + "I", buf, p + ln - 4)[0] == ln:
                self._problem("capture_corrupt", ts,
                              f"corrupt {what} at offset {at}; skipped {p - pos} bytes to the next "
                              "plausible block", offset=at, skipped=p - pos, records=count)
                self._pos = p
                return True
        self._problem("capture_corrupt", ts,
                      f"corrupt {what} at offset {at}, and no plausible block follows within "
                      f"{RESYNC_WINDOW} bytes; stopped after {count} packets", offset=at, records=count)
        return False
