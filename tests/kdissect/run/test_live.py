"""``kdissect live`` on the loopback interface, with a tiny Kafka-speaking pair of sockets."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from dissector.encoder import request_frame, response_frame

from tests.kdissect.conftest import REPO

API_VERSIONS_RESPONSE = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}],
                         "throttle_time_ms": 0}


def _start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "kdissect", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def _recv_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    size = int.from_bytes(head, "big")
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return head + body


def _talk(port_holder: list[int], server: socket.socket, exchanges: int, pause: float) -> None:
    """A client sending ApiVersions v3 requests to a 'broker' that answers each."""
    def broker() -> None:
        conn, _ = server.accept()
        with conn:
            for _ in range(exchanges):
                frame = _recv_frame(conn)
                corr = int.from_bytes(frame[8:12], "big")
                conn.sendall(response_frame(18, 3, corr, API_VERSIONS_RESPONSE))
    t = threading.Thread(target=broker, daemon=True)
    t.start()
    with socket.create_connection(("127.0.0.1", port_holder[0])) as client:
        for corr in range(1, exchanges + 1):
            client.sendall(request_frame(18, 3, corr, "kd-live-test",
                                         {"client_software_name": "kd", "client_software_version": "1"}))
            _recv_frame(client)
            time.sleep(pause)
    t.join(5)


def test_live_bad_interface(tmp_path: Path) -> None:
    p = _start("live", "-i", "kd-no-such-if0", "-o", str(tmp_path / "new" / "out"), "--duration", "1")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "kd-no-such-if0" in err or "CAP_NET_RAW" in err
    assert not (tmp_path / "new").exists()      # nothing captured: no empty dataset left, parents included
    # An OUTDIR that was there keeps what it had, and gets nothing.
    kept = tmp_path / "kept"
    (kept / "exchanges").mkdir(parents=True)
    (kept / "exchanges" / "earlier.parquet").write_bytes(b"rows")
    p = _start("live", "-i", "kd-no-such-if0", "-o", str(kept))
    p.communicate(timeout=60)
    assert p.returncode == 1
    assert sorted(str(f.relative_to(kept)) for f in kept.rglob("*")) == ["exchanges", "exchanges/earlier.parquet"]


@pytest.mark.slow
def test_live_capture_rotates_files(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    out = tmp_path / "out"
    p = _start("live", "-i", "lo", "--ports", str(port), "-o", str(out), "--rotate", "1", "--duration", "6")
    assert p.stderr is not None
    first = p.stderr.readline()   # printed once the socket is open
    if not first.startswith("listening on lo "):
        _, err = p.communicate()
        if "CAP_NET_RAW" in first + err:
            pytest.skip("no privilege for live capture here")
        pytest.fail(first + err)
    _talk([port], server, exchanges=6, pause=0.4)
    server.close()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "Traceback" not in err and "live lo:" in err and "files" in err
    ex = ds.dataset(out / "exchanges").to_table().to_pandas()
    assert len(ex) == 6
    assert set(ex.client_id) == {"kd-live-test"} and (ex.status == "ok").all()
    assert sorted(ex.correlation_id) == [1, 2, 3, 4, 5, 6] and (ex.latency_ms > 0).all()
    assert ex.capture.nunique() == 1 and ex.capture.iloc[0].startswith("live-lo-")
    assert len(list((out / "exchanges").glob("*.parquet"))) >= 3   # one file set per rotation
    assert not list((out / "exchanges").glob(".*"))


# -- real clients against tansu: the live dataset is the one a tcpdump capture decodes to -------------

CLIENTS = REPO / "tests" / "live_clients.py"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _live(out: Path, iface: str, port: int, *extra: str, ns: str | None = None) -> subprocess.Popen[str]:
    """``kdissect live`` (in netns ``ns``), returned once it says it is listening."""
    from tests.brokers import in_netns
    argv = in_netns(ns, [sys.executable, "-m", "kdissect", "live", "-i", iface, "--ports", str(port),
                         "-o", str(out), *extra])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO)
    assert p.stderr is not None
    first = p.stderr.readline()
    if not first.startswith(f"listening on {iface} "):
        p.kill()
        pytest.fail(first + p.stderr.read())
    return p


def _finish(p: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    _, err = p.communicate(timeout=timeout)
    assert "Traceback" not in err, err
    return p.returncode, err


def _clients(bootstrap: str, topic: str, *args: str, ns: str | None = None) -> dict:
    import json

    from tests.brokers import in_netns
    out = subprocess.run(in_netns(ns, [sys.executable, str(CLIENTS), bootstrap, topic, *args]),
                         capture_output=True, text=True, timeout=180, env=_env(), check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["failed"] == 0, out.stderr[-3000:]
    report["log"] = out.stderr[-3000:]     # why a consumer came up short, for an assertion's message
    return report


def _spool_settled(spool: Path, quiet: float = 0.5, limit: float = 20) -> None:
    """Wait until the capture process has written what the kernel queued: on a loaded machine it can still
    be reading the socket when the clients end, and a stop then finds the backlog in the kernel, not the spool."""
    size, since, end = -1, time.monotonic(), time.monotonic() + limit
    while time.monotonic() < end:
        now = sum(f.stat().st_size for f in spool.glob("*/*.pcapng"))
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def _decode(pcaps: list[Path], out: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "kdissect", "decode", *map(str, pcaps), "-o", str(out), "-q"],
                       capture_output=True, text=True, timeout=300, env=_env(), cwd=REPO, check=False)
    assert p.returncode == 0, p.stderr


_EX_KEY = ["connection", "api_key", "api_version", "correlation_id", "status", "error_code",
           "request_bytes", "response_bytes", "decode_error"]
_PART_KEY = ["connection", "correlation_id", "direction", "topic", "partition", "record_count", "error_code",
             "base_offset"]


def _rows(out: Path, capture: str | None = None) -> tuple[list[tuple], list[tuple], list[str]]:
    def table(name: str):
        t = ds.dataset(out / name, format="parquet").to_table().to_pandas()
        return t if capture is None else t[t.capture == capture]
    ex, parts, an = table("exchanges"), table("partitions"), table("anomalies")
    rows = lambda df, cols: sorted(tuple(None if v != v else v for v in r)  # noqa: E731 (NaN -> None)
                                   for r in df[cols].itertuples(index=False))
    return rows(ex, _EX_KEY), rows(parts, _PART_KEY), sorted(an.kind)


def _check_against(report: dict, live_out: Path, tcpdump_out: Path, capture: str | None = None) -> None:
    """Live rows == tcpdump's decoded rows; Produce records == delivery reports; nothing lost or cut."""
    ex, parts, anomalies = _rows(live_out, capture)
    ex_t, parts_t, anomalies_t = _rows(tcpdump_out)
    assert len(ex) == len(ex_t) and ex == ex_t
    assert parts == parts_t
    assert anomalies == anomalies_t
    assert "gap" not in anomalies and "capture_drops" not in anomalies
    produced: dict[int, int] = {}
    fetched = 0
    for _, _, direction, _, partition, count, _, _ in parts:
        if count is None:
            continue
        if direction == "request":
            produced[partition] = produced.get(partition, 0) + count
        else:
            fetched += count
    assert produced == {int(k): v for k, v in report["delivered"].items()}
    # The consumer reads for a bounded time and may stop before it has everything (on a fast machine it
    # can start polling late); what it did receive must all be in the capture.
    assert fetched >= report["consumed"] > 0
    # A fetch in flight when the consumer closes is never answered: in both captures alike.
    assert {r[4] for r in ex} <= {"ok", "no_response"} and not any(r[8] for r in ex)


