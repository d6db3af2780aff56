"""TLS between TCP reassembly and Kafka detection: records in, plaintext out, given the session keys.

Sans-IO, like the dissector: a :class:`~capture.tls.session.TlsSession` is fed
each direction's reassembled bytes and returns decrypted application data and
notices. Keys come from NSS key log files and pcapng Decryption Secrets Blocks
(:mod:`capture.tls.keylog`); ciphers, HMAC and HKDF come from ``cryptography``.
Nothing here imports the dissector: :mod:`capture.tlsflow` connects the two.
"""

from typing import Any

from capture.tls.errors import KeyLogError, TlsError
from capture.tls.keylog import KeyLog

__all__ = ["KeyLog", "KeyLogError", "Notice", "TlsError", "TlsInfo", "TlsSession"]

_SESSION = ("Notice", "TlsInfo", "TlsSession")


def __getattr__(name: str) -> Any:
    # The session (handshake, suites, records) loads on first use: every capture reads
    # key logs through this package, few hold TLS.
    if name in _SESSION:
        from capture.tls import session
        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
