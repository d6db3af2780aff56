"""``kdissect live``: an interface into the dataset, a new set of files per rotation.

Three parties: the capture process (``capture.dumper``: socket -> spool of pcapng
segments under ``OUTDIR/.spool/``), a decoding thread (spool -> pipeline ->
Parquet writer, rotating at capture-time boundaries), and this main thread,
which only answers signals and draws the status line. Decoding may fall behind
the capture; it catches up from the spool, and every stop path decodes the
spool to its end before the last files and the summary are written.

Exit status: 0 after any requested stop (Ctrl-C, SIGTERM, --duration,
--count); 1 when the interface went down or away (after writing everything);
130 / 143 when a second signal cut decoding short (what was decoded is
written; the spooled packets not decoded are kept as pcapng under
``OUTDIR/pcap/``).
"""

from __future__ import annotations

import math
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from capture import CaptureError
from capture.live import MIN_SPOOL, LiveRun, live_capture
from capture.live import LiveOptions as CaptureLiveOptions

from kdissect.run.codecache import use_default_code_cache
from kdissect.dataset.writer import TABLES, CaptureWriter, Counts, prepare_outdir
from kdissect.errors import KdissectError, UsageError
from kdissect.metrics.fold import Health, MetricsFold
from kdissect.metrics.run import MetricsOptions, MetricsRun
from kdissect.run.progress import ProgressLine
from kdissect.run.source import DecodeOptions, check_keylogs
from kdissect.run.summary import format_summary, human_bytes

_STATUS_EVERY = 1.0      # seconds between status refreshes
MIN_ROTATE = 1.0         # seconds: each rotation writes files Spark lists; fewer than this is churn
NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class LiveOptions:
    interface: str
    outdir: str
    rotate: float = 60.0          # seconds per set of files
    duration: float | None = None  # seconds, then stop
    count: int | None = None      # packets, then stop (like tcpdump -c)
    keep_pcap: bool = False       # keep the spooled pcapng segments under OUTDIR/pcap/
    spool_max: int = 1 << 30      # bytes of captured, not yet decoded packets the spool may hold
    metrics: MetricsOptions = MetricsOptions()   # --metrics, --otlp: live metrics as exchanges are decoded

    def validate(self) -> None:
        """One clear line for values that cannot work (the CLI checks the same before parsing ends)."""
        if not (math.isfinite(self.rotate) and self.rotate >= MIN_ROTATE):
            raise UsageError(f"--rotate must be a number of seconds of at least {MIN_ROTATE:g}")
        if self.duration is not None and not (math.isfinite(self.duration) and self.duration > 0):
            raise UsageError("--duration must be a finite number of seconds greater than 0")
        if self.count is not None and self.count < 1:
            raise UsageError("--count must be at least 1")
        if self.spool_max < MIN_SPOOL:
            raise UsageError(f"--spool-max must be at least {MIN_SPOOL >> 20} MiB")
        self.metrics.validate()


def run_id() -> str:
    """The random part of ``live-<iface>-<UTC start>-<run id>``: captures started together never share files."""
    return secrets.token_hex(3)


class _Rotation:
    """Names the files of each rotation; all rows of one live run share a ``capture`` value."""

    def __init__(self, interface: str) -> None:
        start = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in interface)
        self.capture = f"live-{safe}-{start}-{run_id()}"
        self.n = 0

    def next_name(self) -> str:
        self.n += 1
        return f"{self.capture}-{self.n:05d}"

    def unused(self) -> None:
        """The last name was not written (nothing happened): give it to the next rotation."""
        self.n -= 1


