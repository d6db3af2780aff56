"""Key schedules and record protection, on top of ``cryptography`` (no hand-written primitives).

TLS 1.2: the key block from the master secret (RFC 5246 6.3, PRF 5), then AES-GCM
(RFC 5288), ChaCha20-Poly1305 (RFC 7905) or AES-CBC + HMAC, MAC-then-encrypt or
encrypt-then-MAC (RFC 7366). TLS 1.3: traffic keys from the logged traffic
secrets with HKDF-Expand-Label, KeyUpdate's next secret (RFC 8446 7.1-7.3, 5.2).
"""

from __future__ import annotations

import hmac as _hmac
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as crypto_hmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from capture.tls.errors import DecryptError
from capture.tls.suites import CBC, CHACHA, GCM, Suite

_HASHES = {"sha1": hashes.SHA1, "sha256": hashes.SHA256, "sha384": hashes.SHA384}
_SEQ = struct.Struct(">Q").pack
_TAG = 16


def _hmac_digest(name: str, key: bytes, data: bytes) -> bytes:
    h = crypto_hmac.HMAC(key, _HASHES[name]())
    h.update(data)
    return h.finalize()


def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2 PRF: P_hash(secret, label + seed) cut to ``length``."""
    seed = label + seed
    out = b""
    a = seed
    while len(out) < length:
        a = _hmac_digest(hash_name, secret, a)
        out += _hmac_digest(hash_name, secret, a + seed)
    return out[:length]


def hkdf_expand_label(hash_name: str, secret: bytes, label: bytes, length: int, context: bytes = b"") -> bytes:
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    return HKDFExpand(_HASHES[hash_name](), length, info).derive(secret)


def hash_len(hash_name: str) -> int:
    return _HASHES[hash_name].digest_size


class RecordCipher:
    """Decrypts the records of one direction in order; ``seq`` counts them (RFC 5246 6.1)."""

    __slots__ = ("seq",)

    def __init__(self) -> None:
        self.seq = 0

    def decrypt(self, ctype: int, header: bytes, fragment: bytes) -> tuple[int, bytes]:
        """(content type, plaintext); raises DecryptError when authentication fails."""
        raise NotImplementedError


class _Aead12(RecordCipher):
    __slots__ = ("_aead", "_explicit", "_iv")

    def __init__(self, suite: Suite, key: bytes, iv: bytes) -> None:
        super().__init__()
        self._aead = AESGCM(key) if suite.cipher == GCM else ChaCha20Poly1305(key)
        self._explicit = suite.cipher == GCM          # GCM carries an 8-byte explicit nonce per record
        self._iv = iv

    def decrypt(self, ctype: int, header: bytes, fragment: bytes) -> tuple[int, bytes]:
        seq = self.seq
        if self._explicit:
            if len(fragment) < 8 + _TAG:
                raise DecryptError("record shorter than its nonce and tag")
            nonce, body = self._iv + fragment[:8], fragment[8:]
        else:
            if len(fragment) < _TAG:
                raise DecryptError("record shorter than its tag")
            nonce = (int.from_bytes(self._iv, "big") ^ seq).to_bytes(12, "big")
            body = fragment
        aad = _SEQ(seq) + header[:3] + (len(body) - _TAG).to_bytes(2, "big")
        try:
            plain = self._aead.decrypt(nonce, body, aad)
        except InvalidTag:
            raise DecryptError("authentication tag mismatch") from None
        self.seq = seq + 1
        return ctype, plain


class _Cbc12(RecordCipher):
    __slots__ = ("_etm", "_key", "_mac", "_mac_key", "_mac_len")

    def __init__(self, suite: Suite, key: bytes, mac_key: bytes, encrypt_then_mac: bool) -> None:
        super().__init__()
        self._key, self._mac_key, self._mac = key, mac_key, suite.mac or "sha1"
        self._mac_len, self._etm = suite.mac_len, encrypt_then_mac

    def _check(self, ctype: int, header: bytes, content: bytes, mac: bytes) -> None:
        data = _SEQ(self.seq) + bytes([ctype]) + header[1:3] + len(content).to_bytes(2, "big") + content
        if not _hmac.compare_digest(_hmac_digest(self._mac, self._mac_key, data), mac):
            raise DecryptError("record MAC mismatch")

    def decrypt(self, ctype: int, header: bytes, fragment: bytes) -> tuple[int, bytes]:
        m = self._mac_len
        if self._etm:
            body, mac = fragment[:-m], fragment[-m:]
            if len(body) < 32 or len(body) % 16:
                raise DecryptError("CBC record of a length no block cipher produces")
            self._check(ctype, header, body, mac)
            padded = self._cbc(body)
            pad = padded[-1]
            if pad + 1 > len(padded):
                raise DecryptError("bad CBC padding")
            plain = padded[:-pad - 1]
        else:
            if len(fragment) < 32 or len(fragment) % 16:
                raise DecryptError("CBC record of a length no block cipher produces")
            padded = self._cbc(fragment)
            pad = padded[-1]
            if pad + 1 + m > len(padded) or padded[-pad - 1:] != bytes([pad]) * (pad + 1):
                raise DecryptError("bad CBC padding")
            content = padded[:-pad - 1]
            plain, mac = content[:-m], content[-m:]
            self._check(ctype, header, plain, mac)
        self.seq += 1
        return ctype, plain

    def _cbc(self, body: bytes) -> bytes:
        d = Cipher(algorithms.AES(self._key), modes.CBC(body[:16])).decryptor()
        return d.update(body[16:]) + d.finalize()


class Aead13(RecordCipher):
    """TLS 1.3 protection from one traffic secret; :meth:`update` follows a KeyUpdate."""

    __slots__ = ("_aead", "_iv", "secret", "suite")

    def __init__(self, suite: Suite, secret: bytes) -> None:
        super().__init__()
        self.suite, self.secret = suite, secret
        key = hkdf_expand_label(suite.hash, secret, b"key", suite.key_len)
        self._iv = int.from_bytes(hkdf_expand_label(suite.hash, secret, b"iv", 12), "big")
        self._aead = AESGCM(key) if suite.cipher == GCM else ChaCha20Poly1305(key)

    def decrypt(self, ctype: int, header: bytes, fragment: bytes) -> tuple[int, bytes]:
        nonce = (self._iv ^ self.seq).to_bytes(12, "big")
        try:
            inner = self._aead.decrypt(nonce, fragment, header)
        except InvalidTag:
            raise DecryptError("authentication tag mismatch") from None
        self.seq += 1
        end = len(inner.rstrip(b"\0"))
        if end == 0:
            raise DecryptError("a TLS 1.3 record without a content type")
        return inner[end - 1], inner[:end - 1]

    def update(self) -> Aead13:
        """The next generation of this direction's keys (after a KeyUpdate)."""
        return Aead13(self.suite, hkdf_expand_label(self.suite.hash, self.secret, b"traffic upd",
                                                    hash_len(self.suite.hash)))


def tls12_ciphers(suite: Suite, master: bytes, client_random: bytes, server_random: bytes,
                  encrypt_then_mac: bool) -> tuple[RecordCipher, RecordCipher]:
    """(client->server, server->client) record ciphers from a TLS 1.2 master secret."""
    m, k, i = suite.mac_len, suite.key_len, suite.iv_len if suite.cipher != CBC else 0
    block = prf12(suite.hash, master, b"key expansion", server_random + client_random, 2 * (m + k + i))
    cmac, smac = block[:m], block[m:2 * m]
    ckey, skey = block[2 * m:2 * m + k], block[2 * m + k:2 * m + 2 * k]
    civ, siv = block[2 * m + 2 * k:2 * m + 2 * k + i], block[2 * m + 2 * k + i:]
    if suite.cipher == CBC:
        return _Cbc12(suite, ckey, cmac, encrypt_then_mac), _Cbc12(suite, skey, smac, encrypt_then_mac)
    if suite.cipher in (GCM, CHACHA):
        return _Aead12(suite, ckey, civ), _Aead12(suite, skey, siv)
    raise ValueError(suite.cipher)
