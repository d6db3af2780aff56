"""Deciding which TCP connections carry Kafka, and which end is the broker.

By default every TCP connection is examined: it is Kafka when its first client
bytes parse as a plausible request (``sniff_request``; a Kafka 0.7 request counts too), or, joined mid-stream,
when a plausible request frame turns up in one direction within the first
``limit`` bytes (``find_request_frame``); that direction is client->broker.
A first request that does not decode is not a reason to forget a connection: its
header is enough where it is plausible (a sane size, a known api key and version),
and on a Kafka port (``WELL_KNOWN_PORTS``) a sane size and a known api key and
version will do; the dissector then reports the request as malformed and decodes
what follows. Joined mid-stream, two plausible request headers one right after
the other (the second where the first frame's size says) are evidence enough.
With explicit ports, traffic on them is taken as Kafka without asking.
TLS on a Kafka port is recognised and reported as such (seen, not decodable).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Ports brokers listen on by convention: Kafka's registered 9092, the usual TLS and SASL listeners
# beside it (9093, 9094), Amazon MSK's (9096 SASL/SCRAM, 9098 IAM, 9194/9196/9198 public), the
# 919x test clusters, and the external listeners of Docker and Redpanda set-ups (19092, 29092).
WELL_KNOWN_PORTS = frozenset({9092, 9093, 9094, 9096, 9098, 9192, 9193, 9194, 9196, 9198, 19092, 29092})


def parse_ports(spec: str) -> frozenset[int]:
    """``"9092,9093,30000-30010"`` -> the set of ports; ValueError with a one-line reason."""
    ports: set[int] = set()
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if sep else lo
        except ValueError:
            raise ValueError(f"bad port {part!r} in {spec!r} (expected N or N-M)") from None
        if not (1 <= lo <= hi <= 65535):
            raise ValueError(f"bad port range {part!r} in {spec!r} (ports are 1-65535, low-high)")
        ports.update(range(lo, hi + 1))
    if not ports:
        raise ValueError(f"no ports in {spec!r}")
    return frozenset(ports)


class Verdict(str, enum.Enum):
    KAFKA = "kafka"
    TLS = "tls"
    NOT_KAFKA = "not_kafka"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    client_half: int | None     # index of the half (0/1) that flows client -> broker
    reason: str


@dataclass(frozen=True)
class KafkaProbe:
    """The dissector's framing heuristics, injectable so capture can be tested on its own."""

    sniff_request: Callable[[bytes], Any]              # -> Sniff.KAFKA / NOT_KAFKA / NEED_MORE
    find_request_frame: Callable[[bytes, int], int | None]        # a plausible header anywhere
    kafka: Any                                         # the Sniff members to compare with
    not_kafka: Any
    find_whole_request: Callable[[bytes, int], int | None] | None = None   # a whole frame that decodes
    known_request: Callable[[int, int], bool] | None = None    # does the schema have this api key and version
    max_frame: int = 100 << 20

    @classmethod
    def from_dissector(cls) -> KafkaProbe:
        from dissector.framing import DEFAULT_MAX_FRAME, Sniff, known_request
        from dissector.protocols import find_request_frame, sniff_request   # 0.8+ requests, and 0.7 ones

        def whole(data: bytes, start: int) -> int | None:
            return find_request_frame(data, start, require_complete=True)
        return cls(sniff_request, find_request_frame, Sniff.KAFKA, Sniff.NOT_KAFKA, whole, known_request,
                   DEFAULT_MAX_FRAME)


def looks_like_tls(data: bytes, handshake_only: bool) -> bool:
    """A TLS record header: content type, version 3.x, and a length TLS allows."""
    if len(data) < 5 or data[1] != 3 or data[2] > 4:
        return False
    if handshake_only:
        ok = data[0] == 0x16
    else:
        ok = 0x14 <= data[0] <= 0x18
    return ok and ((data[3] << 8) | data[4]) <= 0x4800


# A PostgreSQL startup message reads as a Metadata v0 request header (protocol
# 3.0 = api key 3, version 0); its first parameter name gives it away.
_PG_STARTUP = re.compile(rb"....\x00\x03\x00\x00[a-z_][a-z_.]*\x00", re.DOTALL)
# An HTTP request line (a health check or a web UI on a port Kafka often has).
_HTTP = re.compile(rb"(?:GET|POST|PUT|HEAD|DELETE|OPTIONS|PATCH|CONNECT|TRACE|PRI) [\x21-\x7e]")


