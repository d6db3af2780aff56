"""Link-layer header type numbers (tcpdump.org/linktypes.html) that capture understands."""

from __future__ import annotations

NULL = 0            # BSD loopback: 4-byte address family in the writer's byte order
ETHERNET = 1
RAW_12 = 12         # DLT_RAW as some systems number it
RAW_14 = 14         # DLT_RAW on OpenBSD
RAW = 101           # raw IPv4 or IPv6, version nibble decides
LOOP = 108          # OpenBSD loopback: address family in network byte order
LINUX_SLL = 113
IPV4 = 228
IPV6 = 229
LINUX_SLL2 = 276

NAMES: dict[int, str] = {
    NULL: "NULL", ETHERNET: "EN10MB", RAW_12: "RAW", RAW_14: "RAW", RAW: "RAW", LOOP: "LOOP",
    LINUX_SLL: "LINUX_SLL", IPV4: "IPV4", IPV6: "IPV6", LINUX_SLL2: "LINUX_SLL2",
}


def name(linktype: int) -> str:
    return NAMES.get(linktype, f"linktype {linktype}")
