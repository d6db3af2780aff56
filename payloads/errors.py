"""The payload layer's one error hierarchy; kdissect turns these into a line or an anomaly."""

from __future__ import annotations


class PayloadError(Exception):
    """Base of everything this package raises."""


class MissingLibrary(PayloadError):
    """A library a schema format needs is not installed; the message says what to install."""


class SchemaError(PayloadError):
    """A schema that cannot be read or compiled (bad text, unresolved reference)."""


class ValueMismatch(PayloadError):
    """A value that does not decode with its schema."""
