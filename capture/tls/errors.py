"""The TLS layer's errors: one base, translated into anomalies by the caller."""

from __future__ import annotations

from capture.errors import CaptureError


class TlsError(Exception):
    """Bytes that are not (or no longer) a TLS stream this layer can follow."""


class DecryptError(TlsError):
    """A record whose authentication (tag, MAC or padding) fails with the keys at hand."""


class KeyLogError(CaptureError):
    """A key log file that cannot be read; the message names the file, never a secret."""
