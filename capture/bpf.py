"""Kernel packet filters: a tcpdump-style expression compiled by libpcap with *our* snap length.

The snap length is the value the filter returns for an accepted packet, and the
kernel cuts every frame to it. Compiling through a helper that uses its own
constant (scapy's ``compile_filter`` uses 65535) silently cut 65,549-byte
frames on a 65536-MTU loopback; here the caller's snaplen is the one used.

Loopback hands a packet socket every frame twice, once as outgoing and once as
incoming. A short prologue rejects the outgoing copy in the kernel, so it
costs no socket buffer and is counted neither as traffic nor as a drop.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import socket
import struct
from dataclasses import dataclass

from capture.errors import CaptureError

SO_ATTACH_FILTER = 26
PACKET_OUTGOING = 4

# Classic BPF opcodes used by the prologue, and Linux's ancillary load offsets.
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_SKF_AD_OFF = -0x1000
_SKF_AD_PKTTYPE, _SKF_AD_IFINDEX = 4, 8

_INSN = struct.Struct("HBBI")     # struct sock_filter: code, jt, jf, k


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("bf_len", ctypes.c_uint), ("bf_insns", ctypes.POINTER(_Insn))]


@dataclass(frozen=True, slots=True)
class Filter:
    """A compiled classic BPF program: ``(code, jt, jf, k)`` per instruction."""

    expression: str
    insns: tuple[tuple[int, int, int, int], ...]

    def without_outgoing_on(self, ifindex: int) -> Filter:
        """The same filter behind a prologue that drops frames sent out of interface ``ifindex``."""
        # Jump offsets of the original program are relative, so prepending keeps them valid.
        prologue = (
            (_LD_W_ABS, 0, 0, (_SKF_AD_OFF + _SKF_AD_PKTTYPE) & 0xFFFFFFFF),
            (_JEQ_K, 0, 3, PACKET_OUTGOING),                 # not outgoing: to the filter
            (_LD_W_ABS, 0, 0, (_SKF_AD_OFF + _SKF_AD_IFINDEX) & 0xFFFFFFFF),
            (_JEQ_K, 0, 1, ifindex),                         # outgoing elsewhere: to the filter
            (_RET_K, 0, 0, 0),                               # loopback's outgoing copy: reject
        )
        return Filter(self.expression, prologue + self.insns)

    def attach(self, sock: socket.socket) -> None:
        n = len(self.insns)
        arr = (_Insn * n)(*(_Insn(*i) for i in self.insns))
        fprog = struct.pack("HL", n, ctypes.addressof(arr))
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)

    @property
    def snaplen(self) -> int:
        """The largest byte count any accepting ``ret`` returns."""
        return max((k for code, _, _, k in self.insns if code == _RET_K), default=0)


def _libpcap() -> ctypes.CDLL:
    name = ctypes.util.find_library("pcap")
    for candidate in ([name] if name else []) + ["libpcap.so.1", "libpcap.so.0.8", "libpcap.so"]:
        try:
            lib = ctypes.CDLL(candidate)
        except OSError:
            continue
        lib.pcap_open_dead.restype = ctypes.c_void_p
        lib.pcap_open_dead.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.pcap_compile.restype = ctypes.c_int
        lib.pcap_compile.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Program), ctypes.c_char_p, ctypes.c_int,
                                     ctypes.c_uint32]
        lib.pcap_geterr.restype = ctypes.c_char_p
        lib.pcap_geterr.argtypes = [ctypes.c_void_p]
        lib.pcap_freecode.argtypes = [ctypes.POINTER(_Program)]
        lib.pcap_close.argtypes = [ctypes.c_void_p]
        return lib
    raise CaptureError("compiling a capture filter needs libpcap: install it (apt-get install libpcap0.8)")


def compile_filter(expression: str, dlt: int, snaplen: int) -> Filter:
    """Compile ``expression`` for link type ``dlt`` (libpcap's DLT number); accepted frames keep ``snaplen``.

    Raises :class:`CaptureError` with libpcap's message for a bad expression.
    """
    lib = _libpcap()
    handle = lib.pcap_open_dead(dlt, snaplen)
    if not handle:
        raise CaptureError(f"libpcap cannot compile filters for link type {dlt}")
    prog = _Program()
    try:
        if lib.pcap_compile(handle, ctypes.byref(prog), expression.encode(), 1, 0xFFFFFFFF) != 0:
            why = (lib.pcap_geterr(handle) or b"").decode("utf-8", "replace")
            raise CaptureError(f"bad capture filter {expression!r}: {why}")
        insns = tuple((prog.bf_insns[i].code, prog.bf_insns[i].jt, prog.bf_insns[i].jf, prog.bf_insns[i].k)
                      for i in range(prog.bf_len))
        lib.pcap_freecode(ctypes.byref(prog))
    finally:
        lib.pcap_close(handle)
    return Filter(expression, insns)
