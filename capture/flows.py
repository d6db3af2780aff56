"""TCP connections as the capture sees them: two half-streams, roles, identity, lifetime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capture.packet import key_endpoints, reverse_key
from capture.reassembly import HalfStream
from dissector.events import Direction

# Flow states: small ints so the per-packet check is one comparison.
UNDECIDED, KAFKA, TLS, IGNORED = 0, 1, 2, 3
STATE_NAMES = {UNDECIDED: "undecided", KAFKA: "kafka", TLS: "tls", IGNORED: "not_kafka"}

TO_BROKER_FIRST = (Direction.TO_BROKER, Direction.TO_CLIENT)
TO_CLIENT_FIRST = (Direction.TO_CLIENT, Direction.TO_BROKER)


@dataclass
class ConnectionInfo:
    """A reported connection (Kafka or TLS-on-a-Kafka-port); shared by all its events."""

    id: str                 # "10.0.0.1:50312-10.0.0.2:9092#1": client first, #n counts port reuse
    client_ip: str
    client_port: int
    broker_ip: str
    broker_port: int
    first_ts: int
    last_ts: int            # as of the latest event; final at ConnectionEnd
    state: str              # "kafka" or "tls"
    handshake_seen: bool    # False: joined mid-stream (the capture began after the SYN)
    detection: str          # why capture believes it is Kafka/TLS
    tls: Any = None         # capture.tls.TlsInfo of a TLS connection (version, cipher, SNI), else None


@dataclass
class ConnectionEnd:
    """The last event of a reported connection."""

    ts: int
    reason: str             # fin, rst, end_of_capture, idle, evicted, reused
    bytes_to_broker: int    # delivered to the dissector (gaps excluded)
    bytes_to_client: int
    gaps: int
    gap_bytes: int
    duplicate_segments: int
    out_of_order_segments: int


def connection_id(client: tuple[str, int], broker: tuple[str, int], serial: int) -> str:
    def ep(ip: str, port: int) -> str:
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return f"{ep(*client)}-{ep(*broker)}#{serial}"


class Flow:
    """One TCP connection. Half 0 is the direction of the first packet seen."""

    __slots__ = (
        "bufs",
        "causal_cap",
        "client_half",
        "closed",
        "closing",
        "conn",
        "dirs",
        "entries",
        "first_ts",
        "full",
        "gate",
        "h0",
        "h1",
        "held",
        "info",
        "key",
        "last_ts",
        "lost_start",
        "ops",
        "rkey",
        "serial",
        "skip",
        "src_ports",
        "state",
        "syn_seen",
    )

    def __init__(self, key: bytes, sport: int, dport: int, ts: int, serial: int,
                 max_bytes: int, max_segments: int, max_hole_age: int, ack_wait: int = 64) -> None:
        self.key = key
        self.rkey = reverse_key(key)
        self.h0 = HalfStream(max_bytes, max_segments, max_hole_age, ack_wait)
        self.h1 = HalfStream(max_bytes, max_segments, max_hole_age, ack_wait)
        self.src_ports = (sport, dport)
        self.state = UNDECIDED
        self.conn: Any = None                  # the dissector Connection once Kafka
        self.info: ConnectionInfo | None = None
        self.dirs = TO_BROKER_FIRST            # Direction of half 0 and half 1, once roles are known
        self.client_half: int | None = None
        self.first_ts = ts
        self.last_ts = ts
        self.serial = serial
        self.closed = False                    # ended; kept a while so stragglers are recognised
        self.closing = False                   # both FINs seen, holes remain
        self.skip = False                      # closed, TLS or not Kafka: no reassembly needed
        self.syn_seen = False
        self.gate: Any = None                  # capture.causal.CausalGate while segments wait for causal order
        # The causal-order cap bit on this connection: (capture ts, half) until reported, then ().
        self.causal_cap: tuple[int, int] | tuple[()] | None = None
        # While undecided: operations to replay once Kafka, and the first bytes of each half.
        self.ops: list[tuple[int, tuple]] = []
        self.bufs = [bytearray(), bytearray()]
        self.full = [False, False]
        self.held = [0, 0]                     # bytes kept in ops per half
        self.lost_start = [False, False]       # a half whose first bytes the capture lost
        # Index entries: key -> (flow, half, its stream, the other stream)
        self.entries: tuple[tuple[Flow, int, HalfStream, HalfStream], ...] = (
            (self, 0, self.h0, self.h1), (self, 1, self.h1, self.h0))

    def half(self, h: int) -> HalfStream:
        return self.h1 if h else self.h0

    def set_roles(self, client_half: int) -> None:
        self.client_half = client_half
        self.dirs = TO_BROKER_FIRST if client_half == 0 else TO_CLIENT_FIRST

    def make_info(self, state: str, detection: str) -> ConnectionInfo:
        assert self.client_half is not None
        a_ip, a_port, b_ip, b_port = key_endpoints(self.key)
        client, broker = ((a_ip, a_port), (b_ip, b_port)) if self.client_half == 0 else \
            ((b_ip, b_port), (a_ip, a_port))
        self.info = ConnectionInfo(
            id=connection_id(client, broker, self.serial),
            client_ip=client[0], client_port=client[1], broker_ip=broker[0], broker_port=broker[1],
            first_ts=self.first_ts, last_ts=self.last_ts, state=state,
            handshake_seen=self.syn_seen, detection=detection)
        return self.info

    def end_event(self, ts: int, reason: str) -> ConnectionEnd:
        c = self.client_half or 0
        to_broker, to_client = self.half(c), self.half(1 - c)
        return ConnectionEnd(
            ts=ts, reason=reason,
            bytes_to_broker=to_broker.offset - to_broker.gap_bytes,
            bytes_to_client=to_client.offset - to_client.gap_bytes,
            gaps=to_broker.gaps + to_client.gaps,
            gap_bytes=to_broker.gap_bytes + to_client.gap_bytes,
            duplicate_segments=to_broker.dup_segments + to_client.dup_segments,
            out_of_order_segments=to_broker.ooo_segments + to_client.ooo_segments)
