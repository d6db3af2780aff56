"""``kdissect live``: an interface into the dataset, a new set of files per rotation.

The capture runs in a worker thread and hands events over a bounded queue, so
the main thread can rotate files and refresh the status on time even when the
network is quiet (the pipeline only yields when something happens).
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TextIO

from capture import CaptureError
from capture.live import LiveOptions as CaptureLiveOptions
from capture.live import live_capture

from kdissect.dataset import TABLES, CaptureWriter, Counts, prepare_outdir
from kdissect.decode import row_options
from kdissect.errors import KdissectError
from kdissect.progress import ProgressLine
from kdissect.source import DecodeOptions
from kdissect.summary import format_summary

_QUEUE = 10_000          # events in flight between the capture thread and the writer
_STATUS_EVERY = 1.0      # seconds between status refreshes
_DRAIN_TIMEOUT = 10.0    # seconds to wait for the capture to close its connections on stop
_END = object()


@dataclass(frozen=True, slots=True)
class LiveOptions:
    interface: str
    outdir: str
    rotate: float = 60.0          # seconds per set of files
    duration: float | None = None  # seconds, then stop
    count: int | None = None      # packets, then stop (like tcpdump -c)


@dataclass(slots=True)
class _Failed:
    error: BaseException


class _Rotation:
    """Names the files of each rotation; all rows of one live run share a ``capture`` value."""

    def __init__(self, interface: str) -> None:
        start = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in interface)
        self.capture = f"live-{safe}-{start}"
        self.n = 0

    def next_name(self) -> str:
        self.n += 1
        return f"{self.capture}-{self.n:05d}"

    def unused(self) -> None:
        """The last name was not written (nothing happened): give it to the next rotation."""
        self.n -= 1


def run_live(live: LiveOptions, options: DecodeOptions, status: TextIO) -> int:
    tables = TABLES if options.records else TABLES[:3]
    try:
        run = live_capture(CaptureLiveOptions(interface=live.interface, duration=live.duration, count=live.count),
                           options.capture_options())
    except CaptureError as exc:
        raise KdissectError(str(exc)) from None
    try:
        out = prepare_outdir(live.outdir, tables)
    except BaseException:
        run.close()
        raise
    events: queue.Queue[Any] = queue.Queue(_QUEUE)

    def pump() -> None:
        try:
            for ce in run:
                events.put(ce)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread to report
            events.put(_Failed(exc))
        finally:
            events.put(_END)

    stop_asked: list[float] = []

    def on_sigint(signum: int, frame: Any) -> None:
        # First Ctrl-C: stop capturing, write what was seen. Second: give up at once.
        if stop_asked:
            raise KeyboardInterrupt
        stop_asked.append(time.monotonic())
        run.stop()

    names = _Rotation(live.interface)
    topics = run.pipeline.topics   # the capture's registry: ids learnt in one rotation resolve in the next
    rows = row_options(options)
    total = Counts()
    line = ProgressLine(status)
    start = time.monotonic()
    writer = CaptureWriter(out, names.capture, names.next_name(), rows, topics)
    next_rotate = start + live.rotate
    next_status = start
    restore = signal.signal(signal.SIGINT, on_sigint) if threading.current_thread() is threading.main_thread() \
        else None
    worker = threading.Thread(target=pump, name="kdissect-live", daemon=True)
    worker.start()
    try:
        while True:
            now = time.monotonic()
            if stop_asked and now - stop_asked[0] > _DRAIN_TIMEOUT:
                break  # the capture did not wind down in time: keep what arrived
            try:
                item = events.get(timeout=max(0.0, min(next_rotate, next_status) - now))
            except queue.Empty:
                item = None
            if item is _END:
                break
            if isinstance(item, _Failed):
                raise item.error
            if item is not None:
                writer.event(item.conn, item.event)
            now = time.monotonic()
            if now >= next_rotate:
                if writer.empty:
                    writer.abort()  # a quiet interval leaves no file behind
                    names.unused()
                else:
                    writer.commit()
                    total.add(writer.counts)
                writer = CaptureWriter(out, names.capture, names.next_name(), rows, topics)
                next_rotate = now + live.rotate
                if not line.enabled:
                    status.write(_status(live, run, total, names.n - 1, now - start) + "\n")
                    status.flush()
            if now >= next_status:
                line.show(_status(live, run, total, names.n - 1, now - start, writer.counts))
                next_status = now + _STATUS_EVERY
    except BaseException:
        writer.abort()
        run.stop()
        raise
    finally:
        line.clear()
        if restore is not None:
            signal.signal(signal.SIGINT, restore)
    if writer.empty and names.n > 1:
        writer.abort()
        names.unused()
    else:
        writer.commit()  # at least one set of typed files, even when nothing was seen
    total.add(writer.counts)
    total.captures = 1
    worker.join(_DRAIN_TIMEOUT)
    stats = run.stats
    status.write(format_summary(total, packets=stats.packets, bytes_read=run.source.bytes_read,
                                elapsed=time.monotonic() - start, outdir=str(out), tables=list(tables),
                                source=f"live {live.interface}") + "\n")
    if stats.kernel_drops:
        status.write(f"kernel dropped {stats.kernel_drops:,} packets (the reader fell behind)\n")
    status.write(f"files        {names.n} per table ({names.capture}-*.parquet)\n")
    return 0


def _status(live: LiveOptions, run: Any, total: Counts, files: int, elapsed: float,
            current: Counts | None = None) -> str:
    exchanges = total.exchanges + (current.exchanges if current else 0)
    conns = len(total.connections | (current.connections if current else set()))
    packets = getattr(run.source, "packets", 0)
    m, s = divmod(int(elapsed), 60)
    return (f"live {live.interface} {m:02d}:{s:02d}  {packets:,} packets, {exchanges:,} exchanges, "
            f"{conns:,} connections, {files} file set{'s' if files != 1 else ''} written")

