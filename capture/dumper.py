"""The capture loop of a live capture: a packet socket into a bounded spool of pcapng files.

Runs as its own process (``python capture/dumper.py``, started by
:mod:`capture.live`) so that decoding, however slow, never holds it back: it
shares no interpreter lock with the decoder. It does nothing per packet but
read the frame and append an Enhanced Packet Block: frames are read in batches
until the socket is empty, and each batch is one ``write``. Standard library
only, and no import of the ``capture`` package, so it starts fast.

The spool is a directory of segments ``000001.pcapng``, ``000002.pcapng``, ...,
each a complete pcapng file (the decoder follows the one being written). A
segment is complete once the next one exists or this process has exited. The
decoder deletes (or moves away) what it has decoded; the bytes still in the
directory are bounded by ``--max-bytes``: past it, frames are dropped and
counted. Drops — the kernel's (socket buffer full) and the spool's — are
written into the next packet's ``epb_dropcount`` option, so the decoder sees
them where they happened.

Protocol with the parent, one line each on stdout:
``stats PACKETS BYTES KERNEL_DROPS SPOOL_DROPS SPOOL_BYTES CUT CAUGHT_UP_NS`` (running totals, twice a
second; CAUGHT_UP_NS: the socket was last found empty then, so every frame captured before it is in the
spool) and, last,
``end REASON PACKETS KERNEL_DROPS SPOOL_DROPS UNREPORTED_DROPS CUT [DETAIL]``. REASON is ``stopped``,
``count``, ``duration``, ``interface`` (the interface went down or away) or ``error``. SIGINT or SIGTERM
(or the parent closing our stdin) stops after reading what the socket holds; a second signal stops at once.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import signal
import socket
import struct
import sys
import time

SOL_PACKET = 263
SOL_SOCKET = socket.SOL_SOCKET
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
SO_TIMESTAMPNS = 35
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
LINKTYPE_LINUX_SLL = 113

STATS_EVERY = 0.5            # seconds between status lines (and kernel counter reads)
BATCH = 4096                 # frames read before a write, at most
BATCH_BYTES = 4 << 20        # ... and bytes: a batch of 64 KB frames stays small in memory
_GONE = (errno.ENETDOWN, errno.ENODEV, errno.ENXIO)

_AUX = struct.Struct("IIIHHHH")        # tpacket_auxdata
_TIMESPEC = struct.Struct("qq")
_SLL = struct.Struct("!HHH8sH")
_KSTATS = struct.Struct("II")          # tpacket_stats (reset on every read)
_EPB = struct.Struct("<IIIIIII")
_U32 = struct.Struct("<I")
_DROPS_OPT = struct.Struct("<HHQI")    # epb_dropcount option, then opt_endofopt (code 0, length 0)
_PADS = (b"", b"\0", b"\0\0", b"\0\0\0")


def section_header(interface: str, linktype: int, snaplen: int) -> bytes:
    """Section Header Block + one Interface Description Block with nanosecond timestamps."""
    shb_opts = _option(4, b"kdissect live")            # shb_userappl
    shb_len = 24 + len(shb_opts) + 4
    shb = struct.pack("<IIIHHq", 0x0A0D0D0A, shb_len, 0x1A2B3C4D, 1, 0, -1) + shb_opts + _U32.pack(shb_len)
    idb_opts = _option(2, interface.encode()) + _option(9, b"\x09") + _option(0, b"")   # if_name, if_tsresol
    idb_len = 20 + len(idb_opts)
    idb = struct.pack("<IIHHI", 1, idb_len, linktype, 0, snaplen) + idb_opts + _U32.pack(idb_len)
    return shb + idb


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) & 3)


class Spool:
    """Segments in ``directory``; accounts the bytes not yet taken away by the decoder."""

    def __init__(self, directory: str, header: bytes, segment_bytes: int, max_bytes: int) -> None:
        self.directory = directory
        self.header = header
        self.segment_bytes = segment_bytes
        self.max_bytes = max_bytes
        self.seq = 0
        self.fd = -1
        self.written = 0                      # bytes in the open segment
        self.closed: list[tuple[str, int]] = []   # segments complete but maybe not yet decoded
        self.closed_bytes = 0
        self.open_next()

    def path(self, seq: int) -> str:
        return os.path.join(self.directory, f"{seq:06d}.pcapng")

    def open_next(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.closed.append((self.path(self.seq), self.written))
            self.closed_bytes += self.written
        self.seq += 1
        self.fd = os.open(self.path(self.seq), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(self.fd, self.header)
        self.written = len(self.header)

    def used(self) -> int:
        """Bytes still in the spool; forgets the segments the decoder has taken away."""
        while self.closed and not os.path.exists(self.closed[0][0]):
            self.closed_bytes -= self.closed.pop(0)[1]
        return self.closed_bytes + self.written

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.written += len(data)
        if self.written >= self.segment_bytes:
            self.open_next()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Dumper:
    def __init__(self, sock: socket.socket, linktype: int, cooked: bool, snaplen: int, spool: Spool,
                 count: int | None, duration: float | None, out: int) -> None:
        self.sock = sock
        self.linktype = linktype
        self.cooked = cooked
        self.snaplen = snaplen
        self.spool = spool
        self.count = count
        self.deadline = time.monotonic() + duration if duration else None
        self.out = out
        self.packets = 0
        self.bytes = 0
        self.kernel_drops = 0
        self.spool_drops = 0
        self.pending_drops = 0           # not yet written into a packet block
        self.cut = 0                     # frames longer than the snap length
        self.signals = 0
        self.stop_ts = 0                 # frames stamped after this are not read when draining
        self.caught_up = 0               # time.time_ns() when the socket was last found empty

    def _say(self, line: str) -> None:
        try:
            os.write(self.out, (line + "\n").encode())
        except BlockingIOError:
            pass                         # the parent is not reading (stopped?): the next line has the totals
        except OSError:
            pass                         # the parent is gone: keep spooling, it may still be read

    def _stats(self) -> None:
        try:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _KSTATS.size)
        except OSError:
            raw = None
        if raw is not None:
            drops = _KSTATS.unpack(raw)[1]
            self.kernel_drops += drops
            self.pending_drops += drops
        self._say(f"stats {self.packets} {self.bytes} {self.kernel_drops} {self.spool_drops} "
                  f"{self.spool.used()} {self.cut} {self.caught_up}")

    def on_signal(self, signum: int, frame: object) -> None:
        self.signals += 1
        if not self.stop_ts:
            self.stop_ts = time.time_ns()

    def read_batch(self, limit: int, until_ts: int = 0) -> tuple[int, str | None]:
        """Read what the socket holds (at most ``limit`` frames) into one write; (frames, why stopped)."""
        recvmsg = self.sock.recvmsg
        snaplen = self.snaplen
        anc_size = socket.CMSG_SPACE(_AUX.size) + socket.CMSG_SPACE(_TIMESPEC.size)
        dontwait = socket.MSG_DONTWAIT
        cooked = self.cooked
        spool = self.spool
        room = spool.max_bytes - spool.used() - len(spool.header)   # the next segment's header counts too
        epb = _EPB.pack
        u32 = _U32.pack
        ts_of = _TIMESPEC.unpack_from
        aux_of = _AUX.unpack_from
        pads = _PADS
        left = limit if self.count is None else min(limit, self.count - self.packets)
        drops = self.pending_drops
        out: list[bytes] = []
        append = out.append
        size = nbytes = n = written = cut = 0
        why = None
        empty = False
        checked = time.time_ns()
        while n < left and size < BATCH_BYTES:
            try:
                data, anc, _flags, addr = recvmsg(snaplen, anc_size, dontwait)
            except (BlockingIOError, InterruptedError):
                empty = True
                break
            except OSError as exc:
                why = "interface" if exc.errno in _GONE else "error"
                why += " " + (exc.strerror or str(exc))
                break
            n += 1
            ts = 0
            caplen = wirelen = len(data)
            for level, kind, value in anc:        # SO_TIMESTAMPNS, then PACKET_AUXDATA
                if kind == SO_TIMESTAMPNS and level == SOL_SOCKET:
                    sec, nsec = ts_of(value)
                    ts = sec * 1_000_000_000 + nsec
                elif kind == PACKET_AUXDATA and level == SOL_PACKET:
                    status, wirelen, _, _, _, tci, tpid = aux_of(value)
                    if status & TP_STATUS_VLAN_VALID and not cooked:
                        # The kernel stripped the 802.1Q tag: put it back where it was.
                        data = data[:12] + struct.pack("!HH", tpid if status & TP_STATUS_VLAN_TPID_VALID
                                                       else 0x8100, tci) + data[12:]
                        wirelen += 4
                        caplen += 4
            if until_ts and ts > until_ts:
                n -= 1
                why = "drained"
                break                    # arrived after the stop: not part of this capture
            if cooked:
                hw = addr[4][:8]
                data = _SLL.pack(addr[2], addr[3], len(hw), hw.ljust(8, b"\0"), addr[1]) + data
                wirelen += _SLL.size
                caplen += _SLL.size
            if wirelen > caplen:
                cut += 1
            if not ts:
                ts = time.time_ns()
            pad = -caplen & 3
            blen = 32 + caplen + pad + (16 if drops else 0)
            if blen > room:
                drops += 1
                self.spool_drops += 1
                continue
            room -= blen
            append(epb(6, blen, 0, ts >> 32, ts & 0xFFFFFFFF, caplen, wirelen))
            append(data)
            if drops:
                append(pads[pad] + _DROPS_OPT.pack(4, 8, drops, 0) + u32(blen))
                drops = 0
            else:
                append(pads[pad] + u32(blen))
            size += blen
            nbytes += caplen
            written += 1
        self.pending_drops = drops
        self.packets += written
        self.bytes += nbytes
        self.cut += cut
        if why is None and self.count is not None and self.packets >= self.count:
            why = "count"
        if out:
            spool.write(b"".join(out))
        if empty:
            self.caught_up = checked if n else time.time_ns()   # frames stamped before are all written
        return n, why

    def run(self) -> str:
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        poller.register(0, select.POLLIN)         # the parent's end of our stdin: EOF when it goes
        next_stats = time.monotonic()
        reason = "stopped"
        parent_gone = False
        while True:
            now = time.monotonic()
            if self.signals or parent_gone:
                break
            if self.deadline is not None and now >= self.deadline:
                reason = "duration"
                self.stop_ts = time.time_ns()
                break
            if now >= next_stats:
                self._stats()
                next_stats = now + STATS_EVERY
            wait = next_stats - now
            if self.deadline is not None:
                wait = min(wait, self.deadline - now)
            for fd, ev in poller.poll(max(0, wait) * 1000):
                if fd == 0:
                    parent_gone = True
            n, why = self.read_batch(BATCH)
            if why is not None:
                reason, _, detail = why.partition(" ")
                if reason in ("interface", "error"):
                    # The error is reported once; what the socket still holds can be read.
                    self.drain(0)
                    return f"{reason} {detail}"
                return reason
        self.drain(self.stop_ts or time.time_ns())
        return reason

    def drain(self, until_ts: int) -> None:
        """Read what was queued when the capture was told to stop (a second signal cuts it short)."""
        while self.signals < 2:
            n, why = self.read_batch(BATCH, until_ts)
            if not n or why is not None:
                return

    def finish(self, reason: str) -> None:
        try:
            os.set_blocking(self.out, True)   # the last line must get through
        except OSError:
            pass
        self._stats()
        self.spool.close()
        what, _, detail = reason.partition(" ")
        self._say(f"end {what} {self.packets} {self.kernel_drops} {self.spool_drops} {self.pending_drops} "
                  f"{self.cut} {detail}".rstrip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dumper", description="kdissect's capture loop (started by kdissect live)")
    p.add_argument("--fd", type=int, required=True, help="an open, filtered packet socket")
    p.add_argument("--linktype", type=int, required=True)
    p.add_argument("--cooked", action="store_true", help="SOCK_DGRAM socket: rebuild Linux cooked headers")
    p.add_argument("--snaplen", type=int, required=True)
    p.add_argument("--interface", required=True)
    p.add_argument("--dir", required=True, help="spool directory (exists, empty)")
    p.add_argument("--segment-bytes", type=int, default=16 << 20)
    p.add_argument("--max-bytes", type=int, required=True)
    p.add_argument("--count", type=int)
    p.add_argument("--duration", type=float)
    a = p.parse_args(argv)
    sock = socket.socket(fileno=a.fd)
    sock.setblocking(False)
    spool = Spool(a.dir, section_header(a.interface, a.linktype, a.snaplen), a.segment_bytes, a.max_bytes)
    out = sys.stdout.fileno()
    os.set_blocking(out, False)   # a status line must never stall the capture
    d = Dumper(sock, a.linktype, a.cooked, a.snaplen, spool, a.count, a.duration, out)
    signal.signal(signal.SIGINT, d.on_signal)
    signal.signal(signal.SIGTERM, d.on_signal)
    # A mask is inherited: the parent may start us while it holds these back from its own threads.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))
    reason = "error"
    try:
        reason = d.run()
    except OSError as exc:
        reason = f"error {exc.strerror or exc}"
    finally:
        d.finish(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
