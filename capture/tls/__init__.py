"""TLS between TCP reassembly and Kafka detection: records in, plaintext out, given the session keys.

Sans-IO, like the dissector: a :class:`~capture.tls.session.TlsSession` is fed
each direction's reassembled bytes and returns decrypted application data and
notices. Keys come from NSS key log files and pcapng Decryption Secrets Blocks
(:mod:`capture.tls.keylog`); ciphers, HMAC and HKDF come from ``cryptography``.
Nothing here imports the dissector: :mod:`capture.tlsflow` connects the two.
"""

from capture.tls.errors import KeyLogError, TlsError
from capture.tls.keylog import KeyLog
from capture.tls.session import Notice, TlsInfo, TlsSession

__all__ = ["KeyLog", "KeyLogError", "Notice", "TlsError", "TlsInfo", "TlsSession"]