def _no_leftovers(out: Path) -> None:
    assert not [p for p in out.rglob("*") if ".tmp" in p.name], "a .tmp file was left behind"
    assert not (out / ".spool").exists()


def _capture_name(err: str) -> str:
    import re
    m = re.search(r"\((live-[^ )]+)-\*\.parquet\)", err)
    assert m, err
    return m.group(1)


@pytest.mark.slow
@needs_root
def test_lo_65536_mtu_equals_tcpdump_and_delivery_reports(tmp_path: Path) -> None:
    """The README's own example, -i lo on a default loopback: 65,549-byte frames, nothing cut."""
    pytest.importorskip("confluent_kafka")
    from capture import open_capture
    from tests.brokers import free_port, run_tansu, tcpdump
    mtu = int(Path("/sys/class/net/lo/mtu").read_text())
    if mtu < 65536:
        pytest.skip(f"lo has MTU {mtu} here")
    port = free_port()
    pcap = tmp_path / "tcpdump.pcap"
    with run_tansu(port) as bootstrap:
        live = _live(tmp_path / "live", "lo", port, "--keep-pcap")
        with tcpdump(pcap, iface="lo", bpf=["tcp", "port", str(port)]):
            report = _clients(bootstrap, "big", "--producers", "2", "--messages", "25", "--size", "150000",
                              "--linger", "20", "--consume")
        live.send_signal(signal.SIGINT)
        rc, err = _finish(live)
    assert rc == 0, err
    _decode([pcap], tmp_path / "tcpdump")
    _check_against(report, tmp_path / "live", tmp_path / "tcpdump")
    _no_leftovers(tmp_path / "live")
    kept = sorted((tmp_path / "live" / "pcap").glob("*.pcapng"))
    biggest = 0
    for k in kept:
        src = open_capture(k)
        biggest = max([biggest, *(len(rec[2]) for rec in src)])
        src.close()
    assert biggest > 65535, "the test never produced a frame longer than scapy's old snap length"
    assert "cut " not in err and "lost " not in err
    # The kept segments are one rotated capture: decoded together they give tcpdump's rows again.
    _decode([tmp_path / "live" / "pcap"], tmp_path / "kept")
    import pyarrow.dataset as ds
    assert set(ds.dataset(tmp_path / "kept" / "exchanges").to_table().column("capture").to_pylist()) == {kept[0].name}
    _check_against(report, tmp_path / "kept", tmp_path / "tcpdump")


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("iface", ["lo", "any"])
def test_1500_mtu_netns_equals_tcpdump(tmp_path: Path, iface: str) -> None:
    pytest.importorskip("confluent_kafka")
    from tests.brokers import netns, run_tansu, tcpdump
    port = 9092
    pcap = tmp_path / "tcpdump.pcap"
    with netns(f"kd-i13-{iface}-{os.getpid() % 10000}", mtu=1500) as ns, run_tansu(port, ns=ns) as bootstrap:
        live = _live(tmp_path / "live", iface, port, ns=ns)
        with tcpdump(pcap, ns=ns, iface=iface, bpf=["tcp", "port", str(port)]):
            report = _clients(bootstrap, "small", "--messages", "3000", "--size", "200", "--consume", ns=ns)
        live.send_signal(signal.SIGINT)
        rc, err = _finish(live)
    assert rc == 0, err
    _decode([pcap], tmp_path / "tcpdump")
    _check_against(report, tmp_path / "live", tmp_path / "tcpdump")
    _no_leftovers(tmp_path / "live")


