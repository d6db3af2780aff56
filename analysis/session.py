"""Starting the engine a command runs on, and the life of the session it gets: a SparkSession that suits
a laptop, a cluster or a Spark Connect server, what is set on it for an analysis, how a failure or a lost
engine reads in one line, and how it stops. What can be checked before starting is
:mod:`analysis.preflight`'s.

Locally the session runs in UTC with its UI and console progress off, the FAIR scheduler (the analysis
runs its independent tables side by side, :mod:`analysis.schedule`) and Spark's logs in a file from the first
line (``analysis/log4j2.properties``, :func:`analysis.jvm.log_file`; ``KDISSECT_SPARK_LOG=WARN`` logs more),
never on the terminal.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import jvm
from analysis.exceptions import AnalysisError, SparkFailed, SparkUnavailable
from analysis.preflight import check_start, engine_for, java_command

# Applied only when running locally: a laptop gains nothing from Spark's cluster-sized defaults.
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # The analysis submits independent tables from several threads (analysis.schedule): share the cores.
    "spark.scheduler.mode": "FAIR",
}
SHUFFLE_PARTITIONS_LOCAL = 4
# A session that runs analysis after analysis (a Spark Connect server, a notebook, a test run): Spark
# keeps the status of its last 1,000 jobs, stages and SQL runs on the driver's heap, tens of analyses'
# worth, until a 1 GB heap fills. A few analyses' worth is all anyone looks at.
LONG_RUNNING = {"spark.ui.retainedJobs": "200", "spark.ui.retainedStages": "200",
                "spark.sql.ui.retainedExecutions": "100", "spark.ui.retainedTasks": "10000"}
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
# Spark's launcher starts the JVM with the incubating Vector API; the JVM says so on stderr, one line
# that means nothing to a user and landed in the middle of the progress line.
JVM_NOISE = (b"WARNING: Using incubator modules: jdk.incubator.vector",)


def _forward(read_fd: int, write_fd: int) -> None:
    """Copy the JVM's stderr to ours line by line, leaving out :data:`JVM_NOISE`; ends with the JVM."""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe, os.fdopen(write_fd, "wb", buffering=0) as out:
        for line in iter(pipe.readline, b""):
            if not line.rstrip(b"\r\n").startswith(JVM_NOISE):
                with contextlib.suppress(OSError):
                    out.write(line)


@contextlib.contextmanager
def quiet_jvm_start() -> Iterator[None]:
    """While a JVM is started in the block, give it a stderr that drops :data:`JVM_NOISE` and passes on
    everything else (Spark's errors included) for as long as it runs; this process's own stderr is
    restored when the block ends."""
    try:
        original = os.dup(2)
    except OSError:   # no stderr at all: nothing to keep clean
        yield
        return
    read_fd, write_fd = os.pipe()
    sys.stderr.flush()
    os.dup2(write_fd, 2)          # what the JVM inherits
    os.close(write_fd)
    threading.Thread(target=_forward, args=(read_fd, os.dup(original)), daemon=True,
                     name="kdissect-jvm-stderr").start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)      # the JVM keeps the pipe; this process writes to its stderr again
        os.close(original)


def is_remote(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no SparkContext on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _first_line(exc: BaseException) -> str:
    """The message of a JVM failure without its stack trace: the deepest cause's first line."""
    text = str(exc).strip()
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None and cause.getCause() != cause:
                cause = cause.getCause()
            text = str(cause.toString())
        except Exception:  # noqa: BLE001 - the gateway may be gone
            pass
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("at ")]
    return (lines[0] if lines else type(exc).__name__)[:300]


def query_failure(exc: BaseException, table: str | None = None, embedded: bool = False) -> AnalysisError | None:
    """The one-line error for a Spark query that failed with ``exc`` (computing ``table``, when known); None
    when ``exc`` is not Spark's. On the embedded engine (``embedded``) it names JVM Spark as the way around."""
    from pyspark.errors import PySparkException
    if not (isinstance(exc, PySparkException) or type(exc).__name__ == "Py4JJavaError"):
        return None
    text = _first_line(exc)
    # Spark's own advice after the first sentence is long and names settings kdissect sets itself.
    sentence = text.split(". ", 1)[0]
    text = sentence + "." if len(sentence) >= 20 and sentence != text else text
    where = f" (table {table})" if table else ""
    if embedded:
        return SparkFailed(f"the embedded engine failed during the analysis{where}: {text} (run it on JVM Spark "
                           "with --engine spark)")
    hint = " (give Spark more with --conf spark.driver.memory=4g)" if "memory" in text.lower() else ""
    return SparkFailed(f"Spark failed during the analysis{where}: {text}{hint}")


