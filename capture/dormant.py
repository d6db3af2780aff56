"""Connections at rest, kept as a few hundred bytes instead of a few kilobytes of live objects.

A long capture of a busy cluster holds hundreds of thousands of connections that are open and
quiet: a client that asked for its ApiVersions and metadata, and now waits. Each live one costs
its :class:`~capture.flows.Flow`, two half-streams, the dissector's connection and their ints
and lists (~4 KB). Between two of its exchanges, though, such a connection is *at rest*: nothing
out of order, nothing waiting for causal order, no frame half read, no request awaiting its
response. Then all that its future decoding depends on is a handful of numbers (sequence
numbers, stream offsets, counters, the versions it used), which :func:`rest` packs into one
``bytes`` record and :func:`wake` turns back into the same objects when its next packet comes.
The rows are the same either way; only the bytes of the last segment each direction delivered,
kept to vet a retransmission of them (``tcp_conflict``), are not carried over.

Connections not Kafka and connections ended (kept a while to recognise stragglers) rest too,
as their verdict alone, and so do connections that have carried no data yet (a handshake, a
SYN flood), as their sequence numbers. TLS connections, Kafka 0.7 connections and those in the
middle of anything stay live.
"""

from __future__ import annotations

import marshal
import struct
from typing import Any

from capture.flows import IGNORED, KAFKA, UNDECIDED, Flow
from capture.packet import key_endpoints, reverse_key

# Kinds of record: its first byte after the time.
_KAFKA, _IGNORED, _CLOSED, _QUIET = 0, 1, 2, 3      # _QUIET: undecided, no byte of data yet (a handshake)
_HEAD = struct.Struct("<qB")          # last activity (capture ns), kind; then marshal's bytes


def last_ts(record: bytes) -> int:
    """Capture time of a resting connection's last packet (read without unpacking the rest)."""
    return _HEAD.unpack_from(record)[0]


def is_kafka(record: bytes) -> bool:
    """Whether the connection was Kafka (its end is an event), not ignored, ended or without data yet."""
    return record[8] == _KAFKA


def canonical(key: bytes) -> bytes:
    """The key of a connection whichever direction a packet of it goes."""
    rkey = reverse_key(key)
    return key if key <= rkey else rkey


class Words:
    """The few texts many records share (why detection took a connection for Kafka), each kept once."""

    __slots__ = ("index", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.index: dict[str, int] = {}

    def number(self, text: str) -> int:
        n = self.index.get(text)
        if n is None:
            n = self.index[text] = len(self.texts)
            self.texts.append(text)
        return n


def rest(flow: Flow, words: Words) -> bytes | None:
    """The record of a connection at rest, or None when it is in the middle of something."""
    if flow.closed:
        return _HEAD.pack(flow.last_ts, _CLOSED) + marshal.dumps((flow.key <= flow.rkey, flow.serial, flow.first_ts))
    if flow.state == IGNORED:
        return _HEAD.pack(flow.last_ts, _IGNORED) + marshal.dumps((flow.key <= flow.rkey, flow.serial,
                                                                    flow.first_ts))
    h0, h1 = flow.h0, flow.h1
    if (flow.gate is not None or flow.closing or h0.has_pending() or h1.has_pending() or h0.fin_off is not None
            or h1.fin_off is not None):
        return None
    if flow.state == UNDECIDED:
        # Only a handshake (a SYN flood, a client that connected and waits): no bytes to detect from yet.
        if flow.ops or flow.bufs[0] or flow.bufs[1] or flow.causal_cap is not None:
            return None
        return _HEAD.pack(flow.last_ts, _QUIET) + marshal.dumps((
            flow.key <= flow.rkey, flow.serial, flow.first_ts, flow.client_half, flow.syn_seen, h0.snapshot(),
            h1.snapshot(), tuple(flow.full), tuple(flow.lost_start)))
    if flow.state != KAFKA:
        return None
    conn = flow.conn
    inner = getattr(conn, "inner", conn)       # an AutoConnection, once decided, is its inner connection
    at_rest = getattr(inner, "at_rest", None)
    state = at_rest() if at_rest is not None else None
    if state is None:
        return None
    info = flow.info
    assert info is not None
    return _HEAD.pack(flow.last_ts, _KAFKA) + marshal.dumps((
        flow.key <= flow.rkey, flow.serial, flow.first_ts, flow.client_half, flow.syn_seen, flow.causal_cap is not None,
        words.number(info.detection), info.handshake_seen, None if info.first_ts == flow.first_ts else info.first_ts,
        None if info.last_ts == flow.last_ts else info.last_ts, h0.snapshot(), h1.snapshot(), state))


def wake(record: bytes, canon: bytes, pipeline: Any) -> Flow:
    """The connection a record was made of, live again (not yet in the flow table)."""
    last, kind = _HEAD.unpack_from(record)
    fields = marshal.loads(memoryview(record)[_HEAD.size:])
    key = canon if fields[0] else reverse_key(canon)
    a_ip, a_port, b_ip, b_port = key_endpoints(key)
    o = pipeline.options
    flow = Flow(key, a_port, b_port, fields[2], fields[1], o.max_pending_bytes, o.max_pending_segments,
                int(o.max_hole_age * 1_000_000_000), o.max_reorder_segments)
    flow.last_ts = last
    if kind == _CLOSED:
        flow.closed = flow.skip = True
        flow.state = IGNORED
        return flow
    if kind == _IGNORED:
        flow.state = IGNORED
        flow.skip = True
        return flow
    if kind == _QUIET:
        _, _, _, client_half, syn_seen, half0, half1, full, lost_start = fields
        if client_half is not None:
            flow.set_roles(client_half)
        flow.syn_seen = syn_seen
        flow.h0.restore(half0)
        flow.h1.restore(half1)
        flow.full, flow.lost_start = list(full), list(lost_start)
        return flow
    (_, _, _, client_half, syn_seen, capped, detection, handshake_seen, info_first, info_last, half0, half1,
     state) = fields
    flow.set_roles(client_half)
    flow.syn_seen = syn_seen
    flow.causal_cap = () if capped else None
    flow.state = KAFKA
    info = flow.make_info("kafka", pipeline.table.words.texts[detection])
    info.handshake_seen = handshake_seen
    info.first_ts = flow.first_ts if info_first is None else info_first
    info.last_ts = last if info_last is None else info_last
    flow.h0.restore(half0)
    flow.h1.restore(half1)
    flow.bufs = flow.full = flow.held = flow.lost_start = None     # detection is over
    flow.conn = pipeline.resume_connection(state)
    return flow
