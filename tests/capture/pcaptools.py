"""Hand-built capture files and packets, and pcap rewriting for the transformation tests.

Builders write bytes with ``struct`` directly so every format variant can be
produced, including the ones no real peer here sends (other link types, byte
orders, pcapng options). The rewriting helpers read with capture's own reader
and write classic pcap again, records reordered, duplicated, dropped, cut or snapped.
"""

from __future__ import annotations

import gzip
import random
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

Record = tuple[int, int, bytes, int]          # (ts_ns, linktype, data, wirelen)

# -- packets -------------------------------------------------------------------------------------

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp(sport: int, dport: int, seq: int, ack: int = 0, flags: int = ACK, payload: bytes = b"",
        options: bytes = b"") -> bytes:
    options += b"\0" * (-len(options) % 4)
    doff = (20 + len(options)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, doff << 4, flags,
                       65535, 0, 0) + options + payload


def ipv4(src: str, dst: str, l4: bytes, proto: int = 6, ident: int = 1, frag: int = 0,
         options: bytes = b"", total: int | None = None) -> bytes:
    options += b"\0" * (-len(options) % 4)
    ihl = 5 + len(options) // 4
    length = ihl * 4 + len(l4) if total is None else total
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, length, ident, frag, 64, proto, 0,
                      bytes(map(int, src.split("."))), bytes(map(int, dst.split(".")))) + options
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + l4


def ip6_addr(a: str) -> bytes:
    import ipaddress
    return ipaddress.IPv6Address(a).packed


