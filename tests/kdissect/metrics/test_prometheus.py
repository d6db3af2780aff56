"""The Prometheus side: the text format, ``decode --metrics-out``, the HTTP server, its errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kdissect.errors import KdissectError, UsageError
from kdissect.metrics import catalog as C
from kdissect.metrics.prometheus import Server, parse_listen, text

from ..conftest import REPO, SAMPLES, read_table
from tests.kdissect.metrics.helpers import live_fold, share_truth

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


def _parse(data: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(data) for s in f.samples}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


def test_parse_listen() -> None:
    assert parse_listen("9464") == ("0.0.0.0", 9464)
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in ("", "x", "host:99999", "host:-1"):
        with pytest.raises(UsageError):
            parse_listen(bad)


@pytest.mark.parametrize("sample", ["tansu-consume-group", "mock-share-groups"])
def test_metrics_out_is_the_live_folds_text(tmp_path: Path, sample: str) -> None:
    pcap = SAMPLES / f"{sample}.pcap"
    prom = tmp_path / "m.prom"
    p = _run("decode", str(pcap), "-o", str(tmp_path / "out"), "-q", "--metrics-out", str(prom))
    assert p.returncode == 0, p.stderr
    written = _parse(prom.read_text())
    fold, _ = live_fold([pcap], tmp_path / "live")
    live = _parse(text(fold).decode())
    drop = ("kdissect_packets_total", "kdissect_packets_created")
    assert {k: v for k, v in written.items() if k[0] not in drop} == \
        {k: v for k, v in live.items() if k[0] not in drop}
    rows = read_table(tmp_path / "out", "exchanges").num_rows
    assert sum(v for (name, _), v in written.items() if name == "kafka_requests_total") == rows > 0
    assert written[("kdissect_packets_total", ())] > 0
    if sample == "mock-share-groups":
        truth = share_truth(pcap)
        for m, want in ((C.SHARE_ACQUIRED, truth["acquired"]), (C.SHARE_REDELIVERED, truth["redelivered"]),
                        (C.SHARE_ACKNOWLEDGED, truth["acknowledged"])):
            got = {tuple(dict(k[1])[label] for label in m.labels): n for k, n in written.items() if k[0] == m.exposed}
            assert got == want, m.name
        assert written[("kafka_share_group_members", (("group", "kd-share"),))] == 0
        return
    lag = [k for k in written if k[0] == "kafka_consumer_lag_records"]
    assert lag and all(dict(k[1]).keys() == {"group", "topic", "partition"} for k in lag)
    assert ("kafka_request_duration_seconds_bucket", (("api", "Produce"), ("broker", next(
        dict(k[1])["broker"] for k in written if k[0] == "kafka_requests_total")), ("le", "0.0001"))) in written


def test_metrics_out_max_series_folds_into_other(tmp_path: Path) -> None:
    prom = tmp_path / "m.prom"
    p = _run("decode", str(SAMPLES / "mixed.pcap"), "-o", str(tmp_path / "out"), "-q", "--metrics-out", str(prom),
             "--metrics-max-series", "2")
    assert p.returncode == 0, p.stderr
    series = _parse(prom.read_text())
    requests = {k: v for k, v in series.items() if k[0] == "kafka_requests_total"}
    assert len(requests) == 3
    assert (("api", "other"), ("api_version", "other"), ("broker", "other"), ("client_id", "other"),
            ("error", "other")) in {k[1] for k in requests}
    assert sum(requests.values()) == read_table(tmp_path / "out", "exchanges").num_rows
    assert any(k[0] == "kdissect_metric_series_folded_total" for k in series)


def test_metrics_out_to_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    p = _run("decode", str(SAMPLES / "mixed.pcap"), "-o", str(tmp_path / "out"), "-q",
             "--metrics-out", str(tmp_path / "nope" / "m.prom"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--metrics-out" in p.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_library_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """prometheus-client hidden from the interpreter: one line, saying what to install, before decoding."""
    code = ("import sys, importlib.abc\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.split('.')[0] in ('prometheus_client', 'opentelemetry'): raise ImportError(name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "from kdissect.commands.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    for args in (["decode", str(SAMPLES / "mixed.pcap"), "-o", str(tmp_path / "out"), "--metrics-out",
                  str(tmp_path / "m.prom")],
                 ["live", "-i", "lo", "-o", str(tmp_path / "live"), "--otlp", "http://127.0.0.1:9"],
                 ["live", "-i", "lo", "-o", str(tmp_path / "live"), "--metrics", "127.0.0.1:0"]):
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
        assert p.returncode == 1, p.stderr
        assert p.stderr.count("\n") == 1 and "pip install 'kafka-dissect[metrics]'" in p.stderr, p.stderr
        assert not (tmp_path / "out").exists() and not (tmp_path / "live").exists()


def test_server_serves_the_fold_and_a_busy_port_is_one_line(tmp_path: Path) -> None:
    fold, _ = live_fold([SAMPLES / "mixed.pcap"], tmp_path / "out")
    server = Server(fold, "127.0.0.1", 0)
    try:
        body = urllib.request.urlopen(server.url, timeout=10).read().decode()
        assert _parse(body) == _parse(text(fold).decode())
        with pytest.raises(KdissectError, match=f"--metrics 127.0.0.1:{server.port}: cannot listen"):
            Server(fold, "127.0.0.1", server.port)
    finally:
        server.close()


def test_live_with_a_busy_metrics_port_stops_before_capturing(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        p = _run("live", "-i", "lo", "-o", str(tmp_path / "out"), "--metrics", f"127.0.0.1:{port}")
    finally:
        busy.close()
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert f"--metrics 127.0.0.1:{port}: cannot listen: Address already in use" in p.stderr
    assert "listening on" not in p.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", [("--metrics", "host:70000"), ("--metrics-max-series", "0"),
                                    ("--otlp", "collector:4318"), ("--otlp-interval", "0")])
def test_bad_metrics_options_are_one_line(tmp_path: Path, option: tuple[str, str]) -> None:
    p = _run("live", "-i", "lo", "-o", str(tmp_path / "out"), *option)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and option[0] in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_metrics_out_with_protocol_07(tmp_path: Path) -> None:
    prom = tmp_path / "m.prom"
    p = _run("decode", str(SAMPLES / "v07" / "clients.pcap"), "-o", str(tmp_path / "out"), "-q",
             "--protocol", "0.7", "--metrics-out", str(prom))
    assert p.returncode == 0, p.stderr
    series = _parse(prom.read_text())
    ex = read_table(tmp_path / "out", "exchanges").to_pandas()
    by_api: dict[str, float] = {}
    for (name, labels), v in series.items():
        if name == "kafka_requests_total":
            by_api[dict(labels)["api"]] = by_api.get(dict(labels)["api"], 0) + v
    assert by_api == ex.api_name.value_counts().to_dict()
    assert sum(v for (name, _), v in series.items() if name == "kafka_produced_records_total") > 0
    assert sum(v for (name, _), v in series.items() if name == "kafka_fetched_records_total") > 0
