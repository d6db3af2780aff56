"""Typed events a :class:`dissector.connection.Connection` yields.

Timestamps are integer nanoseconds since the epoch, as the capture gave them;
they are never taken from the clock of the machine doing the decoding.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from hotpath import inheritable

KAFKA_PROTOCOL = "0.8+"   # the size-prefixed, correlated protocol of Kafka 0.8 and later


class Direction(enum.IntEnum):
    """Which way bytes flow on a connection."""

    TO_BROKER = 0  # requests
    TO_CLIENT = 1  # responses


@dataclass
class DecodeFailure:
    """Where and why decoding a body stopped; what decoded before stays in the body."""

    error: str      # exception class name, e.g. "Underflow"
    detail: str
    offset: int     # byte offset inside the frame (after the 4-byte size) where it failed


@dataclass
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int                   # frame bytes including the 4-byte size prefix
    first_ts: int               # capture ts (ns) of the frame's first byte
    last_ts: int                # capture ts (ns) of the frame's last byte
    header_version: int
    body: dict[str, Any] | None  # None when the api key/version is unknown
    failure: DecodeFailure | None = None
    stream_offset: int = 0      # offset of the frame in its direction's byte stream
    raw: bytes | None = None    # the body bytes, kept only when they could not be decoded
    header_tags: dict[int, bytes] | None = None
    protocol = KAFKA_PROTOCOL   # the protocol generation (``0.7`` for dissector.v07); a class attribute, not a field

    @property
    def api_name(self) -> str:
        from dissector.schema import api_name
        return api_name(self.api_key)

    @property
    def expects_response(self) -> bool:
        return response_expected(self.api_key, self.body)


def response_expected(api_key: int, body: dict[str, Any] | None) -> bool:
    """Whether a request of ``api_key`` with this decoded body gets a response (``Request.expects_response``)."""
    # Produce with acks=0 is the protocol's only fire-and-forget request.
    return not (api_key == 0 and body is not None and body.get("acks") == 0)


@dataclass
class Response:
    correlation_id: int
    size: int
    first_ts: int
    last_ts: int
    api_key: int | None          # from the paired request, or inferred
    api_version: int | None
    header_version: int | None
    body: dict[str, Any] | None
    failure: DecodeFailure | None = None
    inferred: bool = False       # api key/version guessed because the request was never seen
    stream_offset: int = 0
    raw: bytes | None = None
    header_tags: dict[int, bytes] | None = None
    protocol = KAFKA_PROTOCOL


class Status(str, enum.Enum):
    OK = "ok"
    NO_RESPONSE_EXPECTED = "no_response_expected"   # Produce acks=0
    NO_RESPONSE = "no_response"                     # request seen, response never was
    ORPHAN_RESPONSE = "orphan_response"             # response whose request was never seen
    MALFORMED = "malformed"                         # either side failed to decode


@dataclass
class Exchange:
    request: Request | None
    response: Response | None
    status: Status

    @property
    def latency_ns(self) -> int | None:
        """Response first byte minus request last byte: the broker's time plus one network hop.

        Measured from the request's last byte, so a large request's own transfer
        time is not charged to the broker.
        """
        if self.request is None or self.response is None:
            return None
        return self.response.first_ts - self.request.last_ts

    @property
    def api_key(self) -> int | None:
        return self.request.api_key if self.request else (self.response.api_key if self.response else None)

    @property
    def api_version(self) -> int | None:
        return self.request.api_version if self.request else (self.response.api_version if self.response else None)

    @property
    def correlation_id(self) -> int:
        return self.request.correlation_id if self.request else self.response.correlation_id  # type: ignore[union-attr]


@dataclass
class SaslToken:
    """A raw SASL token after SaslHandshake v0: size-prefixed, not a Kafka request."""

    direction: Direction
    size: int
    ts: int
    mechanism: str | None
    token: bytes | None          # None when redacted


@dataclass
class Anomaly:
    kind: str                    # gap, resync, truncated, malformed, oversize, crc_mismatch, ...
    direction: Direction | None
    ts: int
    detail: str
    stream_offset: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Event = Request | Response | Exchange | SaslToken | Anomaly


inheritable(Request, Response)     # dissector.v07.events
