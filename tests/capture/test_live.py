"""Live capture: privilege errors, and a real producer against a real broker on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from capture import CaptureError, CaptureOptions, ConnectionEnd
from capture.live import LiveOptions, default_bpf, live_capture
from dissector.events import Exchange

ROOT = Path(__file__).resolve().parents[2]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root")


def test_default_bpf() -> None:
    assert default_bpf(None) == "tcp"
    assert default_bpf(frozenset({9093, 9092})) == "tcp and (port 9092 or port 9093)"
    assert default_bpf(frozenset(range(30000, 30100))) == "tcp portrange 30000-30099"


def test_without_privilege_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def denied(*a: object, **kw: object) -> None:
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(socket, "socket", denied)
    for iface in ("any", "lo"):
        with pytest.raises(CaptureError, match="needs root or the CAP_NET_RAW capability"):
            live_capture(LiveOptions(interface=iface))


@needs_root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv not installed")
def test_without_cap_net_raw_for_real() -> None:
    code = ("from capture.live import live_capture, LiveOptions\n"
            "from capture import CaptureError\n"
            "try:\n    live_capture(LiveOptions(interface='lo'))\n"
            "except CaptureError as e:\n    print(e)\n")
    out = subprocess.run(["setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw", sys.executable, "-c", code],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.strip() == "live capture on lo needs root or the CAP_NET_RAW capability"


@needs_root
def test_unknown_interface_and_bad_filter() -> None:
    with pytest.raises(CaptureError, match="no such network interface"):
        live_capture(LiveOptions(interface="nosuchif0"))
    with pytest.raises(CaptureError, match="bad capture filter"):
        live_capture(LiveOptions(interface="lo", bpf="tcp portt 1"))


@needs_root
def test_stops_after_a_count_and_a_duration() -> None:
    import socket

    from tests.brokers import free_port
    port = free_port()
    run = live_capture(LiveOptions(interface="lo", count=3, duration=20), CaptureOptions(ports=frozenset({port})),
                       connection_factory=lambda mid: None)
    done: list = []
    th = threading.Thread(target=lambda: done.extend(run))
    th.start()
    for _ in range(10):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()   # refused: SYN + RST
        except OSError:
            pass
        time.sleep(0.05)
    th.join(20)
    assert not th.is_alive() and run.stats.packets == 3
    t0 = time.monotonic()
    run = live_capture(LiveOptions(interface="lo", duration=0.5), CaptureOptions(ports=frozenset({port})))
    assert list(run) == [] and time.monotonic() - t0 < 5
    assert run.stats.kernel_drops == 0


@pytest.mark.slow
@needs_root
def test_live_capture_of_a_real_producer() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.brokers import free_port, run_tansu
    port = free_port()
    with run_tansu(port) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("live-capture", 1, 1)], request_timeout=15).values():
            f.result(timeout=30)
        run = live_capture(LiveOptions(interface="lo", duration=120), CaptureOptions(ports=frozenset({port})))
        events: list = []
        th = threading.Thread(target=lambda: events.extend(run))
        th.start()
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "kd-live",
                                             "linger.ms": 100, "acks": "all"})
        delivered: list = []
        for batch in (4, 2):
            for i in range(batch):
                producer.produce("live-capture", value=f"record {i} of {batch}".encode(),
                                 on_delivery=lambda err, msg: delivered.append(err))
            assert producer.flush(30) == 0
        del producer
        time.sleep(0.5)
        run.stop()
        th.join(30)
    assert not th.is_alive()
    assert delivered == [None] * 6
    produces = [e.event for e in events if isinstance(e.event, Exchange) and e.event.api_key == 0]
    counts = []
    for x in produces:
        assert x.status.value == "ok" and x.request.client_id == "kd-live"
        for topic in x.request.body["topic_data"]:
            assert topic["name"] == "live-capture"
            counts += [p["records"].record_count for p in topic["partition_data"]]
    assert counts == [4, 2]
    assert all(e.conn.broker_port == port for e in events if e.conn)
    assert any(isinstance(e.event, ConnectionEnd) for e in events)
    assert run.stats.kernel_drops == 0