# How long a JVM whose connection broke may take to exit (its shutdown hooks) before the failure is
# taken for something else.
DEATH_GRACE_S = 10.0


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the link to Spark broke (the server or JVM went away), not that a query failed."""
    name = type(exc).__name__
    if name in ("Py4JNetworkError", "ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError"):
        return True
    text = str(exc)
    if "Cannot call methods on a stopped SparkContext" in text:     # a server shutting down still answers
        return True
    return name in ("SparkConnectGrpcException", "_MultiThreadedRendezvous") and any(
        code in text for code in ("StatusCode.CANCELLED", "StatusCode.UNAVAILABLE", "RST_STREAM"))


@dataclass
class Spark:
    """The Spark one command runs on: ``session``, which the jobs use, and what it takes to stop it.

    A local analysis (``local[...]`` master, no ``--remote``) starts its own JVM and serves Spark Connect
    from it on a loopback port only this process knows the token of (``host`` is that JVM's classic
    session); ``session`` is a Spark Connect client of it, exactly as with ``--remote``. Tables are then
    built in Python and sent whole, one request per query, where a classic session asks the JVM to
    analyze every intermediate DataFrame over Py4J: fewer round trips and less driver work.
    """

    session: Any
    host: Any = None
    archive: Any = None
    # pyspark marks a process that opened a Connect session (an environment variable) and then refuses
    # classic sessions in it: the mark is taken away on stop when this Spark put it there.
    connect_mark: bool = False
    lost: bool = False      # the link to Spark broke during a command: stopping has nothing to ask
    # :func:`start` built this Spark for one command, which stops it (not a session handed in by a
    # notebook, nor a Spark Connect server that outlives the command): what it keeps needs no freeing.
    owned: bool = False
    embedded: Any = None    # the embedded engine's server (analysis.sail.Embedded), stopped with the command
    # Where an analysis materialises what several tables read (analysis.dataset.Dataset.keep) when the
    # engine keeps nothing itself: a directory of this command's own, removed as it stops.
    scratch: str | None = None

    def _jvm(self) -> subprocess.Popen | None:
        """The JVM process this process started, if it did."""
        return getattr(getattr(getattr(self.host, "sparkContext", None), "_gateway", None), "proc", None)

    def died(self) -> bool:
        """Whether the JVM this process started has exited (it ran out of memory, or was killed)."""
        proc = self._jvm()
        return proc is not None and proc.poll() is not None

    def check_alive(self, failure: BaseException | None = None) -> None:
        """SparkUnavailable (one line) if Spark went away during a command: this process's JVM exited (it
        ran out of memory, or was killed), or ``failure`` is the link to it breaking.

        A JVM out of heap exits from its own handler, a moment after the query's stream broke, and may take
        a while over its shutdown: it is given a few seconds to be seen gone, and is taken for gone anyway
        once its Connect server stopped answering."""
        if failure is not None and connection_lost(failure):
            self.lost = True
        deadline = time.monotonic() + (DEATH_GRACE_S if self.lost else 0)
        while not self.died() and time.monotonic() < deadline and self.host is not None:
            time.sleep(0.1)
        if self.died() or (self.lost and self.host is not None):
            raise SparkUnavailable("Spark's JVM died during the analysis (out of memory? give it more with "
                                   "--conf spark.driver.memory=4g)")
        if self.lost and self.embedded is not None:
            raise SparkUnavailable("the embedded engine stopped answering during the analysis; run it again, or "
                                   "with --engine spark")
        if self.lost:
            raise SparkUnavailable("the Spark Connect server stopped answering during the analysis; is it still "
                                   "running? (kdissect spark-server start)")

    def stop(self) -> None:
        try:
            self._stop()
        finally:
            if self.connect_mark:
                os.environ.pop(CONNECT_MODE_ENV, None)

    def _stop(self) -> None:
        if self.embedded is not None:
            try:
                if not self.lost:
                    self.session.stop()
                else:
                    _abandon(self.session)
            finally:
                self.embedded.stop()
                if self.scratch is not None:
                    shutil.rmtree(self.scratch, ignore_errors=True)
            return
        if self.died():
            _abandon(self.session)
            return
        if self.lost:   # nothing to ask a Spark that stopped answering: a JVM of ours still exiting is ended
            _abandon(self.session)
            proc = self._jvm()
            if proc is not None:
                proc.kill()
                proc.wait()
            return
        try:
            if self.session is not self.host:
                self.session.stop()
        finally:
            if self.host is not None:
                self.host.stop()

    def jobs(self, group: str) -> int | None:
        """Spark jobs run so far: in ``group`` on a classic session, every job of a local Connect
        server's JVM (it serves this process only), None on somebody else's Connect server."""
        if self.host is not None and self.host is not self.session:
            return len(self.host.sparkContext.statusTracker().getJobIdsForGroup(None))
        return spark_jobs(self.session, group)

    def keeps_checkpoints(self) -> bool:
        """Whether an analysis may keep its frames as local checkpoints, which Spark frees only once its
        JVM has collected them: in a JVM of this command's own, or on a server that collects often
        (:func:`frees_checkpoints`)."""
        if self.embedded is not None:      # checkpoints are JVM Spark's: the embedded engine keeps in scratch
            return False
        return self.owned or (is_remote(self.session) and frees_checkpoints(self.session))


def running_on(spark: Any) -> Spark:
    """``spark`` (a session, or a :class:`Spark`) as a :class:`Spark` the analysis runs on and leaves running:
    a session of the embedded engine (:func:`build_session`) keeps its engine's scratch directory."""
    if isinstance(spark, Spark):
        return spark
    embedded, scratch = getattr(spark, "_kdissect_embedded", (None, None))
    return Spark(spark, embedded=embedded, scratch=scratch)


