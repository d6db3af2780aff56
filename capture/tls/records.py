"""TLS record framing: one direction's bytes in, whole records out.

A record is a 5-byte header (content type, legacy version, length) and a
fragment of at most 2^14 + 2048 bytes (RFC 5246 6.2.3), so the buffer never
holds more than one partial record. Anything else is not TLS and ends the stream.
"""

from __future__ import annotations

import struct

from capture.tls.errors import TlsError

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
MAX_FRAGMENT = (1 << 14) + 2048
_HEADER = struct.Struct(">BHH")

# (content type, header bytes, fragment)
Record = tuple[int, bytes, bytes]


class RecordReader:
    """Reassembles records across segments, and splits several out of one segment."""

    __slots__ = ("_buf", "records")

    def __init__(self) -> None:
        self._buf = b""
        self.records = 0

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[Record]:
        buf = self._buf + data if self._buf else data
        out: list[Record] = []
        pos, n = 0, len(buf)
        unpack = _HEADER.unpack_from
        while n - pos >= 5:
            ctype, version, length = unpack(buf, pos)
            if not CHANGE_CIPHER_SPEC <= ctype <= HEARTBEAT or version >> 8 != 3 or length > MAX_FRAGMENT:
                self._buf = b""
                raise TlsError(f"not a TLS record header at this point (type {ctype}, version {version:#06x}, "
                               f"length {length})")
            end = pos + 5 + length
            if end > n:
                break
            out.append((ctype, buf[pos:pos + 5], buf[pos + 5:end]))
            pos = end
        self._buf = buf[pos:] if pos < n else b""
        self.records += len(out)
        return out
