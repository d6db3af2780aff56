"""TCP's control segments and connections' ends (capture/control.py), on real captures."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from capture import Pipeline
from capture.flows import ConnectionEnd
from capture.packet import parser_for
from dissector.events import Exchange
from tests.capture import pcaptools as pt

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
SYN, RST = 0x02, 0x04


def read(name: str) -> tuple[int, list]:
    return pt.read_records(SAMPLES / f"{name}.pcap")


def flagged(lt: int, records: list, flag: int) -> list[int]:
    parse = parser_for(lt)
    return [i for i, r in enumerate(records) if type(s := parse(r[2], r[3])) is tuple and s[5] & flag]


def decode(records: list) -> tuple[Pipeline, list, dict]:
    p = Pipeline()
    events = list(p.run(records))
    xs = sorted((ce.conn.id, x.request.correlation_id, x.status.name) for ce in events
                if isinstance(x := ce.event, Exchange) and x.request is not None)
    ends = {ce.conn.id: ce.event.reason for ce in events if isinstance(ce.event, ConnectionEnd)}
    return p, xs, ends


def test_every_connection_of_a_whole_capture_ends_once_by_fin_or_rst() -> None:
    lt, recs = read("group-rebalance")
    p, _, ends = decode(recs)
    assert len(ends) == p.stats.connections["kafka"]
    assert set(ends.values()) <= {"fin", "rst"} and "rst" in ends.values()   # the sample has resets
    assert len(p.table.flows) == 0


def test_a_retransmitted_syn_is_the_same_connection() -> None:
    lt, recs = read("tansu-admin-errors")
    first = flagged(lt, recs, SYN)[0]
    again = recs[: first + 1] + [(recs[first][0] + 1000,) + recs[first][1:]] + recs[first + 1:]
    assert decode(again)[1:] == decode(recs)[1:]


def test_the_same_ports_used_again_are_a_new_connection() -> None:
    """A client reusing its port after a close: the second connection is #2 of its 4-tuple."""
    lt, recs = read("tansu-admin-errors")
    later = recs[-1][0] + 1_000_000_000 - recs[0][0]
    twice = recs + [(ts + later, *rest) for ts, *rest in recs]
    _, xs, ends = decode(twice)
    _, once, once_ends = decode(recs)
    assert len(xs) == 2 * len(once) and len(ends) == 2 * len(once_ends)
    assert Counter(cid.rsplit("#", 1)[1] for cid in ends) == {"1": len(once_ends), "2": len(once_ends)}


def test_packets_after_a_connection_closed_are_stragglers() -> None:
    lt, recs = read("tansu-consume-group")
    last_rst = flagged(lt, recs, RST)[-1]
    stragglers = recs + [(recs[-1][0] + 1000 * i,) + recs[last_rst][1:] for i in range(1, 4)]
    assert decode(stragglers)[1:] == decode(recs)[1:]


def test_a_capture_begun_mid_stream_still_decodes_what_follows() -> None:
    lt, recs = read("mock-produce-consume")
    cut = pt.cut_start(recs, 0.3)
    p, xs, ends = decode(cut)
    paired = {x for x in xs if x[2] == "OK"}
    assert paired and ends and not p.table.flows
    assert paired <= set(decode(recs)[1])
