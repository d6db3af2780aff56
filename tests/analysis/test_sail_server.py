"""``kdissect spark-server`` on its default engine, Sail: a background server started by the CLI on a free
port, found by ``status`` and ``url``, serving ``analyze --remote`` the same tables as the embedded engine,
refusing a second start and a port in use in one line, and gone after ``stop``. Each test's server state is
in a cache directory of its own; a server a failing test leaves is killed by its fixture.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis import connect_server
from tests.analysis.engines import differences

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "mixed.pcap"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_env(cache: Path) -> dict[str, str]:
    """The server's state in ``cache``, not the user's; no engine or server chosen from outside the test."""
    env = {k: v for k, v in os.environ.items() if k not in ("KDISSECT_ENGINE", "KDISSECT_SPARK_REMOTE")}
    return {**env, "KDISSECT_CACHE_DIR": str(cache),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def kdissect(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kdissect", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)


def state_of(env: dict[str, str]) -> Path:
    return Path(env["KDISSECT_CACHE_DIR"]) / "spark-server"


@contextlib.contextmanager
def sail_server(env: dict[str, str], port: int) -> Iterator[subprocess.CompletedProcess]:
    """``spark-server start`` on ``port``; on leaving, ``stop``, and a kill for a server that outlived it
    (the pid file is written before the start waits, so even a start that timed out is found)."""
    try:
        yield kdissect(env, "spark-server", "start", "--port", str(port), timeout=120)
    finally:
        try:
            kdissect(env, "spark-server", "stop", timeout=60)
        finally:
            left = connect_server.status(state_of(env)).pid
            if left is not None:
                os.kill(left, signal.SIGKILL)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    return make_env(tmp_path_factory.mktemp("sail-cache"))


@pytest.fixture(scope="module")
def server(env) -> Iterator[tuple[str, int, subprocess.CompletedProcess]]:
    port = free_port()
    with sail_server(env, port) as started:
        assert started.returncode == 0, started.stdout + started.stderr
        yield f"sc://127.0.0.1:{port}", port, started


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    import kdissect as kd
    out = tmp_path_factory.mktemp("sail-server") / "ds"
    kd.write_dataset([str(SAMPLE)], out)
    return out


@pytest.mark.slow
def test_start_prints_the_url_and_status_and_url_find_the_server(server, env):
    url, _, started = server
    assert f"--remote '{url}'" in started.stdout and "token" not in started.stdout
    assert started.stderr.startswith("starting a Sail Spark Connect server on 127.0.0.1:")
    status = kdissect(env, "spark-server", "status")
    assert status.returncode == 0 and status.stdout.startswith("running (pid ") and ", sail): " in status.stdout
    assert status.stdout.strip().endswith(url)
    printed = kdissect(env, "spark-server", "url")
    assert printed.returncode == 0 and printed.stdout.strip() == url
    pid = connect_server.status(state_of(env)).pid
    assert pid is not None and b"pysail" in Path(f"/proc/{pid}/cmdline").read_bytes()


@pytest.mark.slow
def test_every_table_on_the_sail_server_equals_the_embedded_engine(server, env, dataset, tmp_path):
    url = server[0]
    embedded, remote = tmp_path / "embedded.json", tmp_path / "remote.json"
    local = kdissect(env, "analyze", str(dataset), "--engine", "sail", "--json", str(embedded))
    assert local.returncode == 0, local.stderr[-3000:]
    proc = kdissect(env, "analyze", str(dataset), "--remote", url, "--json", str(remote))
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = json.loads(embedded.read_text()), json.loads(remote.read_text())
    assert len(a) >= 20 and a["latency_by_api"]       # not a comparison of nothing
    assert differences(a, b) == {}


@pytest.mark.slow
def test_a_second_start_says_one_is_already_running(server, env):
    again = kdissect(env, "spark-server", "start", "--port", str(free_port()))
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.count("\n") == 1 and "already running" in again.stderr and server[0] in again.stderr


@pytest.mark.slow
def test_a_port_in_use_is_one_line_and_starts_nothing(tmp_path):
    env = make_env(tmp_path / "cache")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with sail_server(env, port) as started:
            assert started.returncode == 1 and started.stdout == "", started.stdout + started.stderr
            assert started.stderr == (f"kdissect: port {port} on 127.0.0.1 is already in use: choose another "
                                      "with --port\n")
            assert kdissect(env, "spark-server", "status").stdout.strip() == "not running"


@pytest.mark.slow
def test_stop_ends_the_server_and_forgets_it(tmp_path):
    env = make_env(tmp_path / "cache")
    port = free_port()
    with sail_server(env, port) as started:
        assert started.returncode == 0, started.stdout + started.stderr
        pid = connect_server.status(state_of(env)).pid
        stopped = kdissect(env, "spark-server", "stop", timeout=60)
        assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists()      # SIGTERM ended it (its parent, the start, has gone)
        status = kdissect(env, "spark-server", "status")
        assert status.returncode == 1 and status.stdout.strip() == "not running"
        url = kdissect(env, "spark-server", "url")
        assert url.returncode == 1 and "no Spark Connect server is running" in url.stderr
        again = kdissect(env, "spark-server", "stop")
        assert again.stdout.strip() == "no Spark Connect server was running"
        with socket.socket() as s:            # the port is free again
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))


@pytest.mark.parametrize("option", [["--memory", "4g"], ["--conf", "spark.sql.shuffle.partitions=4"]])
def test_jvm_options_with_sail_are_a_usage_error(option, tmp_path):
    env = make_env(tmp_path / "cache")
    proc = kdissect(env, "spark-server", "start", "--port", str(free_port()), *option)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "kdissect: --memory and --conf set JVM Spark's server: give them with --engine spark\n"
    assert not state_of(env).exists()


def test_a_pid_file_naming_another_process_is_not_a_server(tmp_path):
    """A stale pid file whose number now belongs to another process: not running, and stop signals nothing."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        state = tmp_path / "spark-server"
        state.mkdir()
        (state / connect_server.ENGINE_FILE).write_text("sail\n")
        (state / connect_server.SAIL_PID_FILE).write_text(f"{other.pid}\n")
        (state / "url").write_text("sc://127.0.0.1:1\n")
        assert not connect_server.status(state).running
        assert connect_server.stop(state) is False
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_state_without_an_engine_is_a_jvm_servers(tmp_path):
    """A state directory from before Sail served (no engine file) is read as JVM Spark's."""
    assert connect_server.status(tmp_path).engine == "spark"