def _summary_packets(err: str) -> int:
    import re
    m = re.search(r"^live \S+: ([\d,]+) packets", err, re.M)
    assert m, err
    return int(m.group(1).replace(",", ""))


@pytest.mark.slow
@needs_root
@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_every_stop_decodes_the_backlog(tmp_path: Path, stop: str) -> None:
    """A burst the decoder cannot keep up with, then the stop: every exchange still ends up in the dataset."""
    pytest.importorskip("confluent_kafka")
    from tests.brokers import netns, run_tansu, tcpdump
    port = 9092
    pcap = tmp_path / "tcpdump.pcap"
    extra = ["--records", "--rotate", "1"]
    with netns(f"kd-i13-{stop.lower()}-{os.getpid() % 10000}", mtu=1500) as ns, \
            run_tansu(port, ns=ns) as bootstrap:
        live = _live(tmp_path / "live", "lo", port, *extra, ns=ns)
        os.kill(live.pid, signal.SIGSTOP)     # decoding frozen, capture running: a sure backlog
        try:
            with tcpdump(pcap, ns=ns, iface="lo", bpf=["tcp", "port", str(port)]):
                report = _clients(bootstrap, "burst", "--messages", "15000", "--size", "50", "--linger", "1",
                                  ns=ns)
                _spool_settled(tmp_path / "live" / ".spool")
                live.send_signal(getattr(signal, stop))
        finally:
            os.kill(live.pid, signal.SIGCONT)
        rc, err = _finish(live)
    assert rc == 0, err
    _decode([pcap], tmp_path / "tcpdump")
    ex, parts, _ = _rows(tmp_path / "live")
    ex_t, parts_t, _ = _rows(tmp_path / "tcpdump")
    assert ex == ex_t and parts == parts_t
    produced = sum(r[5] for r in parts if r[2] == "request" and r[5] is not None)
    assert produced == sum(report["delivered"].values()) == 30000
    _no_leftovers(tmp_path / "live")
    # Decoding was frozen for the whole burst, yet each --rotate 1 file holds about one second of capture
    # time (an exchange is written when its response completes, which the causal-order wait can delay
    # by up to 1 s of capture time).
    import pyarrow.parquet as pq
    spans = []
    for f in (tmp_path / "live" / "exchanges").glob("*.parquet"):
        ts = pq.read_table(f, columns=["response_ts"]).column(0).drop_null().to_pylist()
        if ts:
            spans.append((max(ts) - min(ts)).total_seconds())
    assert spans and max(spans) <= 2.0, spans
    assert "backlog " in err, f"no decoding backlog when the capture stopped: the test proves less\n{err}"


