"""A one-line progress display on stderr, only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from kdissect.run.decode import Progress
from kdissect.run.summary import human_bytes

_INTERVAL = 0.2   # seconds between redraws: fast enough to look alive, cheap enough to ignore


class ProgressLine:
    def __init__(self, stream: TextIO | None = None, force: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.enabled = force or self.stream.isatty()
        self._last = 0.0
        self._width = 0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < _INTERVAL:
            return
        self._last = now
        rate = p.bytes_read / p.elapsed if p.elapsed > 0 else 0
        where = f"[{p.index}/{p.total}] " if p.total > 1 else ""
        if p.size:
            frac = min(1.0, p.bytes_read / p.size)
            filled = int(frac * 20)
            bar = f"{'#' * filled}{'.' * (20 - filled)} {frac:4.0%} "
        else:
            bar = ""
        self.show(f"{where}{p.capture} {bar}{human_bytes(p.bytes_read)}, {p.packets:,} packets, "
                  f"{p.exchanges:,} exchanges, {human_bytes(rate)}/s")

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        pad = max(0, self._width - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
