"""Live capture: raw frames from a kernel-filtered packet socket, into the same pipeline as files.

Scapy opens the socket (``conf.L2listen``) and compiles the BPF filter into the
kernel; frames are then read with ``recvmsg`` straight off that socket, never
dissected by scapy. On Linux the read also takes the nanosecond timestamp, the
original length and any VLAN tag the kernel stripped from the ancillary data,
and drops loopback frames seen a second time as outgoing (as libpcap does).
``any`` is a cooked socket over all interfaces (SLL headers are rebuilt).

Stops on :meth:`LiveSource.stop` (from another thread), Ctrl-C, a duration or a
packet count; the pipeline then closes every connection.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from capture import linktypes
from capture.errors import CaptureError
from capture.pipeline import CaptureEvent, CaptureOptions, CaptureStats, Pipeline
from capture.records import RawRecord, problem
from dissector.events import Anomaly

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ARPHRD_ETHER, ARPHRD_LOOPBACK, ARPHRD_NONE = 1, 772, 0xFFFE
RCVBUF = 32 << 20             # room for bursts: scapy's default (64 KiB) drops at once

_AUX = struct.Struct("IIIHHHH")       # tpacket_auxdata
_TIMESPEC = struct.Struct("qq")
_SLL = struct.Struct("!HHH8sH")
_STATS = struct.Struct("II")          # tpacket_stats: packets, drops (reset on read)

# ARPHRD (link type of a packet socket) -> pcap link type of what SOCK_RAW returns.
_ARPHRD_DLT = {ARPHRD_ETHER: linktypes.ETHERNET, ARPHRD_LOOPBACK: linktypes.ETHERNET,
               ARPHRD_NONE: linktypes.RAW}


@dataclass(slots=True)
class LiveOptions:
    interface: str = "any"
    bpf: str | None = None           # None: "tcp", or "tcp port P or ..." with explicit ports
    snaplen: int = 262144
    promisc: bool = False
    duration: float | None = None    # seconds
    count: int | None = None         # packets (after the filter)


def default_bpf(ports: frozenset[int] | None) -> str:
    if not ports:
        return "tcp"
    if len(ports) > 32:
        return f"tcp portrange {min(ports)}-{max(ports)}"
    return "tcp and (" + " or ".join(f"port {p}" for p in sorted(ports)) + ")"


def _privilege_error(interface: str) -> CaptureError:
    return CaptureError(f"live capture on {interface} needs root or the CAP_NET_RAW capability")


class LiveSource:
    """A :class:`~capture.records.RecordSource` over a network interface."""

    def __init__(self, options: LiveOptions) -> None:
        self.options = options
        self.problems: list[Anomaly] = []
        self.bytes_read = 0
        self.size: int | None = None
        self.packets = 0
        self.kernel_drops: int | None = None
        self.kernel_packets: int | None = None
        self._stop = threading.Event()
        self._ts = 0
        self._scapy_sock: Any = None
        self._sock, self.linktype, self._cooked = self._open()

    # -- opening -------------------------------------------------------------------------------

    def _open(self) -> tuple[socket.socket, int, bool]:
        o = self.options
        bpf = o.bpf if o.bpf is not None else "tcp"
        try:
            if o.interface == "any" or not sys.platform.startswith("linux"):
                if not sys.platform.startswith("linux"):
                    return self._open_scapy(bpf), -1, False
                return self._open_cooked(bpf), linktypes.LINUX_SLL, True
            sock = self._open_scapy(bpf)
            hatype = sock.getsockname()[3]
            dlt = _ARPHRD_DLT.get(hatype)
            if dlt is None:
                # An exotic link layer: let the kernel strip it and rebuild a cooked header.
                self._scapy_sock.close()
                self._scapy_sock = None
                return self._open_cooked(bpf, o.interface), linktypes.LINUX_SLL, True
            return sock, dlt, False
        except PermissionError:
            raise _privilege_error(o.interface) from None
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES):
                raise _privilege_error(o.interface) from None
            if exc.errno in (errno.ENODEV, errno.ENXIO):
                raise CaptureError(f"no such network interface: {o.interface}") from None
            raise CaptureError(f"cannot capture on {o.interface}: {exc.strerror or exc}") from None

    def _open_scapy(self, bpf: str) -> socket.socket:
        import scapy.arch  # noqa: F401  (sets conf.L2listen for this platform)
        from scapy.config import conf
        from scapy.error import Scapy_Exception
        o = self.options
        # Scapy warns that it has no layer class for loopback: irrelevant, frames stay raw.
        log = logging.getLogger("scapy.runtime")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            self._scapy_sock = conf.L2listen(iface=o.interface, filter=bpf, promisc=o.promisc)
        except Scapy_Exception as exc:
            raise CaptureError(f"bad capture filter {bpf!r}: {exc}") from None
        except ValueError as exc:                  # scapy's unknown-interface error
            raise CaptureError(f"no such network interface: {o.interface} ({exc})") from None
        finally:
            log.setLevel(level)
        sock = getattr(self._scapy_sock, "ins", None)
        if isinstance(sock, socket.socket):
            self._tune(sock)
        return sock  # type: ignore[return-value]

    def _open_cooked(self, bpf: str, interface: str | None = None) -> socket.socket:
        from scapy.arch.common import compile_filter
        from scapy.error import Scapy_Exception
        from scapy.libs.structures import sock_fprog
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
        try:
            # Cooked sockets hand the filter the network header: compile as raw IP.
            try:
                prog = compile_filter(bpf, linktype=linktypes.RAW_12)
            except (Scapy_Exception, OSError, ImportError) as exc:
                raise CaptureError(f"bad capture filter {bpf!r}: {exc}") from None
            sock.setsockopt(socket.SOL_SOCKET, 26, sock_fprog(prog.bf_len, prog.bf_insns))  # SO_ATTACH_FILTER
            if interface:
                sock.bind((interface, ETH_P_ALL))     # unbound: every interface
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self._tune(sock)
        except BaseException:
            sock.close()
            raise
        return sock

    @staticmethod
    def _tune(sock: socket.socket) -> None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        sock.settimeout(0.2)        # wake up to check stop/duration on a quiet interface

    # -- reading -------------------------------------------------------------------------------

    def stop(self) -> None:
        """End the capture (thread-safe); buffered frames already read are still processed."""
        self._stop.set()

    def __iter__(self) -> Iterator[RawRecord]:
        restore = None
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C ends the capture cleanly; a second one interrupts for real.
            def on_sigint(signum: int, frame: Any) -> None:
                if self._stop.is_set():
                    raise KeyboardInterrupt
                self.stop()
            restore = signal.signal(signal.SIGINT, on_sigint)
        try:
            if self.linktype < 0:
                yield from self._read_scapy()
            else:
                yield from self._read_linux()
        except KeyboardInterrupt:
            pass
        finally:
            if restore is not None:
                signal.signal(signal.SIGINT, restore)
            self._read_kernel_stats()

    def _limits(self) -> tuple[float | None, int | None]:
        o = self.options
        return (time.monotonic() + o.duration if o.duration else None), o.count

    def _read_linux(self) -> Iterator[RawRecord]:
        recvmsg = self._sock.recvmsg
        snaplen = self.options.snaplen
        anc_size = socket.CMSG_SPACE(_AUX.size) + socket.CMSG_SPACE(_TIMESPEC.size)
        deadline, count = self._limits()
        stopped = self._stop.is_set
        monotonic = time.monotonic
        lt, cooked = self.linktype, self._cooked
        n = 0
        while not stopped():
            if deadline is not None and monotonic() >= deadline:
                break
            try:
                data, anc, _flags, addr = recvmsg(snaplen, anc_size)
            except (TimeoutError, BlockingIOError, InterruptedError):
                continue
            ts = 0
            wirelen = len(data)
            aux = None
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                    sec, nsec = _TIMESPEC.unpack_from(value)
                    ts = sec * 1_000_000_000 + nsec
                elif level == SOL_PACKET and kind == PACKET_AUXDATA and len(value) >= _AUX.size:
                    aux = _AUX.unpack_from(value)
            pkttype, hatype = addr[2], addr[3]
            if pkttype == PACKET_OUTGOING and hatype == ARPHRD_LOOPBACK:
                continue                   # the same frame comes again as incoming
            if aux is not None:
                status, wirelen = aux[0], aux[1]
                if status & TP_STATUS_VLAN_VALID and not cooked:
                    tpid = aux[6] if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                    data = data[:12] + struct.pack("!HH", tpid, aux[5]) + data[12:]
                    wirelen += 4
            if cooked:
                hw = addr[4][:8]
                data = _SLL.pack(pkttype, hatype, len(hw), hw.ljust(8, b"\0"), addr[1]) + data
                wirelen += _SLL.size
            if not ts:
                ts = time.time_ns()
            n += 1
            self.packets = n
            self._ts = ts
            self.bytes_read += len(data)
            yield (ts, lt, data, wirelen)
            if count is not None and n >= count:
                break

    def _read_scapy(self) -> Iterator[RawRecord]:
        """Other platforms: scapy's raw read (microsecond timestamps, no original length)."""
        from scapy.config import conf
        s = self._scapy_sock
        deadline, count = self._limits()
        n = 0
        lt = -1
        while not self._stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            ready = s.select([s], 0.2) if hasattr(s, "select") else [s]
            if not ready:
                continue
            cls, data, t = s.recv_raw(self.options.snaplen)
            if data is None:
                continue
            if lt < 0:
                lt = conf.l2types.layer2num.get(cls, linktypes.ETHERNET)
                self.linktype = lt
            n += 1
            self.packets = n
            self.bytes_read += len(data)
            yield (int((t or time.time()) * 1e9), lt, data, len(data))
            if count is not None and n >= count:
                break

    def _read_kernel_stats(self) -> None:
        if self._sock is None or not sys.platform.startswith("linux"):
            return
        try:
            raw = self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _STATS.size)
        except OSError:
            return
        packets, drops = _STATS.unpack(raw)
        # The counters reset on every read; this is the only read.
        self.kernel_packets, self.kernel_drops = packets, drops
        if drops:
            self.problems.append(problem(
                "capture_drops", self._ts,
                f"the kernel dropped {drops} of {packets} packets on {self.options.interface} "
                "(the reader fell behind)", dropped=drops))

    def close(self) -> None:
        if self._scapy_sock is not None:
            self._scapy_sock.close()
            self._scapy_sock = None
        elif self._sock is not None:
            self._sock.close()
        self._sock = None  # type: ignore[assignment]


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


def live_capture(live: LiveOptions, options: CaptureOptions | None = None, **pipeline_kw: Any) -> LiveRun:
    """Decode Kafka from an interface as it happens. Raises :class:`CaptureError` on no privilege.

    Without ``live.bpf`` the kernel filter keeps TCP only (or the explicit Kafka ports).
    """
    options = options or CaptureOptions()
    if live.bpf is None:
        live = LiveOptions(**{**{f: getattr(live, f) for f in live.__slots__}, "bpf": default_bpf(options.ports)})
    source = LiveSource(live)
    return LiveRun(source, Pipeline(options, **pipeline_kw))


def kernel_drops_unavailable_reason() -> str | None:
    """None where PACKET_STATISTICS works (Linux), else why drops cannot be reported."""
    return None if sys.platform.startswith("linux") else "kernel drop counts are only read on Linux"
