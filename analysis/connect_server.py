"""``kdissect spark-server``: a Spark Connect server kept running, on either engine.

A local ``kdissect analyze`` or ``doctor`` starts its engine for one command. A server that stays up answers
``--remote`` without that start: for repeated analyses, notebooks, or one server a team shares.

Two engines serve it. Sail (the default, :mod:`analysis.sail`) runs as a process of its own
(``python -m pysail spark server``), needs no Java and starts in a fraction of a second; it has no
authentication, so anyone who can reach its port may use it. JVM Spark (``engine="spark"``) is started and
stopped as Spark's own ``start-connect-server.sh`` and ``stop-connect-server.sh`` do, through the
``sbin/spark-daemon.sh`` inside pyspark, with kdissect's settings (UTC, FAIR pools, quiet logs); only
clients given its token (in the URL) may use it.

Either way the server binds 127.0.0.1 unless told otherwise, reads any file its user can read, and its
state (pid file, logs, the URL, which engine runs) lives in ``<cache dir>/spark-server/`` (see
:func:`analysis.jvm.cache_dir`), so ``status``, ``url`` and ``stop`` find it whichever engine it is.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analysis import jvm, sail
from analysis.exceptions import AnalysisError, SparkUnavailable
from analysis.preflight import CONNECT_PORT, check_java, java_command
from analysis.session import CONNECT_MODE_ENV, FAIR_POOLS, LOG_CONFIG, LONG_RUNNING, SERVER_GC_INTERVAL

CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
IDENT = "kdissect"  # spark-daemon.sh names its pid and log files after it
START_TIMEOUT_S = 180
ENGINES = ("sail", "spark")
ENGINE_FILE = "engine"     # which engine the state directory's server runs: "sail" or "spark"
SAIL_PID_FILE = "sail.pid"
SAIL_LOG = "sail.out"
SAIL_START_TIMEOUT_S = 60  # it answers in well under a second; this is for a machine under load
STOP_TIMEOUT_S = 10        # after SIGTERM, before SIGKILL


@dataclass(frozen=True)
class Server:
    pid: int | None
    url: str | None
    state: Path
    engine: str = "spark"

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


def _daemon(mode: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``spark-daemon.sh MODE`` for the server class, as ``start-connect-server.sh`` (``submit``) and
    ``stop-connect-server.sh`` (``stop``) run it: pyspark 4.2's wheel ships the daemon script without those
    two. Its pid file and logs are named after :data:`IDENT`."""
    script = _spark_home() / "sbin" / "spark-daemon.sh"
    if not script.is_file():
        raise SparkUnavailable(f"this pyspark has no {script}: reinstall pyspark, or use --engine sail")
    return subprocess.run(["bash", str(script), mode, CLASS, "1", *args], env=env, capture_output=True,
                          text=True, check=False)


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


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _runs_sail(pid: int) -> bool:
    """Whether ``pid`` is still a Sail server: a pid file outlives its process, and the number may be reused
    by another (which ``stop`` must not signal)."""
    if not _alive(pid):
        return False
    if not Path("/proc/self").is_dir():
        return True   # no /proc (macOS): alive is all there is to go on
    try:
        return b"pysail" in Path(f"/proc/{pid}/cmdline").read_bytes()   # empty for a zombie
    except OSError:
        return False  # exited since


def _recorded_engine(state: Path) -> str:
    try:
        engine = (state / ENGINE_FILE).read_text().strip()
    except OSError:
        return "spark"    # state written before Sail could serve: only JVM servers then
    return engine if engine in ENGINES else "spark"


def status(state: Path | None = None) -> Server:
    """The server this user's kdissect started, if it is still running."""
    state = state or state_dir()
    engine = _recorded_engine(state)
    if engine == "sail":
        pid = _read_pid(state / SAIL_PID_FILE)
        alive = pid is not None and _runs_sail(pid)
    else:
        pid = _read_pid(_pid_file(state))
        alive = pid is not None and _alive(pid)
    pid = pid if alive else None
    try:
        url = (state / "url").read_text().strip() if pid is not None else None
    except OSError:
        url = None
    return Server(pid, url, state, engine)


def _refuse_if_running(state: Path) -> None:
    running = status(state)
    if running.running:
        raise AnalysisError(f"a Spark Connect server is already running (pid {running.pid}, {running.engine}): "
                            f"{running.url}; stop it with: kdissect spark-server stop")


def _record(state: Path, engine: str) -> None:
    """Which engine this state directory's server is, written before it starts: a server that is slow to
    answer (or never does) is still the one ``status`` and ``stop`` find."""
    state.mkdir(parents=True, exist_ok=True)
    (state / ENGINE_FILE).write_text(engine + "\n")


