"""Delivery (capture/delivery.py) on real captures: to the dissector or to detection, the verdict, and a
dissector's failure contained."""

from __future__ import annotations

from pathlib import Path

from capture import CaptureOptions, Pipeline
from capture.flows import IGNORED, ConnectionEnd
from dissector.connection import Connection
from dissector.events import Anomaly
from tests.capture import pcaptools as pt

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def records(name: str) -> list:
    return pt.read_records(SAMPLES / f"{name}.pcap")[1]


class _Raises(Connection):
    def feed(self, direction, data, ts):  # type: ignore[no-untyped-def]
        raise ValueError("boom")


def test_a_dissector_that_raises_is_reported_once_per_connection_and_the_capture_goes_on() -> None:
    recs = records("tansu-admin-errors")
    p = Pipeline(CaptureOptions(), connection_factory=lambda mid, *port: _Raises(mid_stream=mid))
    events = list(p.run(recs))
    errors = [ce for ce in events if isinstance(ce.event, Anomaly) and ce.event.kind == "dissector_error"]
    assert p.stats.dissector_errors == len(errors) == p.stats.connections["kafka"]
    assert all("ValueError: boom" in ce.event.detail for ce in errors)
    assert sum(isinstance(ce.event, ConnectionEnd) for ce in events) == p.stats.connections["kafka"]


def test_a_connection_that_ends_before_any_data_gets_no_verdict() -> None:
    recs = records("tansu-admin-errors")
    handshake = recs[:3]
    p = Pipeline()
    events = list(p.run(handshake, final=False))
    (flow,) = p.table.flows.values()
    events += p.finish(handshake[-1][0])
    assert events == [] and p.stats.connections == {} and flow.state == IGNORED


def test_bytes_the_snaplen_cut_are_gaps_the_capture_explains() -> None:
    p = Pipeline()
    events = list(p.run(pt.snap(records("mock-produce-consume"), 200)))
    gaps = [ce.event for ce in events if isinstance(ce.event, Anomaly) and ce.event.kind == "gap"]
    assert gaps and p.stats.truncated_segments > 0 and p.stats.gaps >= len(gaps)
    assert {g.extra.get("reason") for g in gaps} == {"truncated"}


def test_tls_without_keys_is_counted_as_tls_not_decoded() -> None:
    p = Pipeline()
    list(p.run(pt.read_records(SAMPLES / "tls" / "tls12-cbc.pcap")[1]))
    assert p.stats.connections.get("tls") and "kafka" not in p.stats.connections
