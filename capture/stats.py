"""What a capture counted while it was decoded: read during a run (progress) and after it.

Compiled build (``stats.pxd``): :class:`CaptureStats` is an extension type.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CaptureStats:
    bytes_read: int = 0                      # of the file on disk (compressed if gzip)
    size: int | None = None                  # total to read, when known
    packets: int = 0
    tcp_segments: int = 0
    non_tcp: int = 0                         # not TCP over IPv4/IPv6 (skipped)
    ip_fragments: int = 0
    truncated_headers: int = 0
    malformed_packets: int = 0
    unsupported_linktype: int = 0
    caplen_exceeds_wirelen: int = 0
    capture_problems: int = 0                # damaged/cut file, drops reported by the writer
    connections: dict[str, int] = field(default_factory=dict)   # by kind: kafka, tls, not_kafka
    gaps: int = 0
    gap_bytes: int = 0
    truncated_segments: int = 0
    duplicate_segments: int = 0
    out_of_order_segments: int = 0
    conflicts: int = 0
    evicted: int = 0
    causal_held: int = 0                     # segments held back until what they acknowledge was delivered
    causal_forced: int = 0                   # ... let go by the per-connection cap instead
    dissector_errors: int = 0                # exceptions from the dissector (bugs), contained
    rested: int = 0                          # connections put to rest as compact records (capture.dormant)
    woken: int = 0                           # ... and woken again by a packet
    kernel_drops: int | None = None          # live capture only, when the OS tells