def _write_url(state: Path, url: str) -> None:
    url_file = state / "url"
    url_file.touch(mode=0o600)   # the JVM server's URL carries its token
    url_file.write_text(url + "\n")


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
    _refuse_if_running(state)
    check_java()
    connect_host = "localhost" if host in ("127.0.0.1", "localhost", "::1") else host
    if _answers(connect_host, port):
        raise AnalysisError(f"port {port} on {host} is already in use: choose another with --port")
    if announce:
        announce()
    _record(state, "spark")
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
    argv = ["--name", "Spark Connect server", "--master", "local[*]", "--driver-java-options", " ".join(java)]
    argv += ["--driver-memory", memory or jvm.server_memory()]
    for key, value in settings.items():
        argv += ["--conf", f"{key}={value}"]
    # The token reaches the server through its environment, not its command line (which ps shows anyone).
    env = _env(state)
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    proc = _daemon("submit", argv, env)
    if proc.returncode != 0:
        raise SparkUnavailable(f"spark-daemon.sh failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    _write_url(state, f"sc://{connect_host}:{port}/;token={token}")
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


def _reap(pid: int) -> None:
    """Collect ``pid`` if it is a child of this process that exited (a zombie still takes signals)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        _reap(pid)
        if not _alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def _end(pid: int) -> None:
    """SIGTERM, then SIGKILL if it has not exited within :data:`STOP_TIMEOUT_S`."""
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if _wait_gone(pid, wait):
            return


def _stop_jvm(state: Path, pid: int) -> None:
    _daemon("stop", [], _env(state))
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.1)


def _forget(state: Path) -> None:
    for name in ("url", SAIL_PID_FILE):
        (state / name).unlink(missing_ok=True)


def stop(state: Path | None = None) -> bool:
    """Stop the server, whichever engine runs it; False when none was running."""
    state = state or state_dir()
    server = status(state)
    if not server.running:
        return False
    if server.engine == "sail":
        _end(server.pid)
    else:
        _stop_jvm(state, server.pid)
    _forget(state)
    return True


# --- Sail -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Address:
    """Where a Sail server is asked to listen (``--host``, ``--port``), and its URL."""

    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host   # an IPv6 literal
        return f"sc://{host}:{self.port}"


# A server listening on every address is reached, to test its port, through loopback.
WILDCARD_PROBE = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def _bindable_ip(address: Address) -> str:
    """The IP address Sail is to listen on (it takes no host names: ``localhost`` is resolved here), once a
    bind of our own showed it can: AnalysisError (one line) for a port something holds already, bound or
    listening, or a host that is not this machine's. The probe reuses addresses as a server does, so a
    connection closed a moment ago (TIME_WAIT) does not count."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM,
                                                           flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise AnalysisError(f"cannot listen on {address.host}: {exc.strerror or exc}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(where)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise _in_use(address) from None
            raise AnalysisError(f"cannot listen on {address.host}:{address.port}: {exc.strerror or exc} "
                                "(--host takes an address of this machine, or 0.0.0.0 for all)") from None
    return where[0]


def _in_use(address: Address) -> AnalysisError:
    return AnalysisError(f"port {address.port} on {address.host} is already in use: choose another with --port")


def _sail_env() -> dict[str, str]:
    # A Spark Connect client's settings of this process are not for the server's own pyspark.
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", CONNECT_MODE_ENV)}
    env.setdefault(sail.LOG_ENV, "error")   # Sail's INFO lines would fill the log
    return env


def _spawn_sail(ip: str, port: int, log: Path) -> subprocess.Popen:
    """The server as a process of its own, in a session of its own: it outlives this command, and a Ctrl-C
    in the terminal that started it does not reach it. ``-P``: a ``pyspark`` or ``pysail`` directory where
    the user stands is not imported in place of the installed ones."""
    argv = [sys.executable, "-P", "-m", "pysail", "spark", "server", "--ip", ip, "--port", str(port)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:   # each start's own log: its last line is why a start failed
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=_sail_env(), start_new_session=True, close_fds=True)


def _sail_exit_error(address: Address, log: Path) -> AnalysisError:
    """Why the server exited at start, from the last line of its log (Python's traceback of Sail's error)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    last = re.sub(r"^\w+(Error|Exception): ", "", lines[-1]) if lines else "no output"
    if "address already in use" in last.lower():
        return _in_use(address)
    return SparkUnavailable(f"the Sail server exited at start: {last[-300:]} (log: {log})")


def _await_sail(proc: subprocess.Popen, address: Address, ip: str, log: Path) -> None:
    """Until the port answers while the server still runs (something else may answer for an address that
    is not this machine's: a proxy in a sandbox did)."""
    deadline = time.monotonic() + SAIL_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise _sail_exit_error(address, log)
        if _answers(WILDCARD_PROBE.get(ip, ip), address.port) and proc.poll() is None:
            return
        time.sleep(0.1)
    raise SparkUnavailable(f"the Sail server did not answer on {address.host}:{address.port} within "
                           f"{SAIL_START_TIMEOUT_S} s (log: {log})")


def start_sail(host: str = "127.0.0.1", port: int = CONNECT_PORT, state: Path | None = None,
               announce: Callable[[], object] | None = None) -> Server:
    """Start a Sail server in the background and wait until it answers; AnalysisError (one line) if it
    cannot (already running, port taken, Sail not installed, the server exited). ``announce`` is called
    once the checks passed, as the server starts."""
    state = state or state_dir()
    _refuse_if_running(state)
    sail.check()
    address = Address(host, port)
    ip = _bindable_ip(address)
    if announce:
        announce()
    _record(state, "sail")
    log = state / "logs" / SAIL_LOG
    proc = _spawn_sail(ip, port, log)
    (state / SAIL_PID_FILE).write_text(f"{proc.pid}\n")
    _write_url(state, address.url)
    try:
        _await_sail(proc, address, ip, log)
    except BaseException:          # a failed or interrupted start leaves no server behind
        _end(proc.pid)
        _forget(state)
        raise
    return Server(proc.pid, address.url, state, "sail")
