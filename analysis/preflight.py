"""Which engine a command runs on, and whether it can start there, answered before anything starts.

Spark 4 runs on Java 17 or newer, and pyspark answers a missing Java, a master URL it cannot use or a
master nobody listens on with pages of Java stack traces (or, for a standalone master that does not
answer, a minute of retries first). Everything that can be checked before an engine starts is checked
here: which engine the options ask for (:func:`engine_for`), the master URL's form (:func:`check_master`),
that something listens where it points (:func:`check_reachable`), Java (:func:`check_java`), and that the
embedded engine is installed (:func:`analysis.sail.check`). :mod:`analysis.session` then starts it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from urllib.parse import urlsplit

from analysis.exceptions import SparkUnavailable, UsageError

MIN_JAVA = 17
INSTALL_JAVA = ("install a Java runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
                "macOS: brew install openjdk@17) or point JAVA_HOME at one")
REMOTE_ENV = "KDISSECT_SPARK_REMOTE"
CONNECT_PORT = 15002  # Spark Connect's default port

REACH_TIMEOUT_S = 3.0

_LOCAL = re.compile(r"local(?:\[(?P<threads>\*|\d+)(?:,(?P<failures>\d+))?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]")


class BadMaster(UsageError):
    """A master or remote URL that cannot work, found before Spark starts: bad use (exit 2)."""


def java_command() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_major(version_text: str) -> int | None:
    """17 from 'openjdk version "17.0.15" ...'; 8 from 'java version "1.8.0_392"'."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Raise :class:`SparkUnavailable` unless a Java >= 17 is runnable."""
    java = java_command()
    if java is None:
        raise SparkUnavailable(f"Spark needs Java {MIN_JAVA} or newer and none was found: {INSTALL_JAVA}")
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkUnavailable(f"{java} -version failed ({exc}): {INSTALL_JAVA}") from None
    major = java_major(proc.stderr + proc.stdout)
    if major is None or major < MIN_JAVA:
        found = f"Java {major}" if major else "an unrecognised Java"
        raise SparkUnavailable(f"Spark needs Java {MIN_JAVA} or newer, found {found} at {java}: {INSTALL_JAVA}")


def _host_ports(master: str, scheme: str, default_port: int | None) -> list[tuple[str, int]]:
    """(host, port) of each address in ``scheme://h1:p1,h2:p2`` (standalone HA lists several)."""
    out = []
    for part in master[len(scheme) + 3:].split("/")[0].split(";")[0].split(","):
        split = urlsplit("//" + part)
        try:
            port = split.port if split.port is not None else default_port
        except ValueError:
            port = None
        if not split.hostname or port is None:
            want = "HOST:PORT" if default_port is None else "HOST[:PORT]"
            raise BadMaster(f"invalid Spark master {master!r}: expected {scheme}://{want}")
        out.append((split.hostname, port))
    return out


def check_master(master: str) -> list[tuple[str, int]]:
    """The addresses a master URL points at (to check they answer); BadMaster if Spark cannot use it.

    Local masters (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[...]``) are
    checked for form; ``spark://`` and ``sc://`` give their addresses; others (``yarn``, ``k8s://``)
    are Spark's to judge.
    """
    m = master.strip()
    if m.startswith("local"):
        match = _LOCAL.fullmatch(m)
        if match:
            threads = match.group("threads")
            if threads not in (None, "*") and int(threads) < 1:
                raise BadMaster(f"invalid Spark master {master!r}: local[N] needs at least 1 thread "
                                "(local[*] uses every core)")
            return []
        if _LOCAL_CLUSTER.fullmatch(m):
            return []
        raise BadMaster(f"invalid Spark master {master!r}: expected local, local[N], local[*] or local[N,F]")
    if m.startswith("spark://"):
        return _host_ports(m, "spark", None)
    if m.startswith("sc://"):
        raise BadMaster(f"{master!r} is a Spark Connect URL: give it with --remote (or {REMOTE_ENV})")
    if m in ("yarn",) or re.match(r"[a-z][a-z0-9+.-]*://", m):
        return []
    raise BadMaster(f"invalid Spark master {master!r}: expected local[*], local[N], spark://HOST:PORT, yarn or "
                    "k8s://URL")