def local_master(master: str | None) -> bool:
    return (master or os.environ.get("SPARK_MASTER", "local[*]")).startswith("local")


def start(app_name: str, master: str | None = None, conf: dict[str, str] | None = None, remote: str | None = None,
          input_bytes: int = 0, checked: bool = False, connect: bool = True, engine: str | None = None) -> Spark:
    """Spark for one command (:func:`engine_for`): a client of the Connect server at ``remote``; the
    embedded engine, started in this process; else, locally, a JVM of our own tuned to ``input_bytes`` of
    Parquet and served over Spark Connect (``connect=False``: a classic session); else (a cluster master,
    spark-submit) a classic session. SparkUnavailable (one line) when it cannot start; ``checked``:
    :func:`check_start` already passed."""
    if not checked:
        check_start(master, remote, engine)
    if engine_for(engine, master, remote) == "sail":
        return start_embedded(app_name, conf)
    if remote:
        # The session's own SQL settings for the input's size (a Connect session's settings are its own).
        marked = CONNECT_MODE_ENV in os.environ
        return Spark(_remote_session(app_name, remote, {**conf_for_size(input_bytes), **(conf or {})}),
                     connect_mark=not marked)
    if "PYSPARK_GATEWAY_PORT" in os.environ or not local_master(master):
        return Spark(build_session(app_name, master, conf, checked=True, engine="spark"), owned=True)
    settings = {**LOCAL_TUNING, **conf_for_size(input_bytes)}
    heap = jvm.driver_memory(input_bytes)
    if heap is not None:              # a --conf spark.driver.memory given still wins (conf goes last)
        settings["spark.driver.memory"] = heap
    java = jvm_options(input_bytes)
    archive = None
    if jvm.cds_enabled() and "spark.driver.extraJavaOptions" not in (conf or {}):
        archive = jvm.ClassArchive(java_command() or "java", jvm.java_version(java_command() or "java"))
        writing = not archive.ready() and archive.claim()
        if writing or archive.ready():
            java += archive.options(writing)
        if not writing:
            archive = None
    settings["spark.driver.extraJavaOptions"] = " ".join(java)
    token = secrets.token_hex(16) if connect else None
    if connect:
        settings.update({"spark.plugins": CONNECT_PLUGIN, "spark.connect.grpc.binding.address": "127.0.0.1",
                         "spark.connect.grpc.binding.port": "0"})
        # The server takes its token from its environment (its command line is visible to every user).
        os.environ[TOKEN_ENV] = token
    try:
        host = build_session(app_name, master, {**settings, **(conf or {})}, checked=True, engine="spark")
    except BaseException:
        if archive is not None:
            archive.release()
        raise
    finally:
        os.environ.pop(TOKEN_ENV, None)
    if archive is not None:
        archive.writer_started(host.sparkContext._gateway.proc.pid)
    if not connect:
        return Spark(host, host, archive, owned=True)
    marked = CONNECT_MODE_ENV in os.environ
    try:
        port = getattr(getattr(host._jvm, "org.apache.spark.sql.connect.service.SparkConnectService$"),
                       "MODULE$").localPort()
        # "localhost": the client then sends the token over a local (not TLS) channel.
        session = _remote_session(app_name, f"sc://localhost:{port}/;token={token}", None, local=True)
        # A server in this process's own JVM does not come back once gone: fail in seconds, not after the
        # client's default ten minutes of retries.
        from pyspark.sql.connect.client.retries import DefaultPolicy
        session.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=1000)])
    except BaseException:
        host.stop()
        raise
    return Spark(session, host, archive, connect_mark=not marked, owned=True)


