"""Link layer, IPv4/IPv6 and TCP headers, straight from raw bytes.

One parser per link type, ``parser(data, wirelen)``, returns either

* a :data:`Segment` tuple ``(key, sport, dport, seq, ack, flags, payload, missing)``;
  ``key`` is the source address, destination address and both ports as one bytes
  object (12 bytes for IPv4, 36 for IPv6): the cheapest hashable flow key, and
  :func:`reverse_key` gives the other direction's;
  ``missing`` is how many payload bytes the capture did not keep (snaplen);
* ``None`` for anything that is not TCP over IP (skipped quietly);
* a :class:`PacketIssue` for a packet worth reporting (fragment, cut header, malformed).

No objects per packet besides the tuple and the slices; no scapy.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from dataclasses import dataclass

from capture import linktypes

Segment = tuple[bytes, int, int, int, int, int, bytes, int]

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
AF_INET6_VALUES = frozenset({10, 24, 28, 30})    # Linux, OpenBSD/NetBSD, FreeBSD, Darwin

_IP4 = struct.Struct("!BxHxxHxB").unpack_from          # version/ihl, total length, flags/fragment, protocol
_IP6 = struct.Struct("!BxxxHB").unpack_from            # version, payload length, next header
_TCP = struct.Struct("!HHIIBB").unpack_from             # ports, seq, ack, data offset, flags
_U16 = struct.Struct("!H").unpack_from


@dataclass(frozen=True)
class PacketIssue:
    kind: str          # ip_fragment, truncated_header, malformed
    detail: str


TRUNCATED_IP = PacketIssue("truncated_header", "IP header cut by the capture's snaplen; packet skipped")
TRUNCATED_TCP = PacketIssue("truncated_header", "TCP header cut by the capture's snaplen; packet skipped")
BAD_IP4 = PacketIssue("malformed", "IPv4 header with a bad version or length; packet skipped")
BAD_IP6 = PacketIssue("malformed", "IPv6 extension headers run past the packet; packet skipped")
BAD_TCP = PacketIssue("malformed", "TCP data offset outside the packet; packet skipped")

ParseResult = Segment | PacketIssue | None
Parser = Callable[[bytes, int], ParseResult]


def ipv4(data: bytes, off: int, wirelen: int) -> ParseResult:
    n = len(data)
    if n < off + 20:
        return TRUNCATED_IP if n > off else None
    vhl, total, frag, proto = _IP4(data, off)
    if proto != 6:
        return None
    ihl = (vhl & 15) << 2
    if vhl >> 4 != 4 or ihl < 20 or (total and total < ihl):
        return BAD_IP4
    if frag & 0x3FFF:
        return _fragment4(data, off, frag)
    # Total length 0 is what TCP segmentation offload leaves in a sender-side capture.
    end = off + total if total else n + max(wirelen - n, 0)
    return _tcp(data, off + ihl, end, data[off + 12:off + 20])


def _tcp(data: bytes, l4: int, end: int, addresses: bytes) -> ParseResult:
    """The TCP segment at ``l4``; the IP layer ends at ``end`` (past ``len(data)`` when cut by the snaplen)."""
    n = len(data)
    if n < l4 + 20:
        return TRUNCATED_TCP
    sport, dport, seq, ack, doff, flags = _TCP(data, l4)
    start = l4 + ((doff >> 4) << 2)
    if start > end or doff < 0x50:
        return BAD_TCP
    key = addresses + data[l4:l4 + 4]
    if end <= n:
        return (key, sport, dport, seq, ack, flags, data[start:end], 0)
    return (key, sport, dport, seq, ack, flags, data[start:n], end - max(n, start))


def _fragment4(data: bytes, off: int, frag: int) -> PacketIssue:
    src = ipaddress.IPv4Address(data[off + 12:off + 16])
    dst = ipaddress.IPv4Address(data[off + 16:off + 20])
    ident = _U16(data, off + 4)[0]
    where = f"offset {(frag & 0x1FFF) * 8}" if frag & 0x1FFF else "first fragment"
    return PacketIssue("ip_fragment", f"IPv4 fragment {src} -> {dst} id {ident} ({where}): "
                                      "fragments are not reassembled; the TCP stream shows a gap")


def ipv6(data: bytes, off: int, wirelen: int) -> ParseResult:
    n = len(data)
    if n < off + 40:
        return TRUNCATED_IP if n > off else None
    ver, plen, nh = _IP6(data, off)
    if ver >> 4 != 6:
        return BAD_IP6
    p = off + 40
    while nh != 6:
        if p + 8 > n:
            return TRUNCATED_IP if nh in (0, 43, 44, 51, 60) else None
        if nh == 0 or nh == 43 or nh == 60:          # hop-by-hop, routing, destination options
            nh, p = data[p], p + ((data[p + 1] + 1) << 3)
        elif nh == 44:
            return _fragment6(data, off, p)
        elif nh == 51:                               # authentication header
            nh, p = data[p], p + ((data[p + 1] + 2) << 2)
        else:
            return None
    end = off + 40 + plen if plen else n + max(wirelen - n, 0)   # 0: jumbogram or offload
    return _tcp(data, p, end, data[off + 8:off + 40])


def _fragment6(data: bytes, off: int, p: int) -> PacketIssue | None:
    if data[p] != 6 and _U16(data, p + 2)[0] & 0xFFF8 == 0:
        return None     # a first fragment of something other than TCP
    src = ipaddress.IPv6Address(data[off + 8:off + 24])
    dst = ipaddress.IPv6Address(data[off + 24:off + 40])
    fo = _U16(data, p + 2)[0] & 0xFFF8
    where = f"offset {fo}" if fo else "first fragment"
    return PacketIssue("ip_fragment", f"IPv6 fragment {src} -> {dst} ({where}): "
                                      "fragments are not reassembled; the TCP stream shows a gap")


def _by_ethertype(data: bytes, et: int, off: int, wirelen: int) -> ParseResult:
    while et in VLAN_TPIDS:
        if len(data) < off + 4:
            return None
        et = (data[off + 2] << 8) | data[off + 3]
        off += 4
    if et == ETH_IPV4:
        return ipv4(data, off, wirelen)
    if et == ETH_IPV6:
        return ipv6(data, off, wirelen)
    return None


def fast_ipv4(data: bytes, l3: int, ethertype_at: int) -> Segment | None:
    """The common case: IPv4 without options, unfragmented TCP, fully captured, the IP header at
    ``l3`` (and its ethertype at ``ethertype_at``, or -1 when the link has none).

    Returns None for anything else, which the general parser then handles. Byte by byte, not
    one ``unpack_from``: compiled (``packet.pxd`` types it), each read is a C load, where the
    struct call cost ~1,000 instructions a packet. With a 20-byte IP header the addresses and
    the ports are adjacent, so the flow key is a single slice.

    Compiled, ``b`` is a C pointer into ``data`` (unchecked: every read below is inside the
    ``n`` bytes checked first) and its slices are copied straight out of it, a fifth of what
    slicing a ``bytes`` object through Python's protocol costs.
    """
    if type(data) is not bytes:
        return None
    n = len(data)
    b = data
    if n < l3 + 40:
        return None
    if ethertype_at >= 0 and (b[ethertype_at] != 0x08 or b[ethertype_at + 1] != 0x00):
        return None
    doff = b[l3 + 32]
    # version 4 with a 20-byte header; TCP; neither "more fragments" nor an offset; a sane data offset
    if b[l3] != 0x45 or b[l3 + 9] != 6 or b[l3 + 6] & 0x3F or b[l3 + 7] or doff < 0x50:
        return None
    start = l3 + 20 + ((doff >> 4) << 2)
    end = l3 + ((b[l3 + 2] << 8) | b[l3 + 3])
    if not start <= end <= n:
        return None
    t = l3 + 20
    seq = b[t + 4]
    seq = (seq << 24) | (b[t + 5] << 16) | (b[t + 6] << 8) | b[t + 7]
    ack = b[t + 8]
    ack = (ack << 24) | (b[t + 9] << 16) | (b[t + 10] << 8) | b[t + 11]
    return (b[l3 + 12:l3 + 24], (b[t] << 8) | b[t + 1], (b[t + 2] << 8) | b[t + 3], seq, ack, b[t + 13],
            b[start:end], 0)


def _by_header(header_len: int, ethertype_at: int) -> Parser:
    """A link layer that ends in an ethertype: the fast IPv4 path, else the general one."""
    def parse(data: bytes, wirelen: int) -> ParseResult:
        seg = fast_ipv4(data, header_len, ethertype_at)
        if seg is not None:
            return seg
        if len(data) < header_len:
            return None
        return _by_ethertype(data, (data[ethertype_at] << 8) | data[ethertype_at + 1], header_len, wirelen)
    return parse


ethernet = _by_header(14, 12)
linux_sll = _by_header(16, 14)
linux_sll2 = _by_header(20, 0)


def bsd_loopback(data: bytes, wirelen: int) -> ParseResult:
    # The family is a 4-byte integer in either byte order; its value fits one byte.
    if len(data) < 4:
        return None
    family = data[0] or data[3]
    if family == 2:
        return ipv4(data, 4, wirelen)
    if family in AF_INET6_VALUES:
        return ipv6(data, 4, wirelen)
    return None


def raw_ip(data: bytes, wirelen: int) -> ParseResult:
    seg = fast_ipv4(data, 0, -1)
    if seg is not None:
        return seg
    if not data:
        return None
    v = data[0] >> 4
    if v == 4:
        return ipv4(data, 0, wirelen)
    if v == 6:
        return ipv6(data, 0, wirelen)
    return None


def raw_ipv4(data: bytes, wirelen: int) -> ParseResult:
    return ipv4(data, 0, wirelen)


def raw_ipv6(data: bytes, wirelen: int) -> ParseResult:
    return ipv6(data, 0, wirelen)


PARSERS: dict[int, Parser] = {
    linktypes.ETHERNET: ethernet,
    linktypes.LINUX_SLL: linux_sll,
    linktypes.LINUX_SLL2: linux_sll2,
    linktypes.NULL: bsd_loopback,
    linktypes.LOOP: bsd_loopback,
    linktypes.RAW: raw_ip,
    linktypes.RAW_12: raw_ip,
    linktypes.RAW_14: raw_ip,
    linktypes.IPV4: raw_ipv4,
    linktypes.IPV6: raw_ipv6,
}


# Link types whose TCP/IPv4 frames fast_ipv4 reads (directly, or with the same flow key through ipv4):
# (IP header offset, ethertype offset or -1). Readers that drop other shares' packets hash only these.
IPV4_AT: dict[int, tuple[int, int]] = {
    linktypes.ETHERNET: (14, 12), linktypes.LINUX_SLL: (16, 14), linktypes.LINUX_SLL2: (20, 0),
    linktypes.RAW: (0, -1), linktypes.RAW_12: (0, -1), linktypes.RAW_14: (0, -1), linktypes.IPV4: (0, -1),
}


def parser_for(linktype: int) -> Parser | None:
    return PARSERS.get(linktype)


def reverse_key(key: bytes) -> bytes:
    """The flow key of the opposite direction."""
    if len(key) == 12:
        return key[4:8] + key[0:4] + key[10:12] + key[8:10]
    return key[16:32] + key[0:16] + key[34:36] + key[32:34]


def key_endpoints(key: bytes) -> tuple[str, int, str, int]:
    """(source ip, source port, destination ip, destination port) rendered once per connection."""
    n = 4 if len(key) == 12 else 16
    src, dst, ports = ipaddress.ip_address(key[:n]), ipaddress.ip_address(key[n:2 * n]), key[2 * n:]
    return str(src), _U16(ports, 0)[0], str(dst), _U16(ports, 2)[0]
