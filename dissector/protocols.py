"""Which Kafka protocol generation a connection speaks: 0.7, or 0.8 and later.

The two look alike (a 0.7 PRODUCE to a five-letter topic starts like a 0.8
Produce v5 header), so the choice rests on a complete parse of the whole first
request: it is 0.8+ when that frame decodes as a 0.8+ request, 0.7 when it does
not and parses completely and strictly as 0.7, else 0.8+ (whose decoder reports
what is wrong). Joined mid-stream, the earliest frame either decoder can prove
decides. The choice is made once: a connection never changes format midway.

A user can force the choice for every connection or per broker port
(``--protocol 0.7``, ``--protocol 0.7=9092,9093``), as Wireshark's Decode As: a :class:`ProtocolChoice`,
which the command line builds.

:class:`AutoConnection` holds a connection's first bytes (bounded) until it can
decide, then hands them to the chosen connection and steps aside: its methods
are rebound to that connection's, so the decision costs nothing afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dissector import framing
from dissector.connection import Connection, Options
from dissector.events import KAFKA_PROTOCOL, Anomaly, Direction, Event
from dissector.framing import DEFAULT_MAX_FRAME, Sniff
from dissector.topics import TopicRegistry
from dissector.v07 import wire as v07
from dissector.v07.connection import V07Connection
from dissector.v07.events import PROTOCOL as V07

AUTO = "auto"
PROTOCOLS = (AUTO, V07, KAFKA_PROTOCOL)
_HOLD_LIMIT = 1 << 20       # bytes held undecided before falling back to 0.8+
_SEARCH_LIMIT = 256 << 10   # client bytes searched for a provable frame when joined mid-stream


@dataclass(frozen=True)
class ProtocolChoice:
    """``default`` for every connection, ``ports`` (broker port -> protocol) overriding it."""

    default: str = AUTO
    ports: tuple[tuple[int, str], ...] = ()

    def for_port(self, port: int | None) -> str:
        for p, proto in self.ports:
            if p == port:
                return proto
        return self.default

    @property
    def forced(self) -> bool:
        return self.default != AUTO or bool(self.ports)


def open_connection(protocol: str, options: Options | None = None, *, topics: TopicRegistry | None = None,
                    mid_stream: bool = False) -> Any:
    """A dissector connection for ``protocol`` (``auto``, ``0.7`` or ``0.8+``)."""
    if protocol == V07:
        return V07Connection(options, topics=topics, mid_stream=mid_stream)
    if protocol == KAFKA_PROTOCOL:
        return Connection(options, topics=topics, mid_stream=mid_stream)
    return AutoConnection(options, topics=topics, mid_stream=mid_stream)


def connection_factory(options: Options | None, topics: TopicRegistry,
                       choice: ProtocolChoice | None = None) -> Callable[..., Any]:
    """``factory(mid_stream, broker_port=None)`` -> a connection of the chosen (or detected) protocol."""
    choice = choice or ProtocolChoice()
    options = options if options is not None else Options()

    def factory(mid_stream: bool, broker_port: int | None = None) -> Any:
        return open_connection(choice.for_port(broker_port), options, topics=topics, mid_stream=mid_stream)
    return factory


# -- detection -------------------------------------------------------------------------------------

def first_request_protocol(frame: bytes) -> str:
    """The protocol of a connection whose first request frame (without its size) is ``frame``."""
    if framing.request_frame_decodes(frame):
        return KAFKA_PROTOCOL
    if v07.request_is_plausible(frame):
        return V07
    return KAFKA_PROTOCOL


def sniff_request(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> Sniff:
    """:func:`dissector.framing.sniff_request`, also accepting a connection that opens with a 0.7 request."""
    s = framing.sniff_request(data, max_frame)
    if s is Sniff.KAFKA:
        return s
    v = v07.sniff(data, max_frame)
    if v:
        return Sniff.KAFKA
    return Sniff.NEED_MORE if v is None else s


def find_request_frame(data: bytes, start: int = 0, max_frame: int = DEFAULT_MAX_FRAME,
                       require_complete: bool = False) -> int | None:
    """:func:`dissector.framing.find_request_frame`; a 0.7 frame only where no 0.8+ one is found."""
    at = framing.find_request_frame(data, start, max_frame, require_complete)
    if at is not None:
        return at
    return v07.find_request(data, start, max_frame, require_complete)[0]


_REPORTED_GAP = "reported gap"     # a gap already reported while the protocol was undecided


class AutoConnection:
    """A connection that has not yet shown its protocol generation (see the module doc)."""

    def __init__(self, options: Options | None = None, *, topics: TopicRegistry | None = None,
                 mid_stream: bool = False) -> None:
        self.options = options or Options()
        self.topics = topics
        self.mid_stream = mid_stream
        self._scan = mid_stream            # decide by searching for a provable frame, not by the first one
        self.protocol: str | None = None
        self.inner: Any = None
        self._calls: list[tuple[str, tuple]] = []
        self._held = 0
        self._client = bytearray()         # client bytes from the start (or from joining)
        self._client_gap = False           # the client bytes stop being contiguous here
        self._searched = 0

    # -- the connection interface, until decided -------------------------------------------------

    def feed(self, direction: Direction, data: bytes, ts: int) -> list[Event]:
        if not data:
            return []
        self._calls.append(("feed", (direction, data, ts)))
        self._held += len(data)
        if direction == Direction.TO_BROKER and not self._client_gap:
            self._client += data
        decided = self._decide(final=False)
        if decided is None and self._held > _HOLD_LIMIT:
            decided = self._decide(final=True) or KAFKA_PROTOCOL   # a huge first request: by its header
        return self._commit(decided) if decided is not None else []

    def gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        if direction == Direction.TO_BROKER:
            if not self._client and not self._scan:
                self._scan = True          # the first request was lost: search the bytes after the gap
                return self._deferred_gap(direction, ts, nbytes)
            if self._scan:
                self._client_gap = True
                return self._deferred_gap(direction, ts, nbytes)
            self._calls.append(("gap", (direction, ts, nbytes)))
            return self._commit(self._decide(final=True) or KAFKA_PROTOCOL)
        return self._deferred_gap(direction, ts, nbytes)

    def _deferred_gap(self, direction: Direction, ts: int, nbytes: int | None) -> list[Event]:
        # The caller expects a gap to be reported when it happens; the chosen connection's own
        # report of it, when the call is replayed, is then dropped (see _commit).
        offset = sum(len(a[1]) for n, a in self._calls if n == "feed" and a[0] == direction)
        self._calls.append((_REPORTED_GAP, (direction, ts, nbytes)))
        lost = "an unknown number of" if nbytes is None else str(nbytes)
        return [Anomaly("gap", direction, ts, f"{lost} bytes missing from the capture", offset, {"bytes": nbytes})]

    def close(self, ts: int) -> list[Event]:
        out = self._commit(self._decide(final=True) or KAFKA_PROTOCOL)
        return out + self.inner.close(ts)

    @property
    def in_flight(self) -> int:
        return self.inner.in_flight if self.inner is not None else 0

    # -- deciding ---------------------------------------------------------------------------------

    def _decide(self, final: bool) -> str | None:
        data = bytes(self._client)
        if self._scan:
            return self._decide_midstream(data, final)
        if len(data) < 4:
            return KAFKA_PROTOCOL if final else None
        size = int.from_bytes(data[:4], "big", signed=True)
        if size < 2 or size > self.options.max_frame_size:
            return KAFKA_PROTOCOL
        if len(data) >= 4 + size:
            return first_request_protocol(data[4:4 + size])
        if not final:
            return None
        # The first request was cut (a gap, the end): decide on its header.
        max_frame = self.options.max_frame_size
        if framing.plausible_request_header(data, 0, max_frame) is not None:
            return KAFKA_PROTOCOL
        if v07.plausible_request_header(data, 0, max_frame) is not None:
            return V07
        return KAFKA_PROTOCOL

    def _decide_midstream(self, data: bytes, final: bool) -> str | None:
        if len(data) > self._searched:
            self._searched = len(data)
            window = data[:_SEARCH_LIMIT]
            max_frame = self.options.max_frame_size
            at8 = framing.find_request_frame(window, 0, max_frame, require_complete=True)
            at7 = v07.find_request(window, 0, max_frame, require_complete=True)[0]
            if at7 is not None and (at8 is None or at7 < at8):
                return V07
            if at8 is not None:
                return KAFKA_PROTOCOL
            if len(data) >= _SEARCH_LIMIT:
                return KAFKA_PROTOCOL
        return KAFKA_PROTOCOL if final else None

    def _commit(self, protocol: str) -> list[Event]:
        if self.inner is not None:
            return []
        self.protocol = protocol
        inner = open_connection(protocol, self.options, topics=self.topics, mid_stream=self.mid_stream)
        self.inner = inner
        out: list[Event] = []
        for name, args in self._calls:
            if name != _REPORTED_GAP:
                out += getattr(inner, name)(*args)
                continue
            evs = inner.gap(*args)
            gaps = [i for i, ev in enumerate(evs) if isinstance(ev, Anomaly) and ev.kind == "gap"]
            if gaps:
                del evs[gaps[0]]
            out += evs
        self._calls = []
        self._client = bytearray()
        # From now on calls go straight to the chosen connection.
        self.feed = inner.feed          # type: ignore[method-assign]
        self.gap = inner.gap            # type: ignore[method-assign]
        self.close = inner.close        # type: ignore[method-assign]
        return out