class _Decoder:
    """The decoding thread's state: the spool's events into one set of files per capture-time interval."""

    def __init__(self, run: LiveRun, out: Path, names: _Rotation, options: DecodeOptions, rotate: float,
                 status: TextIO, line: ProgressLine, describe: Any, metrics: MetricsFold | None = None) -> None:
        self.run = run
        self.metrics = metrics
        self.out = out
        self.names = names
        self.rows = options.row_options(out, lambda: run.stats.packets)
        self.rotate_ns = int(rotate * NS)
        self.total = Counts()
        self.status = status
        self.line = line
        self.describe = describe
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.go = threading.Event()      # set once the main thread has handled any stop held back so far
        self.start_ns = time.time_ns()
        self.writer = self._new_writer()
        run.source.boundary = self.start_ns + self.rotate_ns
        run.source.on_boundary = self.rotate

    def _new_writer(self) -> CaptureWriter:
        return CaptureWriter(self.out, self.names.capture, self.names.next_name(), self.rows,
                             self.run.pipeline.topics, metrics=self.metrics)

    @property
    def files(self) -> int:
        return self.names.n - 1

    def rotate(self, ts: int) -> None:
        """Capture time reached ``ts``: close the interval's files (none if it was quiet), start the next."""
        src = self.run.source
        if ts < src.boundary:
            return
        w = self.writer
        if w.empty:
            w.abort()
            self.names.unused()
        else:
            w.commit()
            self.total.add(w.counts)
        self.writer = self._new_writer()
        src.boundary += ((ts - src.boundary) // self.rotate_ns + 1) * self.rotate_ns
        if not self.line.enabled:
            self.status.write(self.describe() + "\n")
            self.status.flush()

    def __call__(self) -> None:
        try:
            self.go.wait()
            for ce in self.run:
                self.writer.event(ce.conn, ce.event)
            w = self.writer
            if w.empty and self.names.n > 1:
                w.abort()
                self.names.unused()
            else:
                w.commit()  # at least one set of typed files, even when nothing was seen
                self.total.add(w.counts)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread to report
            self.writer.abort()
            self.error = exc
        finally:
            self.done.set()


def run_live(live: LiveOptions, options: DecodeOptions, status: TextIO) -> int:
    live.validate()
    check_keylogs(options.tls_keylog)
    if options.records:
        from kdissect.dataset.payload_columns import check_options
        check_options(options)
    tables = TABLES if options.records else TABLES[:3]
    # Every thread this run starts (metrics servers, the capture listener, the decoder) inherits a mask
    # without SIGINT/SIGTERM, so a stop always lands on the main thread and wakes it at once: a signal taken
    # by the busy decoder would wait for the main thread's next tick while the backlog it measures drains.
    masked = _mask_stop_signals()
    try:
        # Before anything is created or captured: a port that cannot be bound is one line, and nothing else.
        metrics = MetricsRun(live.metrics) if live.metrics.wanted else None
        try:
            return _run_live(live, options, status, tables, metrics, masked)
        finally:
            if metrics is not None:
                metrics.close()
    finally:
        masked.release()


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _StopSignalMask:
    """SIGINT/SIGTERM held back on the main thread while it starts threads; ``release`` lets them in."""

    def __init__(self, held: bool) -> None:
        self.held = held

    def release(self) -> None:
        if self.held:
            self.held = False
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _mask_stop_signals() -> _StopSignalMask:
    if threading.current_thread() is not threading.main_thread():
        return _StopSignalMask(False)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    return _StopSignalMask(not (set(_STOP_SIGNALS) & set(blocked)))


def _run_live(live: LiveOptions, options: DecodeOptions, status: TextIO, tables: tuple[str, ...],
              metrics: MetricsRun | None, masked: _StopSignalMask) -> int:
    made = _missing_dirs(Path(live.outdir), tables)
    out = prepare_outdir(live.outdir, tables)
    names = _Rotation(live.interface)
    spool = out / ".spool" / names.capture
    signals: list[int] = []
    runs: list[LiveRun] = []

    def on_signal(signum: int, frame: Any) -> None:
        # First: stop capturing, decode the spool to its end. Second: stop decoding now.
        # A third gives up at once. Installed before the socket opens, so none is missed.
        signals.append(signum)
        if len(signals) > 2:
            raise KeyboardInterrupt
        if runs:
            (runs[0].stop if len(signals) == 1 else runs[0].abort)()

    handled = (signal.SIGINT, signal.SIGTERM)
    restore = {s: signal.signal(s, on_signal) for s in handled} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        return _run(live, options, status, out, names, spool, signals, runs, tables, metrics, masked)
    except BaseException:
        if not runs:             # nothing was captured: no empty dataset left behind
            _remove_empty_dirs(made)
        raise
    finally:
        masked.release()    # a signal still held is handled here, before the default handler is back
        for s, h in restore.items():
            signal.signal(s, h)


def _run(live: LiveOptions, options: DecodeOptions, status: TextIO, out: Path, names: _Rotation, spool: Path,
         signals: list[int], runs: list[LiveRun], tables: tuple[str, ...], metrics: MetricsRun | None,
         masked: _StopSignalMask) -> int:
    use_default_code_cache()
    try:
        run = live_capture(CaptureLiveOptions(
            interface=live.interface, duration=live.duration, count=live.count, spool_dir=spool,
            spool_max=live.spool_max, keep_dir=out / "pcap" if live.keep_pcap else None,
            undecoded_dir=out / "pcap", name_prefix=names.capture), options.capture_options(live=True, messages=False))
    except CaptureError as exc:
        _remove_empty(spool)
        raise KdissectError(str(exc)) from None
    runs.append(run)
    if signals:                      # asked to stop while the socket was opening
        run.stop()
        if len(signals) > 1:
            run.abort()
    src = run.source
    status.write(f"listening on {live.interface} (snaplen {src.snaplen}, filter '{src.filter.expression}'), "
                 f"writing {out}/ as {names.capture}\n")
    fold = None
    if metrics is not None:
        fold = metrics.fold
        fold.health = lambda: Health(src.status.packets, src.status.kernel_drops, src.status.spool_drops,
                                     src.backlog())
        metrics.describe(status)
    status.flush()
    line = ProgressLine(status)
    start = time.monotonic()

    def describe() -> str:
        return _status(live, run, dec, time.monotonic() - start, bool(signals))

    dec = _Decoder(run, out, names, options, live.rotate, status, line, describe, fold)
    worker = threading.Thread(target=dec, name="kdissect-live-decode", daemon=True)
    worker.start()
    try:
        # Every thread is started: a stop held back until now is handled here, and measures its backlog
        # before the decoder (compiled, slow to hand the GIL back) has read any of it.
        masked.release()
        dec.go.set()
        seen_drops = 0
        while not dec.done.wait(0.25):
            drops = src.status.kernel_drops + src.status.spool_drops
            if drops != seen_drops and not line.enabled:
                status.write(describe() + "\n")   # a log gets a line as soon as packets are lost
                status.flush()
            seen_drops = drops
            line.show(describe())
    finally:
        line.clear()
        dec.go.set()
        if not dec.done.is_set():   # interrupted for good: stop the capture process, leave the rest
            run.abort()
            dec.done.wait(5)
            run.close()
    worker.join()
    decoded_at = time.monotonic()
    run.close()
    _remove_empty(spool)
    if dec.error is not None:
        raise dec.error
    total = dec.total
    total.captures = 1
    total.flows.update(run.stats.connections)
    st = src.status
    status.write(format_summary(total, packets=run.stats.packets, bytes_read=src.bytes_read,
                                elapsed=time.monotonic() - start, outdir=str(out), tables=list(tables),
                                source=f"live {live.interface}") + "\n")
    if st.kernel_drops or st.spool_drops:
        status.write(f"lost         {st.kernel_drops:,} packets dropped by the kernel (capture fell behind), "
                     f"{st.spool_drops:,} dropped with the spool full ({human_bytes(live.spool_max)})\n")
    if st.cut:
        status.write(f"cut          {st.cut:,} frames longer than the snap length ({src.snaplen}) were cut\n")
    status.write(f"files        {names.n} per table ({names.capture}-*.parquet)\n")
    if st.backlog_at_end:
        status.write(f"backlog      {human_bytes(st.backlog_at_end)} spooled but not yet decoded when the capture "
                     f"stopped, decoded in {decoded_at - st.ended_at:.1f} s\n")
    if src.kept:
        status.write(f"pcap         {len(src.kept)} pcapng files in {out / 'pcap'}/\n")
    if len(signals) >= 2 and src.undecoded:
        status.write(f"not decoded  {len(src.undecoded)} spooled pcapng files kept in {out / 'pcap'}/ "
                     "(kdissect decode reads them)\n")
    status.flush()
    if st.ended in ("interface", "error"):
        what = "the interface went down or away" if st.ended == "interface" else "the capture failed"
        raise KdissectError(f"capture on {live.interface} ended early: {what}"
                            + (f" ({st.detail})" if st.detail else "") + "; everything captured was written")
    if len(signals) >= 2:
        return 128 + signals[1]
    return 0


def _missing_dirs(out: Path, tables: tuple[str, ...]) -> list[Path]:
    """The directories :func:`prepare_outdir` is about to create, deepest first."""
    dirs = [out / t for t in tables] + [out, *out.parents]
    return [d for d in dirs if not d.exists()]


def _remove_empty_dirs(dirs: list[Path]) -> None:
    """Remove what this run created and left empty; a directory something else wrote into stays."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            continue


def _remove_empty(path: Path) -> None:
    for p in (path, path.parent):
        try:
            p.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return


def _status(live: LiveOptions, run: LiveRun, dec: _Decoder, elapsed: float, stopping: bool) -> str:
    src = run.source
    st = src.status
    exchanges = dec.total.exchanges + dec.writer.counts.exchanges
    conns = len(dec.total.connections | dec.writer.counts.connections)
    m, s = divmod(int(elapsed), 60)
    text = (f"live {live.interface} {m:02d}:{s:02d}  {st.packets:,} packets, {exchanges:,} exchanges, "
            f"{conns:,} connections, {dec.files} file set{'s' if dec.files != 1 else ''} written")
    backlog = src.backlog()
    if backlog > 1 << 20:
        text += f", decoding {human_bytes(backlog)} behind"
    if st.kernel_drops or st.spool_drops:
        text += f", DROPPED {st.kernel_drops + st.spool_drops:,} (kernel {st.kernel_drops:,}, spool full {st.spool_drops:,})"
    if stopping and st.ended is not None:
        text += ", stopped: decoding the rest"
    return text
