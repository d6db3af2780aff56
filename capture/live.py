"""Live capture: a kernel-filtered packet socket, a capture process, a spool, and the file pipeline.

Capture and decoding are decoupled the way dumpcap and tshark are. This module
opens and filters the packet socket (so a missing privilege, an unknown
interface or a bad filter is an error here, at once), then hands it to the
capture process (:mod:`capture.dumper`), which only reads frames and appends
them to a bounded spool of pcapng segments. The decoder follows the spool
(:mod:`capture.spool`) through the same pcapng reader and :class:`Pipeline` as
``decode``. When decoding falls behind, the spool grows and decoding catches
up; frames are lost only when the spool is full, and that is counted and
reported like the kernel's drops.

Linux only (packet sockets). ``any`` is a cooked socket over all interfaces
(Linux cooked headers are rebuilt); loopback's outgoing copies of each frame
are rejected by the kernel filter.
"""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from capture import linktypes
from capture.bpf import Filter, compile_filter
from capture.errors import CaptureError
from capture.pipeline import CaptureEvent, CaptureOptions, CaptureStats, Pipeline
from capture.records import problem
from capture.spool import SpoolSource

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_AUXDATA = 8
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
ARPHRD_ETHER, ARPHRD_LOOPBACK, ARPHRD_NONE = 1, 772, 0xFFFE
RCVBUF = 64 << 20             # room for bursts while the capture process is not scheduled
DLT_RAW_LINUX = 12            # libpcap's DLT_RAW on Linux (compiling for a cooked socket: IP first)
MIN_SPOOL = 16 << 20
DUMPER = Path(__file__).with_name("dumper.py")

# ARPHRD (link type of a packet socket) -> pcap link type of what SOCK_RAW returns.
_ARPHRD_DLT = {ARPHRD_ETHER: linktypes.ETHERNET, ARPHRD_LOOPBACK: linktypes.ETHERNET,
               ARPHRD_NONE: linktypes.RAW}


@dataclass(slots=True)
class LiveOptions:
    interface: str = "any"
    bpf: str | None = None           # None: "tcp", or "tcp port P or ..." with explicit ports
    snaplen: int = 262144            # bytes kept of each frame; longer frames are cut and counted
    promisc: bool = False
    duration: float | None = None    # seconds
    count: int | None = None         # packets (after the filter)
    spool_dir: Path | None = None    # where segments wait for the decoder; None: a temporary directory
    spool_max: int = 1 << 30         # bytes the spool may hold undecoded; past it frames are dropped
    segment_bytes: int = 16 << 20    # spool segment size
    keep_dir: Path | None = None     # decoded segments are moved here instead of deleted
    undecoded_dir: Path | None = None  # segments not decoded (aborted) are moved here instead of deleted
    name_prefix: str = "live"        # kept segments: <name_prefix>-<n>.pcapng
    rcvbuf: int = RCVBUF             # kernel socket buffer: what bursts can queue while the capture sleeps


def default_bpf(ports: frozenset[int] | None) -> str:
    if not ports:
        return "tcp"
    if len(ports) > 32:
        return f"tcp portrange {min(ports)}-{max(ports)}"
    return "tcp and (" + " or ".join(f"port {p}" for p in sorted(ports)) + ")"


def _privilege_error(interface: str) -> CaptureError:
    return CaptureError(f"live capture on {interface} needs root or the CAP_NET_RAW capability")


@dataclass(slots=True)
class OpenSocket:
    sock: socket.socket
    linktype: int
    cooked: bool
    filter: Filter


def open_socket(o: LiveOptions) -> OpenSocket:
    """The filtered packet socket for ``o.interface``; :class:`CaptureError` with one clear line if not."""
    if not sys.platform.startswith("linux"):
        raise CaptureError("live capture needs Linux (packet sockets); capture with tcpdump and use decode")
    bpf = o.bpf if o.bpf is not None else "tcp"
    try:
        return _open(o, bpf)
    except CaptureError:
        raise
    except PermissionError:
        raise _privilege_error(o.interface) from None
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            raise _privilege_error(o.interface) from None
        if exc.errno in (errno.ENODEV, errno.ENXIO):
            raise CaptureError(f"no such network interface: {o.interface}") from None
        raise CaptureError(f"cannot capture on {o.interface}: {exc.strerror or exc}") from None


def _loopback_index() -> int:
    try:
        return socket.if_nametoindex("lo")
    except OSError:
        return 1


