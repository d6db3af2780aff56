"""Handshake messages: reassembled across records, and the hello messages read.

Only what decryption and the dataset need is read: randoms, session ids, the
offered and chosen versions, the cipher suite, SNI, ALPN, PSK and the
extensions that change the record protection (encrypt_then_mac).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from capture.tls.errors import TlsError

CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET, FINISHED, KEY_UPDATE = 1, 2, 4, 20, 24
MAX_MESSAGE = 1 << 20          # certificate chains are the largest real messages, far below this

EXT_SNI, EXT_ALPN, EXT_ENCRYPT_THEN_MAC, EXT_EXTENDED_MS = 0, 16, 22, 23
EXT_SESSION_TICKET, EXT_PRE_SHARED_KEY, EXT_SUPPORTED_VERSIONS = 35, 41, 43

# ServerHello.random of a HelloRetryRequest (RFC 8446 4.1.3): SHA-256("HelloRetryRequest")
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

_U16 = struct.Struct(">H").unpack_from


@dataclass(slots=True)
class ClientHello:
    random: bytes
    session_id: bytes
    sni: str | None = None
    alpn: list[str] = field(default_factory=list)
    offers_psk: bool = False
    offers_ticket: bool = False


@dataclass(slots=True)
class ServerHello:
    random: bytes
    session_id: bytes
    version: int                 # the negotiated version (supported_versions wins over legacy_version)
    cipher_suite: int
    alpn: str | None = None
    encrypt_then_mac: bool = False
    psk_accepted: bool = False
    retry: bool = False          # a HelloRetryRequest: the real ServerHello follows


class HandshakeReader:
    """Handshake-record fragments in, whole ``(type, body)`` messages out."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    @property
    def pending(self) -> int:
        """Bytes of a message not yet whole."""
        return len(self._buf)

    def feed(self, fragment: bytes) -> list[tuple[int, bytes]]:
        buf = self._buf + fragment if self._buf else fragment
        out = []
        pos, n = 0, len(buf)
        while n - pos >= 4:
            length = int.from_bytes(buf[pos + 1:pos + 4], "big")
            if length > MAX_MESSAGE:
                self._buf = b""
                raise TlsError(f"a handshake message of {length} bytes")
            if n - pos - 4 < length:
                break
            out.append((buf[pos], buf[pos + 4:pos + 4 + length]))
            pos += 4 + length
        self._buf = buf[pos:]
        return out


class _Cursor:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data, self.pos, self.end = data, pos, len(data) if end is None else end

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise TlsError("a hello message ends inside a field")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return _U16(self.take(2))[0]

    def vec(self, width: int) -> bytes:
        return self.take(int.from_bytes(self.take(width), "big"))

    def extensions(self) -> list[tuple[int, bytes]]:
        if self.pos >= self.end:
            return []
        block = _Cursor(self.vec(2))
        out = []
        while block.pos < block.end:
            etype = block.u16()
            out.append((etype, block.vec(2)))
        return out


def _sni(data: bytes) -> str | None:
    c = _Cursor(_Cursor(data).vec(2))
    while c.pos < c.end:
        kind = c.u8()
        name = c.vec(2)
        if kind == 0:
            return name.decode("ascii", "replace")
    return None


def _alpn(data: bytes) -> list[str]:
    c = _Cursor(_Cursor(data).vec(2))
    out = []
    while c.pos < c.end:
        out.append(c.vec(1).decode("ascii", "replace"))
    return out


def parse_client_hello(body: bytes) -> ClientHello:
    c = _Cursor(body)
    c.u16()                                       # legacy_version
    hello = ClientHello(random=c.take(32), session_id=c.vec(1))
    c.vec(2)                                      # cipher suites
    c.vec(1)                                      # compression methods
    for etype, data in c.extensions():
        if etype == EXT_SNI and data:
            hello.sni = _sni(data)
        elif etype == EXT_ALPN and data:
            hello.alpn = _alpn(data)
        elif etype == EXT_PRE_SHARED_KEY:
            hello.offers_psk = True
        elif etype == EXT_SESSION_TICKET and data:
            hello.offers_ticket = True
    return hello


def parse_server_hello(body: bytes) -> ServerHello:
    c = _Cursor(body)
    legacy = c.u16()
    random = c.take(32)
    session_id = c.vec(1)
    suite = c.u16()
    c.u8()                                        # compression method
    hello = ServerHello(random=random, session_id=session_id, version=legacy, cipher_suite=suite,
                        retry=random == HRR_RANDOM)
    for etype, data in c.extensions():
        if etype == EXT_SUPPORTED_VERSIONS and len(data) == 2:
            hello.version = _U16(data)[0]
        elif etype == EXT_ALPN and data:
            names = _alpn(data)
            hello.alpn = names[0] if names else None
        elif etype == EXT_ENCRYPT_THEN_MAC:
            hello.encrypt_then_mac = True
        elif etype == EXT_PRE_SHARED_KEY:
            hello.psk_accepted = True
    return hello
