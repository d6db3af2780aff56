"""``kdissect live`` on the loopback interface, with a tiny Kafka-speaking pair of sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from dissector.encoder import request_frame, response_frame

from .conftest import REPO

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
    p = _start("live", "-i", "kd-no-such-if0", "-o", str(tmp_path / "out"), "--duration", "1")
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "kd-no-such-if0" in err or "CAP_NET_RAW" in err


@pytest.mark.slow
def test_live_capture_rotates_files(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    out = tmp_path / "out"
    p = _start("live", "-i", "lo", "--ports", str(port), "-o", str(out), "--rotate", "1", "--duration", "6")
    time.sleep(2.0)  # interpreter start-up and socket open
    if p.poll() is not None:
        _, err = p.communicate()
        if "CAP_NET_RAW" in err:
            pytest.skip("no privilege for live capture here")
        pytest.fail(err)
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