@pytest.mark.slow
@needs_root
def test_duration_stops_mid_traffic_and_decodes_all_it_captured(tmp_path: Path) -> None:
    """Traffic still flowing at the deadline: what was captured (kept as pcapng) is all decoded."""
    pytest.importorskip("confluent_kafka")
    from tests.brokers import netns, run_tansu
    port = 9092
    with netns(f"kd-i13-dur-{os.getpid() % 10000}", mtu=1500) as ns, run_tansu(port, ns=ns) as bootstrap:
        live = _live(tmp_path / "live", "lo", port, "--duration", "3", "--keep-pcap", "--records", ns=ns)
        started = time.monotonic()
        os.kill(live.pid, signal.SIGSTOP)     # decoding frozen, capture running: a sure backlog
        try:
            _clients(bootstrap, "burst", "--messages", "20000", "--size", "50", "--linger", "0", ns=ns)
            # Thawed only after the deadline, so the stop is asked while decoding is behind (a fast
            # machine finishes the burst well inside the 3 s).
            time.sleep(max(0.0, started + 3.5 - time.monotonic()))
        finally:
            os.kill(live.pid, signal.SIGCONT)
        rc, err = _finish(live)
    assert rc == 0, err
    kept = sorted((tmp_path / "live" / "pcap").glob("*.pcapng"))
    _decode(kept, tmp_path / "kept")
    assert _rows(tmp_path / "live")[:2] == _rows(tmp_path / "kept")[:2]
    assert len(_rows(tmp_path / "live")[0]) > 100
    _no_leftovers(tmp_path / "live")
    assert "backlog " in err, f"no decoding backlog when the capture stopped: the test proves less\n{err}"


