"""How many shares ``kdissect decode --jobs`` splits a capture into, each decoded by a worker
(:mod:`kdissect.run.parallel`): by the capture's size, then by its estimated packets."""

from __future__ import annotations

from capture import CaptureError, open_capture
from capture.pcapfile import PcapReader

from kdissect.run.inputs import Capture

MIN_SHARE_BYTES = 4 << 20        # captures smaller than this per job are not worth splitting among workers
# ... nor with fewer packets than this per job: a worker costs ~0.1 s (start, its own pyarrow,
# reading every packet), which small shares do not win back (22 MB of large batches, 18k packets:
# 0.29 s in one process, 0.34 s in two).
MIN_SHARE_PACKETS = 12_000


def capture_shares(capture: Capture, jobs: int, min_share_bytes: int = MIN_SHARE_BYTES) -> int:
    """How many shares ``kdissect decode --jobs`` splits a capture into: by its estimated packets, the
    measure of a decode's work, or by its size when they cannot be estimated (``min_share_bytes`` 0:
    always ``jobs``). Not by size first: a connection of small requests is worth splitting at 8 MB
    (20,000 exchanges, 32,000 packets), 22 MB of large batches in 18,000 packets is not."""
    if jobs <= 1 or not min_share_bytes:
        return shares_for(None, jobs, min_share_bytes)
    packets = estimate_packets(capture)
    if packets is None:
        return shares_for(capture_size(capture), jobs, min_share_bytes)
    return max(1, min(jobs, packets // MIN_SHARE_PACKETS))


def shares_for(size: int | None, jobs: int, min_share_bytes: int = MIN_SHARE_BYTES) -> int:
    """How many shares a capture of ``size`` bytes is split into with ``jobs`` workers."""
    if jobs <= 1:
        return 1
    if not min_share_bytes:
        return jobs
    return max(1, min(jobs, (size or 0) // min_share_bytes))


def estimate_packets(capture: Capture, sample: int = 2000) -> int | None:
    """A capture's packets, from its size and the sizes of its first ``sample`` records; None when
    unknown (unreadable, or gzip-compressed, whose size on disk says little). A few milliseconds."""
    size = capture_size(capture)
    try:
        with open(capture[0], "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                return None
        src = open_capture(capture[0])
    except (CaptureError, OSError):
        return None
    overhead = 16 if isinstance(src, PcapReader) else 32      # a record's header on disk (pcapng: a block's)
    n = data = 0
    try:
        for _ts, _lt, payload, _wirelen in src:
            n += 1
            data += len(payload)
            if n == sample:
                break
    finally:
        src.close()
    if not n or size is None:
        return n if size is not None else None
    return size * n // (data + n * overhead)


def capture_size(capture: Capture) -> int | None:
    """Bytes on disk of a capture's files; None if one cannot be read."""
    try:
        return sum(p.stat().st_size for p in capture)
    except OSError:
        return None