def ipv6(src: str, dst: str, l4: bytes, nh: int = 6, ext: Sequence[tuple[int, bytes]] = ()) -> bytes:
    """``ext``: (header type, body) pairs placed before ``l4``; bodies are padded to the header's unit."""
    chain = b""
    types = [t for t, _ in ext] + [nh]
    for i, (t, body) in enumerate(ext):
        nxt = types[i + 1]
        if t == 44:                                      # fragment header: fixed 8 bytes
            chain += bytes([nxt, 0]) + body[:6].ljust(6, b"\0")
        elif t == 51:                                    # AH: length in 4-byte units minus 2
            body = body + b"\0" * (-(len(body) + 2) % 4)
            chain += bytes([nxt, (len(body) + 2) // 4 - 2]) + body
        else:                                            # 8-byte units minus 1
            body = body + b"\0" * (-(len(body) + 2) % 8)
            chain += bytes([nxt, (len(body) + 2) // 8 - 1]) + body
    first = types[0]
    payload = chain + l4
    return struct.pack("!IHBB16s16s", 6 << 28, len(payload), first, 64, ip6_addr(src), ip6_addr(dst)) + payload


def ether(l3: bytes, ethertype: int = 0x0800, vlans: Sequence[tuple[int, int]] = ()) -> bytes:
    """``vlans``: (tpid, vid) outermost first."""
    hdr = b"\x02\0\0\0\0\x01" + b"\x02\0\0\0\0\x02"
    for tpid, vid in vlans:
        hdr += struct.pack("!HH", tpid, vid)
    return hdr + struct.pack("!H", ethertype) + l3


def sll(l3: bytes, proto: int = 0x0800) -> bytes:
    return struct.pack("!HHH8sH", 0, 1, 6, b"\x02\0\0\0\0\x01\0\0", proto) + l3


def sll2(l3: bytes, proto: int = 0x0800) -> bytes:
    return struct.pack("!HHIHBB8s", proto, 0, 1, 1, 0, 6, b"\x02\0\0\0\0\x01\0\0") + l3


def null(l3: bytes, family: int = 2, big_endian: bool = False) -> bytes:
    return struct.pack(">I" if big_endian else "<I", family) + l3


def frame(linktype: int, ip: bytes, v6: bool) -> bytes:
    """An IP packet framed for ``linktype`` (the NULL family in little-endian, LOOP's in big)."""
    et = 0x86DD if v6 else 0x0800
    if linktype == 1:
        return ether(ip, et)
    if linktype == 113:
        return sll(ip, et)
    if linktype == 276:
        return sll2(ip, et)
    if linktype == 0:
        return null(ip, 30 if v6 else 2)
    if linktype == 108:
        return null(ip, 24 if v6 else 2, big_endian=True)
    return ip                                   # 12, 14, 101, 228, 229: raw IP


# -- files ---------------------------------------------------------------------------------------

def pcap_bytes(records: Iterable[Record], linktype: int = 1, order: str = "<", nanos: bool = False,
               snaplen: int = 262144, modified: bool = False) -> bytes:
    magic = 0xA1B23C4D if nanos else (0xA1B2CD34 if modified else 0xA1B2C3D4)
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for ts, _lt, data, wirelen in records:
        sec, ns = divmod(ts, 1_000_000_000)
        frac = ns if nanos else ns // 1000
        out.append(struct.pack(order + "IIII", sec, frac, len(data), wirelen))
        if modified:
            out.append(struct.pack(order + "IHBB", 1, 0x0800, 0, 0))
        out.append(data)
    return b"".join(out)


def _block(order: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def _opts(order: str, opts: Sequence[tuple[int, bytes]]) -> bytes:
    if not opts:
        return b""
    out = b""
    for code, value in opts:
        out += struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)
    return out + b"\0\0\0\0"


def shb(order: str = "<") -> bytes:
    return _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(linktype: int, order: str = "<", tsresol: int | None = None, snaplen: int = 0,
        tsoffset: int | None = None, name: str | None = None) -> bytes:
    opts: list[tuple[int, bytes]] = []
    if name is not None:
        opts.append((2, name.encode()))
    if tsresol is not None:
        opts.append((9, bytes([tsresol])))
    if tsoffset is not None:
        opts.append((14, struct.pack(order + "q", tsoffset)))
    return _block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + _opts(order, opts))


def epb(iface: int, ts_units: int, data: bytes, wirelen: int | None = None, order: str = "<",
        opts: Sequence[tuple[int, bytes]] = ()) -> bytes:
    body = struct.pack(order + "IIIII", iface, ts_units >> 32, ts_units & 0xFFFFFFFF, len(data),
                       len(data) if wirelen is None else wirelen)
    return _block(order, 6, body + data + b"\0" * (-len(data) % 4) + _opts(order, opts))


def spb(data: bytes, wirelen: int | None = None, order: str = "<") -> bytes:
    return _block(order, 3, struct.pack(order + "I", len(data) if wirelen is None else wirelen) + data)


def old_pb(iface: int, ts_units: int, data: bytes, order: str = "<") -> bytes:
    return _block(order, 2, struct.pack(order + "HHIIII", iface, 0, ts_units >> 32, ts_units & 0xFFFFFFFF,
                                        len(data), len(data)) + data)


def isb(iface: int, ifdrop: int, order: str = "<") -> bytes:
    return _block(order, 5, struct.pack(order + "III", iface, 0, 0) +
                  _opts(order, [(5, struct.pack(order + "Q", ifdrop))]))


def custom_block(order: str = "<") -> bytes:
    return _block(order, 0x40000BAD, struct.pack(order + "I", 32473) + b"whatever")


def write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


# -- rewriting real captures ---------------------------------------------------------------------

def read_records(path: str | Path) -> tuple[int, list[Record]]:
    """(link type, records) of a capture, with capture's own reader."""
    from capture.capfile import open_capture
    src = open_capture(path)
    try:
        recs = list(src)
    finally:
        src.close()
    lts = {r[1] for r in recs}
    assert len(lts) <= 1, f"several link types in {path}"
    return (lts.pop() if lts else 1), recs


def write_pcap(path: Path, linktype: int, records: Iterable[Record], snaplen: int = 262144) -> Path:
    path.write_bytes(pcap_bytes(records, linktype, nanos=True, snaplen=snaplen))
    return path


def _tcp_view(rec: Record) -> tuple[bytes, int, int, int, int] | None:
    """(flow key, seq, payload length, ack, flags) of a TCP record, else None."""
    from capture.packet import parser_for
    parse = parser_for(rec[1])
    seg = parse(rec[2], rec[3]) if parse else None
    if not isinstance(seg, tuple):
        return None
    key, _, _, seq, ack, flags, payload, missing = seg
    return key, seq, len(payload) + missing, ack, flags


def reorder_and_duplicate(records: Sequence[Record], seed: int = 1, window: int = 4,
                          dup_rate: float = 0.1) -> list[Record]:
    """Delay some data segments by up to ``window`` records, and repeat some records later.

    As the network does it: a segment is never delayed past an ACK (from the
    other side) that acknowledges it, nor past a reset from the other side,
    since those could not have been sent before the segment arrived.
    Duplicates come after their original.
    """
    from capture.packet import reverse_key
    rng = random.Random(seed)
    out = list(records)
    views = [_tcp_view(r) for r in out]
    i = len(out) - 1
    while i >= 0:
        v = views[i]
        if v is not None and v[2] and rng.random() < 0.5:
            key, seq = v[0], v[1]
            back = reverse_key(key)
            j = i
            while j + 1 < len(out) and j - i < window:
                w = views[j + 1]
                if w is not None and w[0] == back and (
                        w[4] & RST or (w[4] & ACK and ((w[3] - seq) & 0xFFFFFFFF) < 0x80000000 and w[3] != seq)):
                    break                      # that ACK already covers the segment, or that RST answered it
                j += 1
            if j > i:
                out.insert(j, out.pop(i))
                views.insert(j, views.pop(i))
        i -= 1
    final = list(out)
    for _ in range(int(len(out) * dup_rate)):
        k = rng.randrange(len(final))
        final.insert(min(len(final), k + rng.randrange(1, window + 2)), final[k])
    return final


def causal_shuffle(records: Sequence[Record], seed: int = 1, reply_swap: float = 0.3,
                   dup_rate: float = 0.03, near: int = 4) -> list[Record]:
    """Reorder as skewed capture points do, against TCP's causality, then restamp monotonically.

    Neighbouring data segments of one direction are swapped (half the time); a reply
    segment (from the side that answered the SYN) is swapped with the request segment
    just before it, at most ``near`` packets earlier (``reply_swap`` of the time);
    ``dup_rate`` of the segments are repeated a few packets later. Timestamps are then
    given back in their original sorted order, as a capture merged by timestamp would
    show them.
    """
    from capture.packet import reverse_key
    rng = random.Random(seed)
    out = list(records)
    views = [_tcp_view(r) for r in out]

    def data(i: int) -> bool:
        v = views[i]
        return v is not None and v[2] > 0 and not v[4] & (SYN | FIN | RST)

    i = 0
    while i + 1 < len(out):
        if data(i) and data(i + 1) and views[i][0] == views[i + 1][0] and rng.random() < 0.5:
            out[i], out[i + 1] = out[i + 1], out[i]
            views[i], views[i + 1] = views[i + 1], views[i]
            i += 2
            continue
        i += 1
    servers = {v[0] for v in views if v is not None and v[4] & SYN and v[4] & ACK}   # keys of SYN-ACK senders
    last: dict[bytes, int] = {}          # connection (either key) -> index of its latest data segment
    swapped: set[int] = set()
    for j in range(len(out)):
        if not data(j):
            continue
        key = views[j][0]
        i = last.get(key)
        if (i is not None and key in servers and j - i <= near and i not in swapped
                and views[i][0] == reverse_key(key) and rng.random() < reply_swap):
            out[i], out[j] = out[j], out[i]
            views[i], views[j] = views[j], views[i]
            swapped |= {i, j}
        last[key] = last[reverse_key(key)] = j
    final = list(out)
    for _ in range(int(len(out) * dup_rate)):
        k = rng.randrange(len(final))
        final.insert(min(len(final), k + rng.randrange(2, 6)), final[k])
    stamps = sorted(r[0] for r in final)
    return [(t, lt, d, w) for t, (_, lt, d, w) in zip(stamps, final)]


def swap_neighbours(records: Sequence[Record], seed: int = 1, reach: int = 7, swap: float = 0.5,
                    dup_rate: float = 0.03, restamp: bool = True) -> list[Record]:
    """Swap data segments with a later one of the same direction at most ``reach`` packets on (``swap``
    of the time), repeat ``dup_rate`` of the packets a few packets later, then (``restamp``) give the
    timestamps back in sorted order; else each packet keeps its own.

    Unlike :func:`reorder_and_duplicate`, nothing holds a segment ahead of the ACK that covers it:
    taps or queues that reorder show the peer's ACK of bytes before the bytes themselves, and
    restamped, a late copy looks seconds late when the connection was idle in between.
    """
    rng = random.Random(seed)
    out = list(records)
    views = [_tcp_view(r) for r in out]

    # Segments the original capture holds twice (its own retransmissions) stay where they are: which
    # copy comes first decides the time of the bytes.
    copies: dict[tuple[bytes, int], int] = {}
    for v in views:
        if v is not None and v[2]:
            copies[(v[0], v[1])] = copies.get((v[0], v[1]), 0) + 1

    def data(i: int) -> bool:
        v = views[i]
        return v is not None and v[2] > 0 and not v[4] & (SYN | FIN | RST) and copies[(v[0], v[1])] == 1

    moved: set[int] = set()
    for i in range(len(out)):
        if i in moved or not data(i) or rng.random() >= swap:
            continue
        later = [j for j in range(i + 1, min(len(out), i + 1 + reach))
                 if j not in moved and data(j) and views[j][0] == views[i][0]]
        if later:
            j = rng.choice(later)
            out[i], out[j] = out[j], out[i]
            views[i], views[j] = views[j], views[i]
            moved |= {i, j}
    final = list(out)
    for _ in range(int(len(out) * dup_rate)):
        k = rng.randrange(len(final))
        final.insert(min(len(final), k + rng.randrange(2, 8)), final[k])
    if not restamp:
        return final
    stamps = sorted(r[0] for r in final)
    return [(t, lt, d, w) for t, (_, lt, d, w) in zip(stamps, final)]


def drop(records: Sequence[Record], rate: float = 0.01, seed: int = 1) -> list[Record]:
    rng = random.Random(seed)
    return [r for r in records if rng.random() >= rate]


def cut_start(records: Sequence[Record], fraction: float = 0.3) -> list[Record]:
    return list(records[int(len(records) * fraction):])


def snap(records: Sequence[Record], snaplen: int = 200) -> list[Record]:
    return [(ts, lt, data[:snaplen], wirelen) for ts, lt, data, wirelen in records]


# -- synthetic conversations ---------------------------------------------------------------------

class Conversation:
    """A TCP connection written packet by packet, with real sequence numbers and ACKs."""

    def __init__(self, client: tuple[str, int] = ("10.0.0.1", 50312), server: tuple[str, int] = ("10.0.0.2", 9092),
                 isn_client: int = 1000, isn_server: int = 500_000, ts: int = 1_700_000_000_000_000_000,
                 linktype: int = 1, mss: int = 1400) -> None:
        self.client, self.server = client, server
        self.seq = {True: isn_client, False: isn_server}     # next seq, by "from client"
        self.ts = ts
        self.linktype = linktype
        self.mss = mss
        self.records: list[Record] = []

    def _frame(self, from_client: bool, flags: int, payload: bytes, seq: int | None = None) -> bytes:
        src, dst = (self.client, self.server) if from_client else (self.server, self.client)
        s = self.seq[from_client] if seq is None else seq
        seg = tcp(src[1], dst[1], s, self.seq[not from_client] if flags & ACK else 0, flags, payload)
        v6 = ":" in src[0]
        ip = ipv6(src[0], dst[0], seg) if v6 else ipv4(src[0], dst[0], seg)
        return frame(self.linktype, ip, v6)

    def packet(self, from_client: bool, flags: int, payload: bytes = b"") -> Record:
        frame = self._frame(from_client, flags, payload)
        self.ts += 1000
        rec = (self.ts, self.linktype, frame, len(frame))
        self.records.append(rec)
        self.seq[from_client] = (self.seq[from_client] + len(payload) + (1 if flags & (SYN | FIN) else 0)) & 0xFFFFFFFF
        return rec

    def handshake(self) -> Conversation:
        self.packet(True, SYN)
        self.packet(False, SYN | ACK)
        self.packet(True, ACK)
        return self

    def send(self, from_client: bool, data: bytes, ack_after: bool = True) -> Conversation:
        for i in range(0, len(data), self.mss):
            self.packet(from_client, ACK | PSH, data[i:i + self.mss])
        if ack_after:
            self.packet(not from_client, ACK)
        return self

    def close(self) -> Conversation:
        self.packet(True, FIN | ACK)
        self.packet(False, FIN | ACK)
        self.packet(True, ACK)
        return self

    def reset(self, from_client: bool = True) -> Conversation:
        self.packet(from_client, RST | ACK)
        return self


# -- Kafka frames, built by hand (no dependency on the dissector's encoder) ----------------------

def kafka_request(api_key: int, version: int, corr: int, client_id: str = "test-client", body: bytes = b"") -> bytes:
    cid = client_id.encode()
    frame = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + body
    return struct.pack(">i", len(frame)) + frame


def api_versions_request(corr: int, client_id: str = "test-client") -> bytes:
    return kafka_request(18, 0, corr, client_id)


def api_versions_response(corr: int) -> bytes:
    entries = [(0, 0, 9), (1, 0, 13), (3, 0, 12), (18, 0, 3)]
    body = struct.pack(">ihi", corr, 0, len(entries)) + b"".join(struct.pack(">hhh", *e) for e in entries)
    return struct.pack(">i", len(body)) + body


def metadata_request(corr: int, topics: Sequence[str] = ("test",), client_id: str = "test-client") -> bytes:
    body = struct.pack(">i", len(topics)) + b"".join(struct.pack(">h", len(t)) + t.encode() for t in topics)
    return kafka_request(3, 0, corr, client_id, body)
