"""Skimming (dissector.skim): a request left undecoded before a worker's packet range is, from the range
on, exactly what a connection that decoded everything would have."""

from __future__ import annotations

import pytest

from dissector.connection import Connection, Options
from dissector.decoders import default_decoders
from dissector.encoder import encode_body, request_frame, response_frame
from dissector.events import Direction, Exchange
from dissector.framing import parse_request_header
from dissector.skim import Skim, produce_acks


class _Counter:
    packets = 0


def _produce(version: int, acks: int, txn: str | None) -> dict:
    body = {"acks": acks, "timeout_ms": 1000, "topic_data": []}
    if version >= 3:
        body["transactional_id"] = txn
    return body


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("acks,txn", [(-1, None), (1, "tx-1"), (0, None), (0, "a" * 300)])
def test_acks_read_from_the_frame_are_the_decoders(version: int, acks: int, txn: str | None) -> None:
    frame = request_frame(0, version, 7, "c", _produce(version, acks, txn))[4:]
    hdr = parse_request_header(frame)
    decoded = default_decoders().decode(0, "request", version, frame, hdr.body_offset)
    assert decoded.failure is None
    assert produce_acks(frame, hdr.body_offset, version) == decoded.body["acks"] == acks
    assert produce_acks(frame[:hdr.body_offset + 1], hdr.body_offset, version) is None     # cut short


@pytest.mark.parametrize("topic", ["", "t" * 5000])   # large responses are not copied out while skimming
def test_a_skimmed_connection_writes_from_its_start_what_a_full_one_writes(topic: str) -> None:
    """Packets 1-3 skimmed: request 0 answered there (nothing emitted), request 1 still waiting at packet 4
    and decoded when its response comes; an acks=0 Produce gets no response and is decoded at once."""
    def request(corr: int, acks: int = 1) -> tuple[Direction, bytes]:
        return Direction.TO_BROKER, request_frame(0, 9, corr, "c", _produce(9, acks, "tx" if corr % 2 else None))

    def response(corr: int) -> tuple[Direction, bytes]:
        body = {"responses": [{"name": topic, "partition_responses": []}] if topic else []}
        return Direction.TO_CLIENT, response_frame(0, 9, corr, encode_body(0, "response", 9, body))

    packets = [request(0), request(1), response(0), request(2), request(3, acks=0), request(4), response(1),
               response(2), response(4)]
    counter = _Counter()
    full = Connection(Options(message_events=False))
    skim = Connection(Options(message_events=False, skim=Skim(4, counter)))
    out: dict[int, list] = {0: [], 1: []}
    for packet, (direction, data) in enumerate(packets, 1):
        counter.packets = packet
        for k, conn in enumerate((full, skim)):
            out[k] += [(packet, e) for e in conn.feed(direction, data, packet * 1000) if isinstance(e, Exchange)]

    def seen(events: list) -> list:
        return [(p, e.request.correlation_id, e.request.body, e.request.failure, e.response and e.response.body,
                 e.status) for p, e in events if p >= 4]

    assert seen(out[1]) == seen(out[0])
    assert [corr for _p, corr, *_rest in seen(out[1])] == [3, 1, 2, 4]
    assert all(body is not None for _p, _c, body, *_rest in seen(out[1]))
    assert len(out[0]) == 5 and len(out[1]) == 4           # exchange 0, before packet 4: only the full one
