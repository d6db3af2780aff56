"""How a capture is decoded: the caps and waits that bound its memory, and what it decodes.

Compiled build (``options.pxd``): :class:`CaptureOptions` is an extension type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capture.shard import Share

NS = 1_000_000_000                           # the options say seconds; the capture counts nanoseconds


@dataclass
class CaptureOptions:
    ports: frozenset[int] | None = None      # explicit Kafka ports; None: detect on every TCP port
    dissector: Any = None                    # dissector.connection.Options; None: its defaults
    protocol: Any = None                     # dissector.protocols.ProtocolChoice; None: detect per connection
    detect_limit: int = 16 * 1024            # bytes buffered per direction while undecided
    max_pending_bytes: int = 4 << 20         # out-of-order bytes held per direction
    max_pending_segments: int = 2048
    max_hole_age: float = 10.0               # seconds a hole may wait for its retransmission
    # Bytes the peer acknowledged, or that data of the peer waits for (causal order), are waited for
    # this many more segments of their connection (capture order, not time: reordering is counted in
    # packets), then declared lost; max_hole_age / max_causal_wait bound the wait in capture time.
    max_reorder_segments: int = 64
    max_flows: int = 500_000                 # hard cap, live and resting: least recently active are ended
    soft_flows: int = 10_000                 # above this, flows idle longer than idle_timeout go
    idle_timeout: float = 600.0              # seconds of capture time
    linger: float = 120.0                    # closed / ignored / undecided flows are dropped after this idle
    report_limit: int = 100                  # per kind, for per-packet capture anomalies
    # Causal order across directions (capture/causal.py): how long / how much may wait.
    max_causal_wait: float = 10.0            # seconds of capture time (see max_reorder_segments)
    max_causal_segments: int = 1024          # per connection
    max_causal_bytes: int = 4 << 20          # per connection
    max_held_frame_bytes: int = 1 << 30      # bytes of frames still arriving, all connections (dissector/held.py)
    share: Share | None = None               # decode only this share's connections (see capture.shard)
    tls_keylog: tuple[str, ...] = ()         # NSS key log files (pcapng secrets blocks are used anyway)
    tls_keylog_live: bool = False            # the key logs grow while the capture runs: re-read them
