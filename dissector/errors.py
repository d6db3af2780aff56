"""The dissector's one error hierarchy.

Readers raise these; the connection catches them at its boundary and turns them
into anomaly events, so no decode failure ever escapes to the caller.
"""

from __future__ import annotations


class DissectError(Exception):
    """Base of everything the dissector raises on bad bytes."""


class Underflow(DissectError):
    """A field needs more bytes than the frame holds."""


class BadLength(DissectError):
    """A length or count is negative, absurd, or larger than what remains."""


class BadVarint(DissectError):
    """A varint runs past its maximum width."""


class DecodeLimit(DissectError):
    """A body would cost more memory decoded than its budget allows (see dissector.budget)."""


class UnknownApi(DissectError):
    """The api key or version is not in the schema."""


class RecordsError(DissectError):
    """A record batch or legacy message set cannot be decoded."""


class DecompressionError(RecordsError):
    """A compressed payload is corrupt, uses an unknown codec, or exceeds the size cap."""


# Records-specific refinements: catchable both as RecordsError and as the generic kind.

class RecordsUnderflow(RecordsError, Underflow):
    """A record or message runs past the batch or message set that holds it."""


class RecordsBadLength(RecordsError, BadLength):
    """A record length, count or size in a batch or message set is impossible."""


class RecordsBadVarint(RecordsError, BadVarint):
    """A varint inside a record batch runs past its maximum width."""


class DecompressionLimit(DecompressionError):
    """Decompressed output would exceed the configured size cap (a likely bomb)."""