def start_embedded(app_name: str, conf: dict[str, str] | None = None) -> Spark:
    """The embedded engine (:mod:`analysis.sail`) started in this process, and a session of it in UTC with
    ``conf``; stopped, with its scratch directory, by :meth:`Spark.stop`."""
    import tempfile

    from analysis import sail
    embedded = sail.start()
    marked = CONNECT_MODE_ENV in os.environ
    try:
        session = _remote_session(app_name, embedded.url, conf, engine="the embedded engine")
        # A server inside this process does not come back once gone: fail in seconds.
        from pyspark.sql.connect.client.retries import DefaultPolicy
        session.client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=1000)])
    except BaseException:
        embedded.stop()
        raise
    running = Spark(session, embedded=embedded, scratch=tempfile.mkdtemp(prefix="kdissect-analysis-"),
                    connect_mark=not marked, owned=True)
    # The server stops when its Python object is collected: it lives as long as the session does, for a
    # caller that keeps only the session (a notebook's ``spark``), whose scratch directory goes with it.
    session._kdissect_embedded = (embedded, running.scratch)
    weakref.finalize(session, shutil.rmtree, running.scratch, True)
    return running


CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
FAIR_POOLS = Path(__file__).with_name("fairscheduler.xml")
# Every local session: the analysis runs many small independent queries side by side.
LOCAL_TUNING = {
    # PySpark records the Python call site of every Column function in the JVM (three more Py4J round
    # trips per call) for error messages; the jobs make tens of thousands of such calls.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Concurrent queries share the cores fairly (the default pool itself FAIR, whichever thread submits).
    "spark.scheduler.allocation.file": FAIR_POOLS.as_uri(),
}


def conf_for_size(input_bytes: int) -> dict[str, str]:
    """Spark SQL settings for a local run over ``input_bytes`` of Parquet.

    Every input: a Parquet file counts as 1 MiB more than its size when Spark splits the input among
    tasks (``openCostInBytes``; Spark's 4 MiB kept a decoded capture's 5 MB file of 200,000 exchanges,
    eleven row groups, in one task, so parsing its bodies used one core of two).
    Large inputs: only small join sides broadcast (below). Small inputs: no adaptive execution (it plans
    each shuffle stage as a job of its own, and re-plans after each: most of a tiny query's cost, for
    nothing to adapt), and expressions interpreted rather than compiled to Java (compiling each query's
    code costs more than running it on a few thousand rows), and no broadcast joins (each broadcast is a
    Spark job of its own that collects, serializes and ships a side of a few rows: a sort-merge join in
    the query's own stages costs less).
    """
    split = {"spark.sql.files.openCostInBytes": str(1 << 20)}
    if input_bytes > jvm.SMALL_INPUT:
        # A join side is broadcast when its Parquet is estimated under the threshold, but a filtered side
        # of a large table is estimated at the whole table's compressed size, and as rows in the driver's
        # heap it is many times that: 2,000,000 exchanges' partitions ran a 1.3 GB heap out of memory at
        # Spark's 10 MB.
        return {**split, "spark.sql.autoBroadcastJoinThreshold": str(1 << 20)}
    return {**split, "spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN", "spark.sql.autoBroadcastJoinThreshold": "-1"}


def log_options() -> list[str]:
    """Java options sending the log of a JVM this process starts to its file (:func:`jvm.log_file`), quiet from
    its first line: nothing Spark logs reaches the terminal, where kdissect says what failed in one line."""
    return [f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}", "-Dkdissect.log.appender=file",
            f"-Dkdissect.log.file={jvm.log_file()}"]


def jvm_options(input_bytes: int) -> list[str]:
    return [*log_options(), *jvm.quick_start_options(input_bytes)]