def _pg_startup(data: bytes) -> bool:
    """A whole PostgreSQL startup message: its length counts itself, and its parameters end in two NULs.
    Its first 8 bytes alone can be a Kafka Metadata v0 request's (api key 3, version 0) whose correlation
    id reads as a lowercase letter and a NUL."""
    if _PG_STARTUP.match(data) is None:
        return False
    length = int.from_bytes(data[:4], "big")
    return 10 <= length <= len(data) and data[length - 2:length] == b"\0\0"


def _obviously_other(data: bytes) -> bool:
    return _pg_startup(data) or _HTTP.match(data) is not None


def _incomplete_at_start(data: bytes) -> bool:
    return len(data) >= 4 and int.from_bytes(data[:4], "big") + 4 > len(data)


def _header_like(data: bytes, probe: KafkaProbe) -> bool:
    """A request frame's size (8 bytes to 100 MiB) and a known api key and version, whatever follows."""
    if len(data) < 8 or probe.known_request is None:
        return False
    size = int.from_bytes(data[:4], "big", signed=True)
    return 8 <= size <= probe.max_frame and probe.known_request(int.from_bytes(data[4:6], "big", signed=True),
                                                                 int.from_bytes(data[6:8], "big", signed=True))


def _chained_requests(data: bytes, probe: KafkaProbe) -> bool:
    """Two plausible request headers in ``data``, the second exactly where the first frame ends."""
    pos = 0
    while True:
        at = probe.find_request_frame(data, pos)
        if at is None:
            return False
        nxt = at + 4 + int.from_bytes(data[at:at + 4], "big")
        if nxt + 14 <= len(data) and probe.find_request_frame(data, nxt) == nxt:
            return True
        pos = at + 1


def _response_like(data: bytes) -> bool:
    # size (int32) then correlation id: a frame of at least a header, at most 128 MiB
    return len(data) >= 8 and 4 <= int.from_bytes(data[:4], "big") <= (1 << 27)


