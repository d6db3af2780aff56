"""A TLS connection as the pipeline sees it: decrypt with :mod:`capture.tls`, then the usual Kafka path.

:class:`TlsConnection` stands where a dissector ``Connection`` stands in a
flow (same ``feed`` / ``gap`` / ``close``). Decrypted bytes go through the same
Kafka detection as plaintext (so Kafka inside TLS is found on any port), then
to a dissector ``Connection``. What stops decryption becomes one anomaly per
connection: ``tls`` (no keys, joined after the handshake, unsupported) or
``tls_decrypt_failed`` (keys that do not authenticate the records).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capture.detect import KafkaProbe
from capture.flows import ConnectionInfo
from capture.tls.keylog import HOW_TO_GET_KEYS, KeyLog
from capture.tls.session import DECRYPT_FAILED, NO_KEYS, Notice, Plain, TlsSession
from dissector.events import Anomaly, Direction, Event

_SIDE_OF = {Direction.TO_BROKER: 0, Direction.TO_CLIENT: 1}
_DIRECTION_OF = (Direction.TO_BROKER, Direction.TO_CLIENT)


class TlsConnection:
    """Decrypts a TLS connection and feeds the plaintext to a dissector connection made on demand."""

    __slots__ = ("_buffered", "_conn", "_factory", "_limit", "_probe", "_reported", "hidden", "info",
                 "not_kafka", "quiet", "session")

    def __init__(self, keylog: KeyLog | None, factory: Callable[[], Any], info: ConnectionInfo, *,
                 probe: KafkaProbe | None, quiet: bool, detect_limit: int, max_held: int) -> None:
        self.session = TlsSession(keylog, max_held=max_held)
        self.info = info
        info.tls = self.session.info
        self._factory = factory                  # () -> the dissector connection for the plaintext
        self._probe = probe                      # None: an explicit Kafka port, no sniffing
        self.quiet = quiet                       # not a Kafka port: say nothing unless Kafka is found
        self.hidden = quiet                      # ... and leave no trace (no connection end) until then
        self._limit = detect_limit
        self._conn: Any = None
        self._buffered: list[tuple[Direction, bytes, int]] = []
        self._reported = False
        self.not_kafka = False

    def feed(self, direction: Direction, data: bytes, ts: int) -> list[Event]:
        outs = self.session.feed(_SIDE_OF[direction], data, ts)
        return self._outputs(outs) if outs else []

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        self.session.gap(_SIDE_OF[direction], ts)
        if self._conn is not None:
            return self._conn.gap(direction, ts, nbytes)
        return []

    def close(self, ts: int) -> list[Event]:
        out = self._outputs(self.session.close(ts))
        if self._conn is not None:
            out += self._conn.close(ts)
        return out

    # -- internals ----------------------------------------------------------------------------

    def _outputs(self, outs: list[Plain | Notice]) -> list[Event]:
        events: list[Event] = []
        for o in outs:
            if isinstance(o, Plain):
                if self.not_kafka:
                    continue
                direction = _DIRECTION_OF[o.side]
                if self._conn is not None:
                    events += self._conn.feed(direction, o.data, o.ts)
                else:
                    self._buffered.append((direction, o.data, o.ts))
                    events += self._sniff()
            else:
                events += self._notice(o)
        return events

    def _sniff(self) -> list[Event]:
        """Kafka or not, from the client's first plaintext bytes, as for plaintext connections."""
        verdict = "kafka"
        if self._probe is not None:
            first = b"".join(d for direction, d, _ in self._buffered if direction is Direction.TO_BROKER)
            if not first:
                if sum(len(d) for _, d, _ in self._buffered) < self._limit:
                    return []
                verdict = "not_kafka"
            else:
                sniff = self._probe.sniff_request(first)
                if sniff == self._probe.not_kafka:
                    verdict = "not_kafka"
                elif sniff != self._probe.kafka:
                    if len(first) < self._limit:
                        return []
                    verdict = "kafka" if self._probe.find_request_frame(first, 0) == 0 else "not_kafka"
        buffered, self._buffered = self._buffered, []
        if verdict == "not_kafka":
            self.not_kafka = True
            self.session.stop("not Kafka", buffered[0][2] if buffered else 0)
            if self.quiet:
                return []
            ts = buffered[0][2]
            return [self._anomaly("tls", f"{self.info.tls.describe()}: decrypted, but the client's first bytes "
                                  "are not a Kafka request", ts, None)]
        self.hidden = False
        self.info.state = "kafka"
        self._conn = self._factory()                # the decrypted stream starts at its beginning
        events: list[Event] = []
        for direction, data, ts in buffered:
            events += self._conn.feed(direction, data, ts)
        return events

    def _notice(self, n: Notice) -> list[Event]:
        if self._reported or (self.quiet and self._conn is None):
            return []
        self._reported = True
        direction = _DIRECTION_OF[n.side] if n.side is not None else None
        if n.kind == DECRYPT_FAILED:
            return [self._anomaly("tls_decrypt_failed", n.detail, n.ts, direction)]
        if n.kind == "gap":
            return []                            # the gap itself is reported by the pipeline / dissector
        detail = n.detail
        if n.kind == NO_KEYS:
            detail += f"; to {HOW_TO_GET_KEYS}"
        return [self._anomaly("tls", detail, n.ts, direction)]

    @staticmethod
    def _anomaly(kind: str, detail: str, ts: int, direction: Direction | None) -> Anomaly:
        return Anomaly(kind=kind, direction=direction, ts=ts, detail=detail, stream_offset=None, extra={})
