"""``kdissect live --metrics --otlp`` on loopback, scraped by a real Prometheus (Debian's ``prometheus``, a
1 s scrape interval) while a librdkafka producer pair and a consumer group run against tansu; the OTLP
export goes to the test's receiver (no Collector ships in Debian or on PyPI, see ``otlp_receiver.py``); and
the share groups sample's fold behind the same HTTP server, scraped by the same Prometheus."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from ..conftest import REPO
from tests.kdissect.run.test_live import _clients, _finish, _live, _spool_settled, needs_root
from tests.kdissect.metrics.otlp_receiver import otlp_receiver

ALERTS = REPO / "dashboards" / "kdissect-alerts.yml"


@contextmanager
def prometheus(work: Path, target: str) -> Iterator[str]:
    """A Prometheus scraping ``target`` every second, with the README's alert rules loaded; its URL."""
    from tests.brokers import free_port, wait_for_port
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed: apt-get install prometheus")
    config = work / "prometheus.yml"
    config.write_text(json.dumps({           # JSON is YAML
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "kdissect", "static_configs": [{"targets": [target]}]}]}))
    port = free_port()
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=open(work / "prometheus.log", "w"))
    try:
        wait_for_port("127.0.0.1", port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def query(prom: str, expr: str) -> list[dict]:
    url = f"{prom}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    reply = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert reply["status"] == "success", reply
    return reply["data"]["result"]


def by(prom: str, expr: str, label: str) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in query(prom, expr)}


def settled(prom: str, expr: str, label: str, quiet: float = 4.0, limit: float = 90.0) -> dict[str, float]:
    """The query's answer once it has not changed for ``quiet`` seconds (decoding caught up, scraped)."""
    deadline = time.monotonic() + limit
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = by(prom, expr, label)
        if now != last:
            last, since = now, time.monotonic()
        elif now and time.monotonic() - since >= quiet:
            return now
        time.sleep(0.5)
    raise AssertionError(f"{expr} never settled: {last}")


