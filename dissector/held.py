"""Bytes held for frames still arriving, counted across all connections of one capture.

A length prefix may claim up to the frame cap (100 MiB) and the data may then
trickle in; one such frame per connection is allowed by the cap, but thousands of
them at once would not fit in memory. The connections of a capture share one
:class:`HeldBytes` (through ``Options.held``): a frame whose held bytes push the
total past ``limit`` is given up (reported ``frame_held_limit``, decoded as
truncated, the rest of it skipped) instead of growing memory further.
"""

from __future__ import annotations

from dataclasses import dataclass

STEP = 256 << 10   # a frame's held bytes are counted in steps this big: small frames cost nothing here


@dataclass
class HeldBytes:
    limit: int = 1 << 30
    used: int = 0       # counted bytes of frames in progress, all connections
    cuts: int = 0       # frames given up because of the limit
