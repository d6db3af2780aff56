"""``kdissect spark-server``: a Spark Connect server started from the pyspark install, kept running.

A local ``kdissect analyze`` or ``doctor`` starts a JVM, and a JVM's start and warm-up are most of a small
analysis. A Spark Connect server that stays up (started once; its JVM warm after the first analysis)
answers ``--remote`` in seconds: for repeated analyses, notebooks, or one server a team shares.

This wraps the ``sbin/start-connect-server.sh`` and ``stop-connect-server.sh`` that ship inside pyspark,
with kdissect's settings (UTC, FAIR pools, quiet logs) and its state (pid file, logs, the URL with the
server's token) in ``<cache dir>/spark-server/`` (see :func:`analysis.jvm.cache_dir`). The server binds
127.0.0.1 unless told otherwise, and only clients given its token (in the URL ``start`` prints, and
``kdissect spark-server url``) may use it: it reads any file its user can read.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analysis import jvm
from analysis.exceptions import AnalysisError, SparkUnavailable
from analysis.session import (CONNECT_PORT, FAIR_POOLS, LOG_CONFIG, LONG_RUNNING, SERVER_GC_INTERVAL, check_java,
                              java_command)

CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
IDENT = "kdissect"  # spark-daemon.sh names its pid and log files after it
START_TIMEOUT_S = 180


@dataclass(frozen=True)
class Server:
    pid: int | None
    url: str | None
    state: Path

    @property
    def running(self) -> bool:
        return self.pid is not None


def state_dir() -> Path:
    return jvm.cache_dir() / "spark-server"


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home
    return Path(_find_spark_home())


def _env(state: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(_spark_home()), "SPARK_LOG_DIR": str(state / "logs"),
                "SPARK_PID_DIR": str(state), "SPARK_IDENT_STRING": IDENT})
    env.pop("SPARK_REMOTE", None)
    return env


def _pid_file(state: Path) -> Path:
    return state / f"spark-{IDENT}-{CLASS}-1.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status(state: Path | None = None) -> Server:
    """The server this user's kdissect started, if it is still running."""
    state = state or state_dir()
    try:
        pid = int(_pid_file(state).read_text().strip())
    except (OSError, ValueError):
        pid = None
    if pid is not None and not _alive(pid):
        pid = None
    try:
        url = (state / "url").read_text().strip() if pid is not None else None
    except OSError:
        url = None
    return Server(pid, url, state)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _class_archive() -> list[str]:
    """The class-data archive a local analysis wrote (:class:`analysis.jvm.ClassArchive`), when there is one:
    the server starts in 3.5 s where it took 6, and its first analysis is 2 s quicker. It never writes one:
    a server's JVM exits only at ``stop``, with many more classes than an analysis loads."""
    if not jvm.cds_enabled():
        return []
    java = java_command() or "java"
    archive = jvm.ClassArchive(java, jvm.java_version(java))
    return archive.options(writing=False) if archive.ready() else []


def start(host: str = "127.0.0.1", port: int = CONNECT_PORT, memory: str | None = None,
          conf: dict[str, str] | None = None, state: Path | None = None, progress=None,
          announce: Callable[[], object] | None = None) -> Server:
    """Start the server (``local[*]`` in a JVM of its own) and wait until it answers; AnalysisError if it
    cannot (already running, port taken, no Java, the JVM died: with the last lines of its log).
    ``announce`` is called once the checks passed, as the JVM starts."""
    state = state or state_dir()
    running = status(state)
    if running.running:
        raise AnalysisError(f"a Spark Connect server is already running (pid {running.pid}): {running.url}; "
                            "stop it with: kdissect spark-server stop")
    check_java()
    connect_host = "localhost" if host in ("127.0.0.1", "localhost", "::1") else host
    if _answers(connect_host, port):
        raise AnalysisError(f"port {port} on {host} is already in use: choose another with --port")
    if announce:
        announce()
    state.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    java = [f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}", *_class_archive()]
    settings = {
        "spark.connect.grpc.binding.address": host, "spark.connect.grpc.binding.port": str(port),
        "spark.sql.session.timeZone": "UTC", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": FAIR_POOLS.as_uri(),
        # Analyses then keep their frames as local checkpoints, freed by the next collection.
        "spark.cleaner.periodicGC.interval": SERVER_GC_INTERVAL,
        **LONG_RUNNING, **(conf or {}),
    }
    argv = [str(_spark_home() / "sbin" / "start-connect-server.sh"), "--master", "local[*]",
            "--driver-java-options", " ".join(java)]
    argv += ["--driver-memory", memory or jvm.server_memory()]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    # The token reaches the server through its environment, not its command line (which ps shows anyone).
    env = _env(state)
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SparkUnavailable(f"start-connect-server.sh failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    url = f"sc://{connect_host}:{port}/;token={token}"
    url_file = state / "url"
    url_file.touch(mode=0o600)
    url_file.write_text(url + "\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        server = status(state)
        if server.pid is None and time.monotonic() > deadline - START_TIMEOUT_S + 5:
            raise SparkUnavailable(f"the Spark Connect server exited at start: {_log_tail(state)}")
        if server.pid is not None and _answers(connect_host, port):
            return server
        if progress:
            progress(time.monotonic() - (deadline - START_TIMEOUT_S))
        time.sleep(0.5)
    stop(state)
    raise SparkUnavailable(f"the Spark Connect server did not answer on {host}:{port} within {START_TIMEOUT_S} s: "
                           f"{_log_tail(state)}")


def _log_tail(state: Path) -> str:
    logs = sorted((state / "logs").glob("*.out"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return "no log"
    lines = [ln for ln in logs[-1].read_text(errors="replace").splitlines()
             if ln.strip() and not ln.startswith(("\t", "  at ", "WARNING:"))]
    return f"{'; '.join(lines[-2:])[-300:]} (log: {logs[-1]})"


def stop(state: Path | None = None) -> bool:
    """Stop the server; False when none was running."""
    state = state or state_dir()
    server = status(state)
    if not server.running:
        return False
    subprocess.run([str(_spark_home() / "sbin" / "stop-connect-server.sh")], env=_env(state),
                   capture_output=True, text=True, check=False)
    for _ in range(100):
        if not _alive(server.pid):
            break
        time.sleep(0.1)
    (state / "url").unlink(missing_ok=True)
    return True