def _open(o: LiveOptions, bpf: str) -> OpenSocket:
    if o.interface == "any":
        # Unbound: every interface. Created listening, so drain what came before the filter.
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
        try:
            flt = compile_filter(bpf, DLT_RAW_LINUX, o.snaplen).without_outgoing_on(_loopback_index())
            flt.attach(sock)
            _drain(sock)
            _tune(sock, o.rcvbuf)
        except BaseException:
            sock.close()
            raise
        return OpenSocket(sock, linktypes.LINUX_SLL, True, flt)
    try:
        index = socket.if_nametoindex(o.interface)
    except OSError:
        raise CaptureError(f"no such network interface: {o.interface}") from None
    # Protocol 0 hears nothing until bound, so no unfiltered frame gets in.
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        sock.bind((o.interface, 0))
        hatype = sock.getsockname()[3]
        dlt = _ARPHRD_DLT.get(hatype)
        cooked = dlt is None
        if cooked:
            # An exotic link layer: let the kernel strip it and rebuild a cooked header.
            sock.close()
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0)
        flt = compile_filter(bpf, DLT_RAW_LINUX if cooked else dlt, o.snaplen)  # type: ignore[arg-type]
        if hatype == ARPHRD_LOOPBACK:
            flt = flt.without_outgoing_on(index)
        flt.attach(sock)
        if o.promisc:
            mreq = index.to_bytes(4, sys.byteorder) + PACKET_MR_PROMISC.to_bytes(2, sys.byteorder) + bytes(10)
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        _tune(sock, o.rcvbuf)
        sock.bind((o.interface, ETH_P_ALL))
    except BaseException:
        sock.close()
        raise
    return OpenSocket(sock, linktypes.LINUX_SLL if cooked else dlt, cooked, flt)  # type: ignore[arg-type]