def build_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None,
                  remote: str | None = None, checked: bool = False, engine: str | None = None):
    """A session in UTC with quiet logs, on the engine :func:`engine_for` picks: by default the embedded
    engine (a Spark Connect session of a Sail server in this process, which stops with the session); a
    classic JVM session for ``engine="spark"``, a ``master`` (which overrides spark-submit's or
    SPARK_MASTER) or under spark-submit; a Spark Connect one when ``remote`` is given. For notebooks and
    scripts; the commands use :func:`start`.

    Under spark-submit (which sets PYSPARK_GATEWAY_PORT) the master and Java
    come from its command line; from plain Python JVM Spark's master defaults to
    ``local[*]``. ``conf`` (``--conf`` from the CLI) wins over every default here.
    SparkUnavailable (one line) when Spark cannot start; ``checked``: :func:`check_start` already passed.
    """
    if not checked:
        check_start(master, remote, engine)
    if engine_for(engine, master, remote) == "sail":
        return start_embedded(app_name, conf).session
    if remote:
        return _remote_session(app_name, remote, conf)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    from pyspark.sql import SparkSession  # late: the checks answer before pyspark loads

    builder = SparkSession.builder.appName(app_name)
    if master is None and not under_submit:
        master = os.environ.get("SPARK_MASTER", "local[*]")
    if master is not None:
        builder = builder.master(master)
    settings = {"spark.sql.session.timeZone": "UTC"}
    if not under_submit:
        # Logs to a file from the JVM's first line (setLogLevel comes too late for startup warnings).
        settings["spark.driver.extraJavaOptions"] = " ".join(log_options())
    if master is not None and master.startswith("local"):
        settings.update(LOCAL_DEFAULTS)
        settings["spark.sql.shuffle.partitions"] = str(SHUFFLE_PARTITIONS_LOCAL)
    settings.update(conf or {})
    if "spark.pyspark.python" not in settings and "PYSPARK_PYTHON" not in os.environ:
        # Python tasks (spark-decode's, a notebook's UDFs) run this Python, which has kdissect's
        # dependencies, not whatever `python3` is first on PATH.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in settings.items():
        builder = builder.config(key, value)
    # A Connect session opened earlier in this process (the embedded engine's, say) marks the process as
    # Spark Connect's, and pyspark then refuses a classic session: the mark is lifted while this one starts.
    mark = os.environ.pop(CONNECT_MODE_ENV, None)
    try:
        with quiet_jvm_start():
            spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - pyspark raises several types when the JVM cannot start
        raise SparkUnavailable(f"Spark did not start with master {master or 'from spark-submit'}: "
                               f"{_first_line(exc)}") from None
    finally:
        if mark is not None:
            os.environ[CONNECT_MODE_ENV] = mark
    spark.sparkContext.setLogLevel(os.environ.get("KDISSECT_SPARK_LOG", "ERROR"))
    return spark


def _remote_session(app_name: str, remote: str, conf: dict[str, str] | None, local: bool = False,
                    engine: str | None = None):
    try:
        from pyspark.sql import SparkSession
        import pyspark.sql.connect.session  # noqa: F401 - the Connect client's own imports (grpc, ...)
    except ImportError as exc:  # pyspark's Connect client needs grpcio & co (kafka-dissect depends on them)
        raise SparkUnavailable(f"Spark Connect needs pyspark's Connect client ({exc}): "
                               "pip install 'pyspark[connect]'") from None
    builder = SparkSession.builder.remote(remote).appName(app_name)
    # A local server's sessions take the settings of its JVM; somebody else's server needs UTC said.
    for key, value in ({} if local else {"spark.sql.session.timeZone": "UTC", **(conf or {})}).items():
        builder = builder.config(key, value)
    try:
        session = builder.create()
    except Exception as exc:  # noqa: BLE001 - gRPC and Spark errors alike
        where = engine or ("the local Spark Connect server" if local else f"Spark Connect server {remote}")
        raise SparkUnavailable(f"{where} did not open a session: {_first_line(exc)}") from None
    _retry_briefly(session)
    return session


# A server that stopped answering: retried for about this long (pyspark's default is at least ten minutes,
# which leaves a command whose server died hanging, silent, for those ten minutes).
RETRY_POLICY = {"max_retries": 6, "max_backoff": 5000}


def _retry_briefly(session: Any) -> None:
    """Retry a lost server for seconds, then fail (:data:`RETRY_POLICY`): the failure is then one line
    (:meth:`Spark.check_alive`), so pyspark's own warning that it gave up is left out."""
    import warnings
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy
        session.client.set_retry_policies([DefaultPolicy(**RETRY_POLICY)])
    except (ImportError, AttributeError, TypeError):  # another pyspark's client: its own retries
        pass