@pytest.mark.slow
@needs_root
def test_prometheus_scrapes_what_the_clients_and_the_dataset_say(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from tests.brokers import free_port, run_tansu
    port, mport = free_port(), free_port()
    out = tmp_path / "live"
    with run_tansu(port) as bootstrap, otlp_receiver() as rec, \
            prometheus(tmp_path, f"127.0.0.1:{mport}") as prom:
        live = _live(out, "lo", port, "--metrics", f"127.0.0.1:{mport}", "--otlp", rec.url,
                     "--otlp-interval", "1", "--rotate", "2")
        assert live.stderr.readline().strip() == f"serving metrics at http://127.0.0.1:{mport}/metrics"
        report = _clients(bootstrap, "metrics", "--messages", "1500", "--consume")
        produced = settled(prom, 'sum by (topic) (kafka_produced_records_total)', "topic")
        consumed = settled(prom, 'sum by (topic) (kafka_fetched_records_total{client_id="kd-live-c"})', "topic")
        requests = settled(prom, "sum by (api) (kafka_requests_total)", "api")
        by_client = by(prom, 'sum by (client_id) (kafka_produced_records_total{topic="metrics"})', "client_id")
        # Over the whole run (the producers may finish before the first scrape: no rate to take).
        p99 = query(prom, 'histogram_quantile(0.99, sum by (le) (kafka_request_duration_seconds_bucket'
                          '{api="Produce"}))')
        produces = by(prom, 'sum(kafka_request_duration_seconds_count{api="Produce"})', "")
        lag = by(prom, 'kafka_consumer_lag_records{topic="metrics"}', "partition")
        members = by(prom, "kafka_group_members", "group")
        rebalances = by(prom, "kafka_group_rebalances_total", "group")
        health = by(prom, "kdissect_packets_total", "job")
        rules = json.loads(urllib.request.urlopen(f"{prom}/api/v1/rules", timeout=10).read())
        live.send_signal(signal.SIGINT)
        rc, err = _finish(live)
    assert rc == 0, err
    delivered = sum(report["delivered"].values())
    assert produced == {"metrics": delivered}
    assert set(by_client) == {"kd-live-p0", "kd-live-p1"}
    assert report["consumed"] == delivered, report["log"]
    assert consumed == {"metrics": report["consumed"]}
    ex = ds.dataset(out / "exchanges", format="parquet").to_table(columns=["api_name"]).to_pandas()
    assert requests == {k: float(v) for k, v in ex.api_name.value_counts().items()}
    assert 0 < float(p99[0]["value"][1]) < 30
    assert produces[""] == requests["Produce"]      # every Produce timed (acks=all: none left out)
    group = "kd-live-metrics"
    assert set(lag) == {"0", "1", "2"} and all(v >= 0 for v in lag.values())
    assert members == {group: 1.0} and rebalances[group] >= 1
    assert health["kdissect"] > 0
    loaded = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
    assert {"KafkaProduceLatencyP99High", "KafkaConsumerLagGrowing"} <= loaded
    # The last OTLP export (sent at the stop) carries the same figures.
    points = rec.points()
    sent = points["messaging.client.sent.messages"]
    assert sum(p.as_int for a, p in sent if a["messaging.destination.name"] == "metrics") == delivered
    got = points["messaging.client.consumed.messages"]
    assert sum(p.as_int for a, p in got if a["messaging.client.id"] == "kd-live-c") == delivered
    ops = {}
    for a, p in points["kafka.client.requests"]:
        ops[a["messaging.operation.name"]] = ops.get(a["messaging.operation.name"], 0) + p.as_int
    assert ops == {k: int(v) for k, v in requests.items()}
    durations = points["messaging.client.operation.duration"]
    assert sum(p.count for a, p in durations if a["messaging.operation.name"] == "Produce") > 0


@pytest.mark.slow
def test_prometheus_scrapes_the_share_groups_of_a_sample(tmp_path: Path) -> None:
    """The share sample's fold served as ``live --metrics`` serves it (no share consumer runs on loopback
    here: the sample's mock cluster picks its ports at random), scraped by a real Prometheus: per client
    and type, what the sample's ShareConsumers counted themselves."""
    from kdissect.metrics.prometheus import Server
    from tests.kdissect.metrics.helpers import SHARE_PCAP, live_fold, share_truth
    fold, _ = live_fold([SHARE_PCAP], tmp_path / "out")
    server = Server(fold, "127.0.0.1", 0)
    try:
        with prometheus(tmp_path, f"127.0.0.1:{server.port}") as prom:
            acquired = settled(prom, 'sum by (client_id) (kafka_share_acquired_records_total{group="kd-share"})',
                               "client_id", quiet=1.0)
            types = {(r["metric"]["client_id"], r["metric"]["type"]): float(r["value"][1]) for r in query(
                prom, 'sum by (client_id, type) (kafka_share_acknowledged_records_total{topic="share-jobs"})')}
            again = by(prom, 'sum by (client_id) (kafka_share_redelivered_records_total)', "client_id")
            members = by(prom, "kafka_share_group_members", "group")
    finally:
        server.close()
    truth = share_truth()
    assert types == {(k[2], k[3]): float(v) for k, v in truth["acknowledged"].items()}
    assert acquired == {k[2]: float(v) for k, v in truth["acquired"].items()}
    assert again == {k[2]: float(v) for k, v in truth["redelivered"].items()}
    assert members == {"kd-share": 0.0}


def _sent(rec, topic: str) -> int:
    return sum(p.as_int for a, p in rec.points().get("messaging.client.sent.messages", ())
               if a["messaging.destination.name"] == topic)


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("stop", ["SIGTERM", "duration", "count"])
def test_every_stop_path_counts_the_backlog_decoded_after_it(tmp_path: Path, stop: str) -> None:
    """Decoding frozen (SIGSTOP) through a burst, then the stop: the spool's backlog is decoded after it, and
    the last OTLP export, sent at the end, counts all of it; the metrics port is free again afterwards."""
    pytest.importorskip("confluent_kafka")
    from tests.brokers import free_port, run_tansu
    port, mport = free_port(), free_port()
    extra = {"SIGTERM": [], "duration": ["--duration", "8"], "count": ["--count", "100"]}[stop]
    with run_tansu(port) as bootstrap, otlp_receiver() as rec:
        live = _live(tmp_path / "live", "lo", port, "--metrics", f"127.0.0.1:{mport}", "--otlp", rec.url,
                     "--otlp-interval", "1", "--rotate", "1", *extra)
        started = time.monotonic()
        os.kill(live.pid, signal.SIGSTOP)
        try:
            # The SIGTERM stop must find a backlog: a burst the resumed decoder cannot drain before the main
            # thread, woken by the same SIGCONT, takes the GIL to measure it (many requests, not large ones).
            burst = ["--producers", "6", "--linger", "0"] if stop == "SIGTERM" else ["--linger", "1"]
            report = _clients(bootstrap, "stop", "--messages", "4000", "--size", "50", *burst)
            if stop == "SIGTERM":
                _spool_settled(tmp_path / "live" / ".spool")
                live.send_signal(signal.SIGTERM)
            elif stop == "duration":
                time.sleep(max(0.0, started + 8.5 - time.monotonic()))
        finally:
            os.kill(live.pid, signal.SIGCONT)
        rc, err = _finish(live)
    assert rc == 0, err
    requests = ds.dataset(tmp_path / "live" / "exchanges", format="parquet").count_rows()
    parts = ds.dataset(tmp_path / "live" / "partitions", format="parquet").to_table().to_pandas()
    answered = parts[(parts.api_key == 0) & (parts.direction == "response") & (parts.error_code == 0)]
    accepted = parts[(parts.api_key == 0) & (parts.direction == "request")].merge(
        answered[["connection", "correlation_id", "partition"]], on=["connection", "correlation_id", "partition"])
    assert _sent(rec, "stop") == accepted.record_count.sum(), (len(rec.requests), err)  # backlog included
    if stop == "SIGTERM":
        assert "backlog " in err, f"no backlog at the stop: the test proves less\n{err}"
        assert _sent(rec, "stop") == sum(report["delivered"].values())
    elif stop == "duration":
        assert _sent(rec, "stop") > 0
    assert sum(p.as_int for _, p in rec.points()["kafka.client.requests"]) == requests
    packets = [p.as_int for _, p in rec.points()["kdissect.capture.packets"]]
    assert packets[0] > 0 and (stop != "count" or packets == [100])
    with socket.socket() as s:
        s.bind(("127.0.0.1", mport))       # the server closed with the run


@pytest.mark.slow
@needs_root
def test_second_signal_exits_130_with_metrics_served(tmp_path: Path) -> None:
    """The hard stop (second Ctrl-C) with --metrics and --otlp: exit 130 as without them, nothing hangs."""
    from tests.brokers import free_port
    import struct

    from tests.capture.test_live import _flood
    port, mport = free_port(), free_port()
    with otlp_receiver() as rec:
        live = _live(tmp_path / "out", "lo", port, "--metrics", f"127.0.0.1:{mport}", "--otlp", rec.url)
        chunk = b"".join(struct.pack(">ihhih1si", 15, 3, 0, n, 1, b"x", 0) for n in range(3400))
        os.kill(live.pid, signal.SIGSTOP)
        try:
            _flood(port, 32 << 20, chunk)
            time.sleep(1)
        finally:
            os.kill(live.pid, signal.SIGCONT)
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
        assert "kafka_requests_total" in body or "kdissect_packets_total" in body
        live.send_signal(signal.SIGINT)
        time.sleep(0.5)
        live.send_signal(signal.SIGINT)
        rc, err = _finish(live, timeout=60)
    assert rc == 130, err
    assert rec.requests, "no OTLP export at the stop"
