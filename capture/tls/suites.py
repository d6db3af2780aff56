"""The cipher suites this layer decrypts, by IANA number.

The key exchange (ECDHE, DHE, RSA) does not matter here: the key log holds the
master secret or the traffic secrets, so only the record protection and the
PRF hash are listed.
"""

from __future__ import annotations

from dataclasses import dataclass

GCM, CHACHA, CBC = "aes-gcm", "chacha20-poly1305", "aes-cbc"

TLS10, TLS11, TLS12, TLS13 = 0x0301, 0x0302, 0x0303, 0x0304
VERSION_NAMES = {0x0300: "SSL 3.0", TLS10: "TLS 1.0", TLS11: "TLS 1.1", TLS12: "TLS 1.2", TLS13: "TLS 1.3"}


@dataclass(frozen=True, slots=True)
class Suite:
    id: int
    name: str
    tls13: bool
    cipher: str           # GCM, CHACHA or CBC
    key_len: int
    iv_len: int           # fixed IV / salt bytes from the key block (TLS 1.2), nonce length (TLS 1.3)
    mac: str | None       # HMAC hash of CBC suites
    mac_len: int
    hash: str             # PRF (TLS 1.2) or HKDF (TLS 1.3) hash


def _suites() -> dict[int, Suite]:
    out: dict[int, Suite] = {}

    def add(sid: int, name: str, cipher: str, key_len: int, hash_: str, mac: str | None = None,
            tls13: bool = False) -> None:
        iv_len = 12 if tls13 or cipher == CHACHA else (4 if cipher == GCM else 16)
        mac_len = {"sha1": 20, "sha256": 32, "sha384": 48}.get(mac or "", 0)
        out[sid] = Suite(sid, name, tls13, cipher, key_len, iv_len, mac, mac_len, hash_)

    add(0x1301, "TLS_AES_128_GCM_SHA256", GCM, 16, "sha256", tls13=True)
    add(0x1302, "TLS_AES_256_GCM_SHA384", GCM, 32, "sha384", tls13=True)
    add(0x1303, "TLS_CHACHA20_POLY1305_SHA256", CHACHA, 32, "sha256", tls13=True)
    for kx, gcm128, gcm256, chacha in (("ECDHE_ECDSA", 0xC02B, 0xC02C, 0xCCA9), ("ECDHE_RSA", 0xC02F, 0xC030, 0xCCA8),
                                       ("DHE_RSA", 0x009E, 0x009F, 0xCCAA), ("RSA", 0x009C, 0x009D, None)):
        add(gcm128, f"TLS_{kx}_WITH_AES_128_GCM_SHA256", GCM, 16, "sha256")
        add(gcm256, f"TLS_{kx}_WITH_AES_256_GCM_SHA384", GCM, 32, "sha384")
        if chacha is not None:
            add(chacha, f"TLS_{kx}_WITH_CHACHA20_POLY1305_SHA256", CHACHA, 32, "sha256")
    # CBC: (suite, key exchange, key bits, MAC); TLS 1.2's PRF is SHA-256 unless the MAC is SHA-384.
    for sid, kx, bits, mac in ((0xC009, "ECDHE_ECDSA", 128, "sha1"), (0xC00A, "ECDHE_ECDSA", 256, "sha1"),
                               (0xC013, "ECDHE_RSA", 128, "sha1"), (0xC014, "ECDHE_RSA", 256, "sha1"),
                               (0xC023, "ECDHE_ECDSA", 128, "sha256"), (0xC024, "ECDHE_ECDSA", 256, "sha384"),
                               (0xC027, "ECDHE_RSA", 128, "sha256"), (0xC028, "ECDHE_RSA", 256, "sha384"),
                               (0x0033, "DHE_RSA", 128, "sha1"), (0x0039, "DHE_RSA", 256, "sha1"),
                               (0x0067, "DHE_RSA", 128, "sha256"), (0x006B, "DHE_RSA", 256, "sha256"),
                               (0x002F, "RSA", 128, "sha1"), (0x0035, "RSA", 256, "sha1"),
                               (0x003C, "RSA", 128, "sha256"), (0x003D, "RSA", 256, "sha256")):
        suffix = {"sha1": "SHA", "sha256": "SHA256", "sha384": "SHA384"}[mac]
        add(sid, f"TLS_{kx}_WITH_AES_{bits}_CBC_{suffix}", CBC, bits // 8,
            "sha384" if mac == "sha384" else "sha256", mac)
    return out


SUITES = _suites()


def suite_name(sid: int) -> str:
    s = SUITES.get(sid)
    return s.name if s is not None else f"0x{sid:04X}"


def version_name(version: int) -> str:
    return VERSION_NAMES.get(version, f"0x{version:04X}")