# kdissect's own Spark Connect server collects its garbage this often (Spark's default: every 30 minutes).
# An analysis' local checkpoints are freed only once the JVM has collected them (Spark's ContextCleaner),
# so a server that collects often may hold them, and one that does not gets persisted frames, which
# the analysis unpersists as it ends.
SERVER_GC_INTERVAL = "1min"
PROMPT_CLEANUP_S = 120
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def frees_checkpoints(spark) -> bool:
    """Whether the Spark Connect server behind ``spark`` frees an analysis' local checkpoints within
    :data:`PROMPT_CLEANUP_S` of its end: its ``spark.cleaner.periodicGC.interval`` (a server-wide
    setting; ``kdissect spark-server start`` sets it to :data:`SERVER_GC_INTERVAL`)."""
    try:
        text = spark.conf.get("spark.cleaner.periodicGC.interval", None)
    except Exception:  # noqa: BLE001 - a server that will not say: assume Spark's default
        return False
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", (text or "").lower())
    if match is None or match.group(2) not in (*_TIME_UNITS, ""):
        return False
    return float(match.group(1)) * _TIME_UNITS.get(match.group(2), 1) <= PROMPT_CLEANUP_S


def checkpoint_level(input_bytes: int) -> str:
    """Where a command's own Spark keeps the frames several tables read (:meth:`analysis.dataset.Dataset.keep`):
    in memory as rows while the input fits Spark's default heap (:data:`jvm.HEAP_FREE_INPUT`: 200,000
    exchanges' facts are ~170 MB of it, and their analysis 1.7 s quicker than from disk), on disk past it,
    where rows as objects would take twenty times the Parquet in heap."""
    return "MEMORY_AND_DISK_DESER" if input_bytes <= jvm.HEAP_FREE_INPUT else "DISK_ONLY"


def size_shuffle(spark, input_bytes: int, user_set: bool = False) -> int:
    """Shuffle partitions sized to the data: one for a small input (up to :data:`jvm.SMALL_INPUT`), else
    about one per 64 MiB of Parquet, at least 2 (at least the number of cores locally), at most 200.

    A small input's tables are a few thousand rows: a second partition only doubles the tasks each
    stage serializes, schedules and runs (a seventh of a warm server's CPU for the bundled sample),
    while the tables computed side by side keep the cores busy.
    Left alone when the user set ``spark.sql.shuffle.partitions`` themselves.
    """
    if user_set:
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    if input_bytes <= jvm.SMALL_INPUT:
        n = 1
    else:
        cores = (os.cpu_count() or 2) if is_remote(spark) else max(1, spark.sparkContext.defaultParallelism)
        n = max(2, min(200, max(cores, input_bytes // (64 << 20) + 1)))
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    return n


def in_thread(spark, pool: str, group: str) -> Callable[[], None]:
    """What a thread submitting Spark jobs for the analysis sets first: its FAIR pool and the run's job
    group (so the jobs can be counted and cancelled together). Nothing to set on a Connect session."""
    def setup() -> None:
        if is_remote(spark):
            return
        sc = spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", pool)
        sc.setJobGroup(group, "kdissect analysis", interruptOnCancel=False)
    return setup


def spark_jobs(spark, group: str) -> int | None:
    """Spark jobs run in ``group`` so far (Spark's status tracker); None on a Connect session."""
    if is_remote(spark):
        return None
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def cancel(spark, group: str) -> None:
    """Stop the run's jobs still going (an error elsewhere, or Ctrl-C)."""
    try:
        if is_remote(spark):
            spark.interruptAll()
        else:
            spark.sparkContext.cancelJobGroup(group)
    except Exception:  # noqa: BLE001 - best effort while already failing
        pass


def _abandon(spark: Any) -> None:
    """The Spark Connect client of a server that is gone, closed here without a word to it. Left open,
    pyspark's exit handler asks the server to clean its ML cache, and retries that for ten minutes before
    the process may end (the command had printed its one line long before)."""
    client = getattr(spark, "client", None) if is_remote(spark) else None
    if client is None:
        return
    client._closed = True              # the flag pyspark's exit handler checks (pyspark 4.x)
    try:
        client._channel.close()
    except Exception:  # noqa: BLE001 - a channel already broken has nothing left to close
        pass
