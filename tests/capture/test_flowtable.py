"""capture.flowtable: which connections make room when the table is full, on flows made directly."""

from __future__ import annotations

import struct

from capture.flows import IGNORED
from capture.flowtable import FlowTable


def _key(port: int) -> bytes:
    return bytes([10, 0, 0, 1, 10, 0, 0, 2]) + struct.pack(">HH", port, 9092)


def test_eviction_takes_finished_connections_first_then_the_quietest() -> None:
    table = FlowTable()
    flows = {port: table.create(_key(port), port, 9092, ts=1000 - port, max_bytes=1 << 20, max_segments=64,
                                max_hole_age=10**9) for port in range(40000, 40006)}
    flows[40000].closed = True
    flows[40001].state = IGNORED
    # Quietest live ones: 40005 (ts 1000 - 40005) and then 40004.
    ending = table.evict(4, pipeline=None)
    assert ending == [flows[40005], flows[40004]]               # only live ones need an end
    assert set(table.flows.values()) == {flows[40002], flows[40003]}
    assert len(table) == 2 and len(table.index) == 4            # each live flow under both directions' keys
    assert table.evict(1, pipeline=None) == [flows[40003]]


def test_the_quietest_go_to_rest_and_the_records_of_ended_connections_expire() -> None:
    table = FlowTable()
    flows = [table.create(_key(p), p, 9092, ts=p, max_bytes=1 << 20, max_segments=64, max_hole_age=10**9)
             for p in (40000, 40001, 40002)]
    for flow in flows:
        flow.closed = True                   # an ended connection rests as a small record
    assert table.rest_quietest(1) == 2
    assert list(table.flows.values()) == [flows[2]] and len(table.dormant) == 2
    assert table.expire(now=10**12, linger=10**9, idle=10**9, crowded=False, pipeline=None) == []   # not Kafka
    assert not table.dormant