@pytest.mark.slow
@needs_root
def test_count_stops_after_n_packets_and_decodes_them_all(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from tests.brokers import netns, run_tansu
    port = 9092
    with netns(f"kd-i13-count-{os.getpid() % 10000}", mtu=1500) as ns, run_tansu(port, ns=ns) as bootstrap:
        live = _live(tmp_path / "live", "lo", port, "--count", "1000", "--keep-pcap", "--records", ns=ns)
        os.kill(live.pid, signal.SIGSTOP)     # decoding frozen: the count is reached with all of it spooled
        try:
            _clients(bootstrap, "burst", "--messages", "10000", "--size", "50", "--linger", "1", ns=ns)
        finally:
            os.kill(live.pid, signal.SIGCONT)
        rc, err = _finish(live)
    assert rc == 0, err
    assert _summary_packets(err) == 1000
    kept = sorted((tmp_path / "live" / "pcap").glob("*.pcapng"))
    assert kept
    _decode(kept, tmp_path / "kept")
    assert _rows(tmp_path / "live")[:2] == _rows(tmp_path / "kept")[:2]
    exchanges, partitions, _ = _rows(tmp_path / "live")
    # How many exchanges 1,000 packets hold is the producer's batching: 55-205 seen, fewer under load, when
    # each batch is larger. The records those requests carry are the burst's, 11,000-16,000 seen either way.
    produced = sum(r[5] or 0 for r in partitions if r[2] == "request")
    assert produced > 5000 and len(exchanges) > 20
    _no_leftovers(tmp_path / "live")


@pytest.mark.slow
@needs_root
def test_interface_deleted_mid_capture(tmp_path: Path) -> None:
    """The veth under the capture goes away: everything captured is written, then exit 1 with one line."""
    pytest.importorskip("confluent_kafka")
    from tests.brokers import run_tansu, tcpdump
    port = 9092
    a, b = f"kd-i13-va{os.getpid() % 10000}", f"kd-i13-vb{os.getpid() % 10000}"
    run = lambda *argv: subprocess.run(argv, check=True)  # noqa: E731
    for ns in (a, b):
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL, check=False)
        run("ip", "netns", "add", ns)
    pcap = tmp_path / "tcpdump.pcap"
    try:
        run("ip", "link", "add", "kdv0", "netns", a, "type", "veth", "peer", "kdv1", "netns", b)
        for ns, dev, addr in ((a, "kdv0", "10.213.0.1/24"), (b, "kdv1", "10.213.0.2/24")):
            run("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        with run_tansu(port, host="10.213.0.1", ns=a) as bootstrap:
            live = _live(tmp_path / "live", "kdv0", port, "--records", ns=a)
            os.kill(live.pid, signal.SIGSTOP)     # decoding frozen: the spool holds everything
            try:
                with tcpdump(pcap, ns=a, iface="kdv0", bpf=["tcp", "port", str(port)]):
                    report = _clients(bootstrap, "veth", "--messages", "5000", "--size", "50", ns=b)
                run("ip", "-n", a, "link", "del", "kdv0")
            finally:
                os.kill(live.pid, signal.SIGCONT)
            rc, err = _finish(live)
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], check=False)
    assert rc == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("kdissect: capture on kdv0 ended early: the interface went down or away"), err
    assert "files " in err      # the summary came first
    _decode([pcap], tmp_path / "tcpdump")
    ex, parts, _ = _rows(tmp_path / "live")
    assert ex == _rows(tmp_path / "tcpdump")[0] and parts == _rows(tmp_path / "tcpdump")[1]
    assert sum(r[5] for r in parts if r[2] == "request" and r[5]) == sum(report["delivered"].values())
    _no_leftovers(tmp_path / "live")


