"""Real third-party captures (../shared/public-captures), through the real dissector."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from capture import ConnectionEnd, read_capture
from dissector.events import Anomaly, Exchange

PUBLIC = Path(__file__).resolve().parents[2].parent / "shared" / "public-captures"  # ../shared beside the checkout

pytestmark = pytest.mark.skipif(not PUBLIC.is_dir(), reason="public captures not available")

# file -> (exchanges as (api key, version, status), number of Kafka connections)
EXPECTED: dict[str, tuple[list[tuple[int, int, str]], int]] = {
    "40t__go-sniffer__kafka.pcap": ([(3, 0, "ok"), (0, 1, "ok")], 2),
    "arkime__arkime__kafka.pcap": ([(2, 0, "no_response")], 1),
    "deepflowio__deepflow__00-produce-v2.pcap": ([(0, 2, "ok")], 1),
    "deepflowio__deepflow__00-produce-v7-sw8.pcap": ([(0, 7, "ok")], 1),
    "deepflowio__deepflow__00-produce-v9.pcap": ([(0, 9, "ok")], 1),
    "deepflowio__deepflow__01-fetch-v12-ok.pcap": ([(1, 12, "ok")], 1),
    "deepflowio__deepflow__01-fetch-v12-perf.pcap": ([(1, 12, "ok")], 1),
    "deepflowio__deepflow__01-fetch-v12-unknown.pcap": ([(1, 12, "ok")], 1),
    "deepflowio__deepflow__11-join-group-v7.pcap": ([(11, 7, "ok")], 1),
    "deepflowio__deepflow__13-leave-group-v4.pcap": ([(13, 4, "ok")], 1),
    "deepflowio__deepflow__14-sync-group-v5.pcap": ([(14, 5, "ok")], 1),
    "deepflowio__deepflow__18-api-versions-v3.pcap": ([(18, 3, "ok")], 1),
    "deepflowio__deepflow__mixed-with-unsupported.pcap": ([(8, 8, "ok"), (12, 4, "ok"), (1, 13, "ok")], 2),
    "deepflowio__deepflow__produce-v9.pcap": ([(0, 9, "no_response")], 1),
    "ntop__nDPI__kafka-2023-12-original.pcapng": ([(18, 3, "ok"), (22, 4, "ok"), (3, 12, "ok"), (0, 9, "ok")], 1),
}


def collect(path: Path):  # type: ignore[no-untyped-def]
    run = read_capture(path)
    events = list(run)
    exchanges = [e.event for e in events if isinstance(e.event, Exchange)]
    anomalies = [e for e in events if isinstance(e.event, Anomaly)]
    return run.stats, events, exchanges, anomalies


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_public_capture(name: str) -> None:
    stats, events, exchanges, _ = collect(PUBLIC / name)
    want, nconn = EXPECTED[name]
    assert [(x.api_key, x.api_version, x.status.value) for x in exchanges] == want
    assert stats.connections == {"kafka": nconn}
    assert stats.dissector_errors == 0
    # Every event of a connection carries it; every connection ends exactly once.
    ends = Counter(e.conn.id for e in events if isinstance(e.event, ConnectionEnd))
    assert len(ends) == nconn and set(ends.values()) == {1}
    assert all(e.conn is not None for e in events if not (isinstance(e.event, Anomaly) and e.event.direction is None
                                                          and e.event.kind.startswith("cap")))


def test_broken_writer_caplen_is_reported_once() -> None:
    stats, _, exchanges, anomalies = collect(PUBLIC / "40t__go-sniffer__kafka.pcap")
    caplen = [a for a in anomalies if a.event.kind == "caplen_exceeds_wirelen"]
    assert len(caplen) == 1 and caplen[0].conn is None
    assert stats.caplen_exceeds_wirelen == 20 and stats.packets == 20
    assert exchanges[1].request.api_key == 0 and exchanges[1].request.client_id == "kafka-python-producer-1"


def test_vlan_capture_and_the_unseen_response() -> None:
    _, _, exchanges, anomalies = collect(PUBLIC / "arkime__arkime__kafka.pcap")
    assert exchanges[0].request.client_id in ("", None)
    # The client's FIN acknowledges 71 broker bytes the capture never saw.
    gaps = [a.event for a in anomalies if a.event.kind == "gap"]
    assert [(g.extra.get("bytes"), g.extra.get("reason")) for g in gaps] == [(71, "lost")]
    assert anomalies[0].conn.broker_port == 9092


def test_rdkafka_one_sided_flows() -> None:
    stats, events, exchanges, anomalies = collect(PUBLIC / "ntop__nDPI__kafka-2024-05-rdkafka.pcapng")
    assert stats.connections == {"kafka": 8}
    assert all(e.conn.broker_port == 9092 and e.conn.broker_ip == "172.30.0.237" for e in events if e.conn)
    statuses = Counter(x.status.value for x in exchanges)
    assert statuses["orphan_response"] == 3 and statuses["ok"] >= 7
    assert stats.duplicate_segments == 2             # two retransmissions, dropped
    gaps = [a.event for a in anomalies if a.event.kind == "gap"]
    assert [g.extra["bytes"] for g in gaps] == [44]  # a request the broker acknowledged but nobody captured
    assert not any(e.conn.handshake_seen for e in events if e.conn)


def test_gzipped_public_capture(tmp_path: Path) -> None:
    src = PUBLIC / "ntop__nDPI__kafka-2023-12-original.pcapng"
    gz = tmp_path / "k.pcapng.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    _, _, exchanges, _ = collect(gz)
    assert len(exchanges) == 4


def test_cut_public_capture_reads_what_is_there(tmp_path: Path) -> None:
    src = (PUBLIC / "ntop__nDPI__kafka-2023-12-original.pcapng").read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(src[: len(src) * 2 // 3])
    _, _, exchanges, anomalies = collect(cut)
    assert 1 <= len(exchanges) < 4
    assert [a.event.kind for a in anomalies if a.conn is None] == ["capture_truncated"]
