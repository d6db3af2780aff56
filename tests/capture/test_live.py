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


# -- the spool, drops, the kernel filter ------------------------------------------------------------

def _flood(port: int, nbytes: int, chunk: bytes = bytes(range(256)) * 256) -> None:
    """Real TCP on loopback: a client sends ``nbytes`` (``chunk`` repeated) to a listener that discards them."""
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen(1)

    def sink() -> None:
        conn, _ = server.accept()
        with conn:
            while conn.recv(1 << 20):
                pass
    th = threading.Thread(target=sink, daemon=True)
    th.start()
    with socket.create_connection(("127.0.0.1", port)) as c:
        for _ in range(nbytes // len(chunk)):
            c.sendall(chunk)
    th.join(30)
    server.close()


def _anomalies(events: list, kind: str) -> list:
    from dissector.events import Anomaly
    return [e.event for e in events if isinstance(e.event, Anomaly) and e.event.kind == kind]


@needs_root
def test_kernel_drops_are_counted_and_reported_where_they_happened() -> None:
    """The capture process stalls (SIGSTOP) under a tiny socket buffer: the kernel drops, and says how many."""
    import signal

    from tests.brokers import free_port
    port = free_port()
    run = live_capture(LiveOptions(interface="lo", rcvbuf=256 << 10), CaptureOptions(ports=frozenset({port})),
                       connection_factory=lambda mid: None)
    dumper = run.source._proc.pid
    os.kill(dumper, signal.SIGSTOP)
    try:
        _flood(port, 32 << 20)
    finally:
        os.kill(dumper, signal.SIGCONT)
    time.sleep(1.2)                     # a counter read, then a packet to carry the count
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        pass
    run.stop()
    events = list(run)
    st = run.source.status
    assert st.kernel_drops > 0 and st.spool_drops == 0
    reported = _anomalies(events, "capture_drops")
    assert sum(a.extra["dropped"] for a in reported) == st.kernel_drops
    assert run.stats.kernel_drops == st.kernel_drops


@needs_root
def test_spool_cap_drops_are_counted_and_decoding_catches_up(tmp_path: Path) -> None:
    """Nobody decodes while 24 MiB arrive into a 4 MiB spool: the excess is dropped and reported, the rest decoded."""
    from tests.brokers import free_port
    port = free_port()
    run = live_capture(LiveOptions(interface="lo", spool_max=4 << 20, segment_bytes=1 << 20,
                                   spool_dir=tmp_path / "spool"),
                       CaptureOptions(ports=frozenset({port})), connection_factory=lambda mid: None)
    _flood(port, 24 << 20)
    time.sleep(1.0)
    st = run.source.status
    assert st.spool_drops > 0 and st.spool_bytes <= 4 << 20
    run.stop()
    events = list(run)
    assert st.kernel_drops == 0
    assert sum(a.extra["dropped"] for a in _anomalies(events, "capture_drops")) == st.spool_drops
    assert run.stats.packets == st.packets          # every spooled packet was decoded
    assert not (tmp_path / "spool").exists()


def test_filter_keeps_the_snap_length_and_rejects_loopback_outgoing_copies() -> None:
    from capture.bpf import compile_filter
    flt = compile_filter("tcp and port 9092", 1, 262144)
    assert flt.snaplen == 262144                      # scapy's compile_filter returned 65535 here
    guarded = flt.without_outgoing_on(1)
    assert guarded.insns[len(guarded.insns) - len(flt.insns):] == flt.insns and len(guarded.insns) == len(flt.insns) + 5
    with pytest.raises(CaptureError, match="bad capture filter"):
        compile_filter("tcp portt 1", 1, 1000)


def test_spool_segments_are_pcapng_every_reader_takes(tmp_path: Path) -> None:
    """The dumper's block writer, read back by our reader (every padding) and by tcpdump when installed."""
    import socket as pysocket

    from capture import open_capture
    from capture.dumper import Dumper, Spool, section_header
    a, b = pysocket.socketpair(pysocket.AF_UNIX, pysocket.SOCK_DGRAM)
    frames = [bytes([n % 251]) * n for n in (60, 61, 62, 63, 1514, 65549)]
    for f in frames:
        a.send(f)
    spool = Spool(str(tmp_path), section_header("test0", 1, 262144), 1 << 20, 1 << 30)
    d = Dumper(b, 1, False, 262144, spool, None, None, os.open(os.devnull, os.O_WRONLY))
    d.pending_drops = 3                                 # written into the first block's epb_dropcount
    assert d.read_batch(100)[0] == len(frames)
    spool.close()
    src = open_capture(tmp_path / "000001.pcapng")
    got = [rec[2] for rec in src]
    assert got == frames and src.problems[0].kind == "capture_drops" and src.problems[0].extra["dropped"] == 3
    if shutil.which("tcpdump"):
        out = subprocess.run(["tcpdump", "-r", str(tmp_path / "000001.pcapng"), "-n", "-q"], capture_output=True,
                             text=True, check=False)
        assert out.returncode == 0 and len(out.stdout.splitlines()) == len(frames), out.stderr


@needs_root
def test_loopback_frames_count_once() -> None:
    """lo hands a packet socket each frame twice (outgoing, incoming); the kernel filter keeps one."""
    import socket

    from tests.brokers import free_port
    port = free_port()
    run = live_capture(LiveOptions(interface="lo"), CaptureOptions(ports=frozenset({port})),
                       connection_factory=lambda mid: None)
    for _ in range(10):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()   # refused: SYN + RST
        except OSError:
            pass
    time.sleep(0.8)
    run.stop()
    list(run)
    assert run.stats.packets == run.source.status.packets == 20


@needs_root
def test_frames_longer_than_the_snap_length_are_reported(tmp_path: Path) -> None:
    from tests.brokers import free_port
    port = free_port()
    run = live_capture(LiveOptions(interface="lo", snaplen=200), CaptureOptions(ports=frozenset({port})),
                       connection_factory=lambda mid: None)
    _flood(port, 1 << 20)
    time.sleep(0.8)
    run.stop()
    events = list(run)
    cut = _anomalies(events, "snaplen_cut")
    assert len(cut) == 1 and cut[0].extra["frames"] == run.source.status.cut > 0
    assert "snap length (200 bytes)" in cut[0].detail
    assert run.stats.truncated_segments > 0          # the pipeline saw the cut bytes as missing
