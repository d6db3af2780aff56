"""Building a SparkSession that suits both a laptop and a cluster, and checking Java first.

Spark 4 runs on Java 17 or newer. Without it pyspark dies with a long Java
gateway traceback, so :func:`check_java` says what to install in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from analysis.exceptions import SparkUnavailable

MIN_JAVA = 17
INSTALL_JAVA = ("install a Java runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
                "macOS: brew install openjdk@17) or point JAVA_HOME at one")

# Applied only when running locally: a laptop gains nothing from Spark's cluster-sized defaults.
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
SHUFFLE_PARTITIONS_LOCAL = 4
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


def build_session(app_name: str, master: str | None = None, conf: dict[str, str] | None = None):
    """A session in UTC with quiet logs; ``master`` overrides spark-submit's or SPARK_MASTER.

    Under spark-submit (which sets PYSPARK_GATEWAY_PORT) the master and Java
    come from its command line; from plain Python the master defaults to
    ``local[*]``. ``conf`` (and SPARK_CONF-style ``--conf`` from the CLI) wins
    over every default here.
    """
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if not under_submit:
        check_java()
    from pyspark.sql import SparkSession  # late: the Java check answers before pyspark loads

    builder = SparkSession.builder.appName(app_name)
    if master is None and not under_submit:
        master = os.environ.get("SPARK_MASTER", "local[*]")
    if master is not None:
        builder = builder.master(master)
    settings = {"spark.sql.session.timeZone": "UTC"}
    if master is not None and master.startswith("local"):
        settings.update(LOCAL_DEFAULTS)
        settings["spark.sql.shuffle.partitions"] = str(SHUFFLE_PARTITIONS_LOCAL)
        # Quiet from the JVM's first line (setLogLevel comes too late for startup warnings).
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with quiet_jvm_start():
            spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - pyspark raises several types when the JVM cannot start
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailable(f"Spark did not start ({first}); check Java ({INSTALL_JAVA})") from None
    spark.sparkContext.setLogLevel(os.environ.get("KDISSECT_SPARK_LOG", "ERROR"))
    return spark


def size_shuffle(spark, input_bytes: int, user_set: bool = False) -> int:
    """Shuffle partitions sized to the data: about one per 64 MiB of Parquet, at least 2, at most 200.

    Left alone when the user set ``spark.sql.shuffle.partitions`` themselves.
    """
    if user_set:
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    cores = max(1, spark.sparkContext.defaultParallelism)
    n = max(2, min(200, max(cores, input_bytes // (64 << 20) + 1)))
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
    return n
