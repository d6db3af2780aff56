"""Knobs shared by the jobs, and the time window picked to suit a capture's length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# (seconds, Spark interval): the first whose windows number at most ~120 over the capture.
WINDOWS = ((1, "1 second"), (5, "5 seconds"), (10, "10 seconds"), (30, "30 seconds"), (60, "1 minute"),
           (300, "5 minutes"), (900, "15 minutes"), (3600, "1 hour"), (21600, "6 hours"), (86400, "1 day"))
MAX_WINDOWS = 120


@dataclass(frozen=True)
class Present:
    """What a dataset holds, from the query that reads it: the tables and rules that would be empty on it
    are skipped (``analysis.jobs.needs``, ``Rule.applies``)."""

    apis: frozenset[str] = frozenset()            # api names of its exchanges and partition rows
    api_keys: frozenset[int] = frozenset()        # ... and their keys
    errors: frozenset[str] = frozenset()          # error names its exchanges were answered with
    throttled: frozenset[str] = frozenset()       # api names of exchanges with a throttle time
    records: bool = True                          # whether it may hold records (decoded with --records)


@dataclass(frozen=True)
class Options:
    window: str = "1 minute"       # time bucket of the *_over_time tables
    spike_factor: float = 3.0      # a window is a spike when its p99 is this many times the median window p99
    spike_min_count: int = 5       # ... and holds at least this many requests
    idle_fraction: float = 0.9     # an empty Fetch that waited this fraction of max_wait_ms is a long-poll
    findings: Any = None           # analysis.findings.Config: rule thresholds (None: the defaults)
    present: Present | None = None  # None: unknown, every rule runs


def window_for(span_seconds: float) -> str:
    """The smallest round window giving at most MAX_WINDOWS windows over ``span_seconds``."""
    for seconds, interval in WINDOWS:
        if span_seconds / seconds <= MAX_WINDOWS:
            return interval
    return WINDOWS[-1][1]
