"""Link layers, IPv4/IPv6 and TCP parsing from raw bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture import linktypes
from capture.packet import PacketIssue, fast_ipv4, ipv4, key_endpoints, parser_for, reverse_key
from tests.capture import pcaptools as pt

SEG = pt.tcp(50312, 9092, 1000, 2000, pt.ACK | pt.PSH, b"kafka bytes")
IP4 = pt.ipv4("10.0.0.1", "10.0.0.2", SEG)
IP6 = pt.ipv6("2001:db8::1", "2001:db8::2", SEG)


def parse(linktype: int, data: bytes, wirelen: int | None = None):  # type: ignore[no-untyped-def]
    p = parser_for(linktype)
    assert p is not None
    return p(data, len(data) if wirelen is None else wirelen)


def check(seg: tuple, src: str, dst: str, payload: bytes = b"kafka bytes", missing: int = 0) -> None:
    assert isinstance(seg, tuple), seg
    key, sport, dport, seq, ack, flags, data, miss = seg
    assert key_endpoints(key) == (src, 50312, dst, 9092)
    assert (sport, dport, seq, ack, flags) == (50312, 9092, 1000, 2000, pt.ACK | pt.PSH)
    assert (data, miss) == (payload, missing)


@pytest.mark.parametrize("linktype,frame,v6", [
    (linktypes.ETHERNET, pt.ether(IP4), False),
    (linktypes.ETHERNET, pt.ether(IP6, 0x86DD), True),
    (linktypes.ETHERNET, pt.ether(IP4, vlans=[(0x8100, 5)]), False),
    (linktypes.ETHERNET, pt.ether(IP4, vlans=[(0x88A8, 5), (0x8100, 7)]), False),   # QinQ
    (linktypes.ETHERNET, pt.ether(IP6, 0x86DD, vlans=[(0x9100, 5), (0x8100, 7)]), True),
    (linktypes.LINUX_SLL, pt.sll(IP4), False),
    (linktypes.LINUX_SLL, pt.sll(IP6, 0x86DD), True),
    (linktypes.LINUX_SLL2, pt.sll2(IP4), False),
    (linktypes.LINUX_SLL2, pt.sll2(IP6, 0x86DD), True),
    (linktypes.NULL, pt.null(IP4), False),
    (linktypes.NULL, pt.null(IP4, big_endian=True), False),
    (linktypes.NULL, pt.null(IP6, 30), True),            # Darwin's AF_INET6
    (linktypes.NULL, pt.null(IP6, 24, big_endian=True), True),
    (linktypes.LOOP, pt.null(IP4, big_endian=True), False),
    (linktypes.LOOP, pt.null(IP6, 24, big_endian=True), True),
    (linktypes.RAW, IP4, False),
    (linktypes.RAW, IP6, True),
    (linktypes.RAW_12, IP4, False),
    (linktypes.RAW_14, IP6, True),
    (linktypes.IPV4, IP4, False),
    (linktypes.IPV6, IP6, True),
])
def test_link_types(linktype: int, frame: bytes, v6: bool) -> None:
    src, dst = ("2001:db8::1", "2001:db8::2") if v6 else ("10.0.0.1", "10.0.0.2")
    check(parse(linktype, frame), src, dst)


def test_ipv4_options_and_tcp_options() -> None:
    seg = pt.tcp(50312, 9092, 1000, 2000, pt.ACK | pt.PSH, b"kafka bytes", options=b"\x01\x01\x08\x0a" + b"\0" * 8)
    check(parse(1, pt.ether(pt.ipv4("10.0.0.1", "10.0.0.2", seg, options=b"\x94\x04\0\0"))), "10.0.0.1", "10.0.0.2")


def test_ethernet_padding_and_trailing_bytes_are_not_payload() -> None:
    check(parse(1, pt.ether(IP4) + b"\0" * 16), "10.0.0.1", "10.0.0.2")


def test_ipv6_extension_headers() -> None:
    ip = pt.ipv6("2001:db8::1", "2001:db8::2", SEG,
                 ext=[(0, b"\x01\x04\0\0\0\0"), (43, b"\0" * 6 + b"\0" * 16), (60, b"\x01\x02\0\0"), (51, b"\0" * 10)])
    check(parse(1, pt.ether(ip, 0x86DD)), "2001:db8::1", "2001:db8::2")


def test_ipv6_fragments_are_issues() -> None:
    first = pt.ipv6("2001:db8::1", "2001:db8::2", SEG, ext=[(44, b"\x00\x01" + b"\0\0\0\x07")])
    later = pt.ipv6("2001:db8::1", "2001:db8::2", b"rest", ext=[(44, b"\x00\x50" + b"\0\0\0\x07")])
    for ip in (first, later):
        r = parse(101, ip)
        assert isinstance(r, PacketIssue) and r.kind == "ip_fragment"


def test_ipv4_fragments_are_issues() -> None:
    first = pt.ipv4("10.0.0.1", "10.0.0.2", SEG, frag=0x2000)
    later = pt.ipv4("10.0.0.1", "10.0.0.2", b"more", frag=185)
    r1, r2 = parse(101, first), parse(101, later)
    assert isinstance(r1, PacketIssue) and "first fragment" in r1.detail
    assert isinstance(r2, PacketIssue) and "offset 1480" in r2.detail


def test_non_tcp_is_skipped_quietly() -> None:
    udp = pt.ipv4("10.0.0.1", "10.0.0.2", b"\0" * 16, proto=17)
    assert parse(1, pt.ether(udp)) is None
    assert parse(1, pt.ether(b"\0" * 28, 0x0806)) is None        # ARP
    assert parse(1, pt.ether(pt.ipv6("::1", "::2", b"\0" * 8, nh=58), 0x86DD)) is None
    assert parse(1, b"\0" * 10) is None
    assert parse(0, pt.null(IP4, family=7)) is None


def test_snaplen_truncation_is_measured_from_the_ip_length() -> None:
    frame = pt.ether(IP4)
    check(parse(1, frame[:-5], len(frame)), "10.0.0.1", "10.0.0.2", b"kafka ", 5)
    r = parse(1, frame[:14 + 20 + 10], len(frame))
    assert isinstance(r, PacketIssue) and r.kind == "truncated_header"


def test_tso_zero_total_length_uses_the_captured_bytes() -> None:
    ip = bytearray(IP4)
    ip[2:4] = b"\0\0"
    check(parse(101, bytes(ip)), "10.0.0.1", "10.0.0.2")


def test_malformed_headers() -> None:
    ip = bytearray(IP4)
    ip[0] = 0x43                                                  # IHL 3
    assert isinstance(parse(101, bytes(ip)), PacketIssue)
    bad_off = bytearray(IP4)
    bad_off[20 + 12] = 0xF0                                       # data offset 60 > segment
    assert isinstance(parse(101, bytes(bad_off)), PacketIssue)


def test_keys_are_direction_pairs() -> None:
    a = parse(101, IP4)[0]
    b = parse(101, pt.ipv4("10.0.0.2", "10.0.0.1", pt.tcp(9092, 50312, 5)))[0]
    assert reverse_key(a) == b and reverse_key(b) == a
    a6 = parse(101, IP6)[0]
    assert reverse_key(reverse_key(a6)) == a6 and len(a6) == 36


def test_agrees_with_scapy_on_scapy_built_frames() -> None:
    """An independent builder: scapy assembles, capture parses."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop
    from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether

    body = b"x" * 33
    t = TCP(sport=50312, dport=9092, seq=1000, ack=2000, flags="PA", options=[("MSS", 1460), ("NOP", None)])
    frames = [
        (1, Ether() / Dot1AD(vlan=3) / Dot1Q(vlan=4) / IP(src="10.0.0.1", dst="10.0.0.2", options=[]) / t / body),
        (1, Ether() / IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt()
         / t / body),
        (113, CookedLinux(proto=0x0800) / IP(src="10.0.0.1", dst="10.0.0.2") / t / body),
        (276, CookedLinuxV2(proto=0x0800) / IP(src="10.0.0.1", dst="10.0.0.2") / t / body),
    ]
    for lt, pkt in frames:
        raw = bytes(pkt)
        _, sport, dport, seq, ack, flags, payload, missing = parse(lt, raw)
        assert (sport, dport, seq, ack, flags) == (50312, 9092, 1000, 2000, 0x18)
        assert payload == body and missing == 0


@settings(max_examples=600, deadline=None)
@given(st.sampled_from([(pt.ether, 14, 12), (pt.sll, 16, 14), (pt.sll2, 20, 0), (None, 0, -1)]),
       st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFF), st.binary(max_size=40),
       st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=3), st.integers(0, 12))
def test_the_fast_ipv4_path_agrees_with_the_general_one(link, port, seq, ack, payload, changes, cut) -> None:
    """Whatever the fast path accepts, the general IPv4 parser reads the same way."""
    wrap, l3, ethertype_at = link
    ip = pt.ipv4("10.0.0.1", "192.168.7.9", pt.tcp(port, 9092, seq, ack, pt.ACK | pt.PSH, payload))
    frame = bytearray(wrap(ip) if wrap else ip)
    for at, value in changes:
        if at < len(frame):
            frame[at] = value
    data = bytes(frame[:len(frame) - cut])
    seg = fast_ipv4(data, l3, ethertype_at)
    if seg is not None:
        assert seg == ipv4(data, l3, len(data))
    if not changes and not cut:
        assert seg is not None and seg[1:7] == (port, 9092, seq, ack, pt.ACK | pt.PSH, payload)
    assert fast_ipv4(bytearray(data), l3, ethertype_at) is None      # other buffers: the general path