def check_remote(url: str) -> tuple[str, int]:
    """The address of a Spark Connect URL ``sc://HOST[:PORT][/;param=...]``; BadMaster if malformed."""
    if not url.startswith("sc://"):
        raise BadMaster(f"invalid Spark Connect URL {url!r}: expected sc://HOST:PORT, e.g. sc://localhost:"
                        f"{CONNECT_PORT}")
    return _host_ports(url, "sc", CONNECT_PORT)[0]


def check_reachable(what: str, addresses: list[tuple[str, int]], hint: str = "") -> None:
    """Raise SparkUnavailable unless one of ``addresses`` accepts a TCP connection (within a few seconds)."""
    problems = []
    for host, port in addresses:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror:
            problems.append(f"host {host} not found")
            continue
        for family, kind, proto, _, address in infos:
            try:
                with socket.socket(family, kind, proto) as s:
                    s.settimeout(REACH_TIMEOUT_S)
                    s.connect(address)
                    return
            except TimeoutError:
                problems.append(f"{host}:{port} did not answer within {REACH_TIMEOUT_S:g} s")
            except OSError as exc:
                problems.append(f"{host}:{port}: {exc.strerror or exc}")
    raise SparkUnavailable(f"{what} is unreachable ({'; '.join(dict.fromkeys(problems))}){hint}")


ENGINES = ("sail", "spark")
ENGINE_ENV = "KDISSECT_ENGINE"


def engine_for(engine: str | None = None, master: str | None = None, remote: str | None = None) -> str:
    """Which Spark a command runs on: ``"remote"`` (a Spark Connect server at ``remote``, whatever runs it),
    ``"spark"`` (JVM Spark: ``--engine spark``, a ``--master``, or under spark-submit) or ``"sail"`` (the
    embedded engine, :mod:`analysis.sail`: the default). ``engine`` is ``--engine``, else
    ``KDISSECT_ENGINE``; BadMaster for a choice that contradicts itself."""
    chosen = engine or os.environ.get(ENGINE_ENV) or None
    if chosen is not None and chosen not in ENGINES:
        raise BadMaster(f"{'--engine' if engine else ENGINE_ENV} {chosen!r}: expected one of {', '.join(ENGINES)}")
    if remote:
        if engine is not None:
            raise BadMaster("--engine and --remote both given: a Spark Connect server runs its own engine")
        return "remote"
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return "spark"
    if master:
        if engine == "sail":
            raise BadMaster(f"--master {master} runs JVM Spark, --engine sail the embedded engine: give one")
        return "spark"
    return chosen or "sail"


def remote_url(remote: str | None) -> str | None:
    """The Spark Connect URL to use: ``--remote``, else ``KDISSECT_SPARK_REMOTE``, else None (start Spark)."""
    return remote or os.environ.get(REMOTE_ENV) or None


def check_start(master: str | None = None, remote: str | None = None, engine: str | None = None) -> None:
    """Everything about starting Spark that can fail before it starts: the URL, whether it answers, Java.

    ``remote``: a Spark Connect server (no Java needed here). The embedded engine (:func:`engine_for`):
    that it is installed, with a pyspark it serves. Else ``master`` (default ``local[*]``); under
    spark-submit (PYSPARK_GATEWAY_PORT set) Spark is already running and nothing is checked.
    """
    if engine_for(engine, master, remote) == "sail":
        from analysis import sail
        sail.check()
        return
    if remote:
        if master:
            raise BadMaster("--master and --remote (or KDISSECT_SPARK_REMOTE) both given: a Spark Connect "
                            "server has its own master")
        check_reachable(f"Spark Connect server {remote}", [check_remote(remote)],
                        ": start one with 'kdissect spark-server start', or leave out --remote to run Spark here")
        return
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    master = master or os.environ.get("SPARK_MASTER", "local[*]")
    addresses = check_master(master)
    if addresses:
        check_reachable(f"Spark master {master}", addresses)
    check_java()