@pytest.mark.slow
@needs_root
def test_two_captures_into_one_outdir(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from tests.brokers import netns, run_tansu, tcpdump
    port = 9092
    out = tmp_path / "live"
    pcap = tmp_path / "tcpdump.pcap"
    with netns(f"kd-i13-two-{os.getpid() % 10000}", mtu=1500) as ns, run_tansu(port, ns=ns) as bootstrap:
        first = _live(out, "lo", port, "--rotate", "1", ns=ns)
        second = _live(out, "lo", port, "--rotate", "1", ns=ns)
        with tcpdump(pcap, ns=ns, iface="lo", bpf=["tcp", "port", str(port)]):
            _clients(bootstrap, "two", "--messages", "3000", "--size", "100", ns=ns)
        first.send_signal(signal.SIGINT)
        second.send_signal(signal.SIGINT)
        (rc1, err1), (rc2, err2) = _finish(first), _finish(second)
    assert rc1 == rc2 == 0, err1 + err2
    names = {_capture_name(err1), _capture_name(err2)}
    assert len(names) == 2
    _decode([pcap], tmp_path / "tcpdump")
    expected = _rows(tmp_path / "tcpdump")[:2]
    for name in names:
        assert _rows(out, name)[:2] == expected
    _no_leftovers(out)


@pytest.mark.slow
@needs_root
def test_spool_full_shows_on_the_status_and_in_the_dataset(tmp_path: Path) -> None:
    """Decoding frozen (SIGSTOP) while 48 MB arrive into a 16 MiB spool: drops on the status line,
    a capture_drops row, the summary says how many; the capture keeps going."""
    from tests.brokers import free_port
    sys.path.insert(0, str(REPO))
    from tests.capture.test_live import _flood
    port = free_port()
    out = tmp_path / "out"
    live = _live(out, "lo", port, "--spool-max", "16", "--rotate", "1")
    os.kill(live.pid, signal.SIGSTOP)
    try:
        _flood(port, 48 << 20)
        time.sleep(1)
    finally:
        os.kill(live.pid, signal.SIGCONT)
    time.sleep(1.5)
    live.send_signal(signal.SIGINT)
    rc, err = _finish(live)
    assert rc == 0, err
    import re
    status = [ln for ln in err.splitlines() if ln.startswith("live lo ") and "DROPPED" in ln]
    assert status, err
    lost = re.search(r"^lost +0 packets dropped by the kernel .*, ([\d,]+) dropped with the spool full", err, re.M)
    assert lost, err
    an = ds.dataset(out / "anomalies").to_table().to_pandas()
    drops = an[an.kind == "capture_drops"]
    counted = sum(int(re.search(r"lost (\d+) packets", d).group(1)) for d in drops.detail)
    assert counted == int(lost.group(1).replace(",", "")) > 0
    _no_leftovers(out)


@pytest.mark.slow
@needs_root
def test_second_signal_stops_decoding_and_keeps_the_rest_as_pcapng(tmp_path: Path) -> None:
    from tests.brokers import free_port
    sys.path.insert(0, str(REPO))
    from tests.capture.test_live import _flood
    port = free_port()
    out = tmp_path / "out"
    live = _live(out, "lo", port, "--rotate", "1")
    # Millions of tiny valid requests (Metadata v0, no topics): decoding them takes far longer than the
    # half second between the signals on any machine, unless garbage, which is skipped at once.
    chunk = b"".join(struct.pack(">ihhih1si", 15, 3, 0, n, 1, b"x", 0) for n in range(3400))
    os.kill(live.pid, signal.SIGSTOP)
    try:
        _flood(port, 64 << 20, chunk)
        time.sleep(1)
    finally:
        os.kill(live.pid, signal.SIGCONT)
    live.send_signal(signal.SIGINT)
    time.sleep(0.5)
    live.send_signal(signal.SIGINT)
    rc, err = _finish(live)
    assert rc == 130, err
    assert "not decoded " in err and "files " in err, err
    kept = list((out / "pcap").glob("*.pcapng"))
    assert kept
    _decode(kept, tmp_path / "rest")       # what was not decoded is a readable capture
    _no_leftovers(out)


@pytest.mark.parametrize("option", [("--rotate", "nan"), ("--rotate", "0.0001"), ("--duration", "nan"),
                                    ("--duration", "inf"), ("--count", "0"), ("--spool-max", "1")])
def test_live_options_are_validated(tmp_path: Path, option: tuple[str, str]) -> None:
    p = _start("live", "-i", "lo", "-o", str(tmp_path / "out"), *option)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and option[0] in err
    assert not (tmp_path / "out").exists()