def _drain(sock: socket.socket) -> None:
    while True:
        try:
            sock.recv(1, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return


def _tune(sock: socket.socket, rcvbuf: int) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


@dataclass(slots=True)
class DumperStatus:
    """What the capture process last said (running totals)."""

    packets: int = 0
    bytes: int = 0
    kernel_drops: int = 0
    spool_drops: int = 0
    spool_bytes: int = 0
    cut: int = 0                          # frames longer than the snap length
    caught_up_ns: int = 0                 # every frame captured before this (wall clock) is in the spool
    ended: str | None = None              # stopped, count, duration, interface, error
    detail: str = ""
    unreported_drops: int = 0
    ended_at: float = 0.0                 # time.monotonic() when it ended or was asked to stop
    backlog_at_end: int = 0               # spooled bytes not yet decoded then
    lines: list[str] = field(default_factory=list)   # anything unexpected it printed


class LiveSource(SpoolSource):
    """A record source over an interface: the capture process runs from construction until stopped."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self.snaplen = options.snaplen
        opened = open_socket(options)
        self.linktype = opened.linktype
        self.filter = opened.filter
        self._tmp = None
        spool = options.spool_dir
        if spool is None:
            self._tmp = tempfile.mkdtemp(prefix="kdissect-spool-")
            spool = Path(self._tmp)
        self.status = DumperStatus()
        self._ended = threading.Event()
        self._signals = 0
        try:
            spool.mkdir(parents=True, exist_ok=True)
            argv = [sys.executable, "-I", "-S", str(DUMPER), "--fd", str(opened.sock.fileno()),
                    "--linktype", str(opened.linktype), "--snaplen", str(options.snaplen),
                    "--interface", options.interface, "--dir", str(spool),
                    "--segment-bytes", str(options.segment_bytes), "--max-bytes", str(options.spool_max)]
            if opened.cooked:
                argv.append("--cooked")
            if options.count is not None:
                argv += ["--count", str(options.count)]
            if options.duration is not None:
                argv += ["--duration", repr(float(options.duration))]
            # Own session: a Ctrl-C at the terminal reaches us, and we decide what the capture does.
            self._proc = subprocess.Popen(argv, pass_fds=[opened.sock.fileno()], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, start_new_session=True)
        except BaseException:
            opened.sock.close()
            raise
        opened.sock.close()          # the capture process holds it now
        super().__init__(spool, f"live capture on {options.interface}", self._dumper_done,
                         keep_dir=options.keep_dir, keep_prefix=options.name_prefix,
                         undecoded_dir=options.undecoded_dir)
        if options.keep_dir is not None:
            options.keep_dir.mkdir(parents=True, exist_ok=True)
        self.on_end = self._report_trailing_drops
        self._listener = threading.Thread(target=self._listen, args=(self._proc.stdout,),
                                          name="kdissect-dumper-status", daemon=True)
        self._listener.start()

    # -- the capture process ---------------------------------------------------------------------

    def _listen(self, pipe: IO[bytes]) -> None:
        st = self.status
        for raw in pipe:
            parts = raw.decode("utf-8", "replace").split()
            try:
                if parts and parts[0] == "stats" and len(parts) == 8:
                    (st.packets, st.bytes, st.kernel_drops, st.spool_drops, st.spool_bytes,
                     st.cut, st.caught_up_ns) = map(int, parts[1:])
                elif parts and parts[0] == "end" and len(parts) >= 7:
                    st.packets, st.kernel_drops, st.spool_drops, st.unreported_drops, st.cut = \
                        map(int, parts[2:7])
                    st.detail = " ".join(parts[7:])
                    if not st.ended_at:         # not measured already when the stop was asked for
                        self._note_backlog()
                    st.ended = parts[1]
                else:
                    st.lines.append(raw.decode("utf-8", "replace").rstrip())
            except ValueError:
                st.lines.append(raw.decode("utf-8", "replace").rstrip())
        self._proc.wait()
        if st.ended is None:
            st.ended = "error"
            st.detail = f"the capture process exited with status {self._proc.returncode}"
        self._ended.set()

    def _dumper_done(self) -> bool:
        return self._proc.poll() is not None

    def _settled_ns(self) -> int:
        # A capture process behind on its socket still holds older frames: the clock waits for it.
        return min(super()._settled_ns(), self.status.caught_up_ns)

    def _report_trailing_drops(self) -> None:
        self._ended.wait(10)
        st = self.status
        if st.cut:
            self.problems.append(problem(
                "snaplen_cut", time.time_ns(), f"{self.name}: {st.cut} frames were longer than the snap length "
                f"({self.snaplen} bytes) and were cut; the bytes missing are gap anomalies", frames=st.cut))
        if st.unreported_drops:
            self.problems.append(problem(
                "capture_drops", time.time_ns(), f"{self.name}: the capture lost {st.unreported_drops} packets after the last one it "
                f"kept (in all: kernel {st.kernel_drops}, spool full {st.spool_drops})",
                dropped=st.unreported_drops))

    @property
    def packets(self) -> int:
        return self.status.packets

    @property
    def kernel_drops(self) -> int:
        return self.status.kernel_drops

    def _note_backlog(self) -> None:
        self.status.backlog_at_end = self.backlog()
        self.status.ended_at = time.monotonic()

    def stop(self) -> None:
        """End the capture: the capture process reads what is queued, then decoding runs to the end."""
        if not self.status.ended_at:
            self._note_backlog()
        self._signal()

    def abort(self) -> None:
        """Stop now: the capture process stops reading, decoding stops at the next packet."""
        self._signal()
        self._signal()
        super().abort()

    def _signal(self) -> None:
        if self._proc.poll() is None and self._signals < 2:
            self._signals += 1
            try:
                self._proc.terminate()
            except ProcessLookupError:
                pass

    def close(self) -> None:
        if self._proc.poll() is None:
            self.abort()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._listener.join(5)
        super().close()


class LiveRun:
    """Iterator of :class:`CaptureEvent` from a live interface; ``stats`` as the file runs have."""

    def __init__(self, source: LiveSource, pipeline: Pipeline) -> None:
        self.source = source
        self.pipeline = pipeline
        self._events = self._generate()

    @property
    def stats(self) -> CaptureStats:
        return self.pipeline.stats

    def stop(self) -> None:
        self.source.stop()

    def abort(self) -> None:
        self.source.abort()

    def _generate(self) -> Generator[CaptureEvent, None, None]:
        try:
            yield from self.pipeline.run(self.source)
        finally:
            self.pipeline.stats.kernel_drops = self.source.kernel_drops
            self.source.close()

    def __iter__(self) -> Iterator[CaptureEvent]:
        return self._events

    def __next__(self) -> CaptureEvent:
        return next(self._events)

    def close(self) -> None:
        self._events.close()
        self.source.close()


def live_capture(live: LiveOptions, options: CaptureOptions | None = None, **pipeline_kw: Any) -> LiveRun:
    """Decode Kafka from an interface as it happens. Raises :class:`CaptureError` on no privilege.

    Without ``live.bpf`` the kernel filter keeps TCP only (or the explicit Kafka ports).
    """
    options = options or CaptureOptions()
    if live.bpf is None:
        live = replace(live, bpf=default_bpf(options.ports))
    source = LiveSource(live)
    return LiveRun(source, Pipeline(options, **pipeline_kw))


def kernel_drops_unavailable_reason() -> str | None:
    """None where PACKET_STATISTICS works (Linux), else why drops cannot be reported."""
    return None if sys.platform.startswith("linux") else "kernel drop counts are only read on Linux"