class Detector:
    """Stateless rules; the flow holds the buffered bytes and asks again as more arrive."""

    def __init__(self, probe: KafkaProbe | None, ports: frozenset[int] | None) -> None:
        self.probe = probe
        self.ports = ports
        self.kafka_ports = ports if ports else WELL_KNOWN_PORTS
        # True while TLS keys are at hand: a TLS handshake on any port may carry Kafka.
        self.tls_anywhere: Callable[[], bool] = lambda: False

    def broker_half_by_port(self, src_ports: tuple[int, int]) -> int | None:
        """The half whose *source* is a Kafka port (it carries responses), if exactly one is."""
        a, b = (p in self.kafka_ports for p in src_ports)
        if a != b:
            return 0 if a else 1
        return None

    def client_half_by_port(self, src_ports: tuple[int, int]) -> int:
        broker = self.broker_half_by_port(src_ports)
        if broker is not None:
            return 1 - broker
        # Servers usually listen on the lower port; clients get ephemeral ones.
        return 0 if src_ports[0] > src_ports[1] else 1

    def decide(self, bufs: tuple[bytes, bytes], full: tuple[bool, bool], client_half: int | None,
               src_ports: tuple[int, int], final: bool) -> Decision | None:
        """A decision, or None to wait for more bytes.

        ``full[h]``: half h buffered the detection limit (or hit a gap) and will get no more;
        ``client_half``: known from the SYN; ``final``: no more bytes will come at all.
        """
        on_kafka_port = any(p in self.kafka_ports for p in src_ports)
        if self.ports is not None:
            return self._explicit(bufs, full, client_half, src_ports, final)
        if client_half is not None:
            return self._from_start(bufs, full, client_half, on_kafka_port, final)
        return self._midstream(bufs, full, src_ports, on_kafka_port, final)

    def _explicit(self, bufs: tuple[bytes, bytes], full: tuple[bool, bool], client_half: int | None,
                  src_ports: tuple[int, int], final: bool) -> Decision | None:
        if client_half is None:
            client_half = self.client_half_by_port(src_ports)
        first = bufs[client_half] or bufs[1 - client_half]
        if len(first) < 5 and not (final or any(full)):
            return None
        if looks_like_tls(first, handshake_only=False):
            return Decision(Verdict.TLS, client_half, "TLS records on a Kafka port")
        return Decision(Verdict.KAFKA, client_half, "explicit Kafka port")

    def _from_start(self, bufs: tuple[bytes, bytes], full: tuple[bool, bool], client: int,
                    on_kafka_port: bool, final: bool) -> Decision | None:
        c, s = bufs[client], bufs[1 - client]
        if not c:
            if s:
                return Decision(Verdict.NOT_KAFKA, client, "the server spoke first")
            return Decision(Verdict.NOT_KAFKA, client, "no client bytes") if final else None
        if looks_like_tls(c, handshake_only=True):
            if on_kafka_port:
                return Decision(Verdict.TLS, client, "TLS handshake on a Kafka port")
            if self.tls_anywhere():
                return Decision(Verdict.TLS, client, "TLS handshake (keys given: Kafka inside is looked for)")
            return Decision(Verdict.NOT_KAFKA, client, "TLS")
        if _obviously_other(c):
            return Decision(Verdict.NOT_KAFKA, client, "PostgreSQL startup")
        assert self.probe is not None
        sniff = self.probe.sniff_request(c)
        if sniff == self.probe.kafka:
            return Decision(Verdict.KAFKA, client, "first client bytes are a Kafka request")
        if sniff == self.probe.not_kafka:
            # The whole first frame is there and does not decode (or its header is not a request's).
            # A plausible header still says Kafka: the request is malformed, not the connection foreign.
            if self.probe.find_request_frame(c, 0) == 0:
                return Decision(Verdict.KAFKA, client,
                                "a plausible Kafka request header (its body does not decode: malformed)")
            if on_kafka_port and _header_like(c, self.probe):
                return Decision(Verdict.KAFKA, client,
                                "a Kafka request size, api key and version on a Kafka port (the rest does not decode)")
            return Decision(Verdict.NOT_KAFKA, client, "first client bytes are not a Kafka request")
        if not (final or full[client]):
            return None
        # No more bytes to look at (a hole, snaplen, the end): a plausible header will do.
        if self.probe.find_request_frame(c, 0) == 0:
            return Decision(Verdict.KAFKA, client, "a plausible Kafka request header (the rest not captured)")
        if on_kafka_port:
            return Decision(Verdict.KAFKA, client, "too few client bytes captured; Kafka port")
        return Decision(Verdict.NOT_KAFKA, client, "first client bytes are not a Kafka request")

    def _midstream(self, bufs: tuple[bytes, bytes], full: tuple[bool, bool], src_ports: tuple[int, int],
                   on_kafka_port: bool, final: bool) -> Decision | None:
        if on_kafka_port:
            for h in (0, 1):
                if looks_like_tls(bufs[h], handshake_only=False):
                    broker = self.broker_half_by_port(src_ports)
                    client = 1 - broker if broker is not None else 1 - h
                    return Decision(Verdict.TLS, client, "TLS records on a Kafka port")
        assert self.probe is not None
        probe = self.probe
        halves = [h for h in (0, 1) if bufs[h] and not _obviously_other(bufs[h])]
        # A plausible header can occur by chance inside other bytes (a response body):
        # prefer a whole request frame that decodes, and the earliest one.
        find = probe.find_whole_request or probe.find_request_frame
        found = {h: at for h in halves if (at := find(bufs[h], 0)) is not None}
        broker = self.broker_half_by_port(src_ports)
        if broker is not None and found:
            # A Kafka port names the broker; request-like bytes coming *from* it are
            # more likely a coincidence inside a response than a reversed connection.
            if 1 - broker in found:
                return Decision(Verdict.KAFKA, 1 - broker, "a Kafka request frame towards the Kafka port")
        elif len(found) == 1:
            return Decision(Verdict.KAFKA, next(iter(found)), "a Kafka request frame in one direction")
        elif len(found) == 2:
            first = min(found, key=lambda h: (found[h], src_ports[h] < src_ports[1 - h]))
            return Decision(Verdict.KAFKA, first, "request frames both ways; the earliest taken")
        if probe.find_whole_request is not None:
            # A request too large to be whole yet: its header, right at the start, will do.
            started = [h for h in halves if h != broker and _incomplete_at_start(bufs[h])
                       and probe.find_request_frame(bufs[h], 0) == 0]
            if len(started) == 1:
                return Decision(Verdict.KAFKA, started[0], "a large Kafka request starts one direction")
        chained = [h for h in halves if h != broker and _chained_requests(bufs[h], probe)]
        if len(chained) == 1:
            # Frames that do not decode, but whose headers follow one another as request frames do.
            return Decision(Verdict.KAFKA, chained[0], "consecutive Kafka request headers in one direction")
        if on_kafka_port and (final or any(full)):
            # Only responses seen (a one-sided capture, or a long response): trust the Kafka
            # port, if the broker's bytes start like a response frame.
            client = self.client_half_by_port(src_ports)
            if _response_like(bufs[1 - client]):
                return Decision(Verdict.KAFKA, client, "no request seen; responses on a Kafka port")
        if not (final or all(full)):
            return None
        return Decision(Verdict.NOT_KAFKA, None, "no Kafka request frame")
