"""(slow) Starting Spark: Spark's log goes to a file, never to stderr (an error Spark logged and recovered
from printed a Java stack trace under a run that succeeded), the JVM's start-up warning about the incubating
Vector API is left out of stderr (it broke the progress line), and everything else the JVM writes there
still arrives. And which servers free an analysis' checkpoints promptly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import session

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env})


# What no line of a run's stderr may start with: Spark's log lines and the stack traces they carry.
LOGGED = re.compile(r"^\s*(at org\.apache|ERROR |WARN |INFO |Traceback)|^\S+ \S+ (ERROR|WARN|INFO) ", re.M)


def test_the_jvm_logs_to_its_file_and_stderr_keeps_what_it_writes_itself(tmp_path: Path) -> None:
    # Spark as pyspark starts it: the warning is there.
    bare = python("from pyspark.sql import SparkSession\n"
                  "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
                  "s.stop()")
    assert bare.returncode == 0 and WARNING in bare.stderr, bare.stderr[-2000:]
    # As kdissect starts it, logging everything: the log is in its file; the JVM's own stderr still comes
    # through, without the warning.
    ours = python("from analysis.session import build_session\n"
                  "s = build_session('kdissect-test', 'local[1]')\n"
                  "s.sparkContext.setLogLevel('INFO')\n"
                  "print(s.range(3).count())\n"
                  "s.sparkContext._jvm.java.lang.System.err.println('written by the JVM')\n"
                  "s.stop()", KDISSECT_CACHE_DIR=str(tmp_path))
    assert ours.returncode == 0 and ours.stdout.strip() == "3", ours.stderr[-2000:]
    assert WARNING not in ours.stderr and "written by the JVM" in ours.stderr
    assert not LOGGED.search(ours.stderr), ours.stderr[-2000:]
    (log,) = (tmp_path / "logs").glob("spark-*.log")
    assert " INFO " in log.read_text()


def test_old_logs_make_room_for_the_new_one(tmp_path: Path, monkeypatch) -> None:
    from analysis import jvm
    monkeypatch.setenv("KDISSECT_CACHE_DIR", str(tmp_path))
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(jvm.LOGS_KEPT + 5):
        (logs / f"spark-{100 + i}.log").write_text("x")
        os.utime(logs / f"spark-{100 + i}.log", (1000 + i, 1000 + i))
    path = jvm.log_file()
    assert path == logs / f"spark-{os.getpid()}.log" and not path.exists()
    kept = sorted(int(p.stem.split("-")[1]) for p in logs.glob("spark-*.log"))
    assert kept == list(range(100 + 6, 100 + jvm.LOGS_KEPT + 5))      # the 19 newest others


class _Conf:
    def __init__(self, value):
        self.value = value

    def get(self, key, default=None):
        assert key == "spark.cleaner.periodicGC.interval"
        return default if self.value is None else self.value


@pytest.mark.parametrize(("interval", "frees"), [
    ("1min", True), ("30s", True), ("120", True), ("90000ms", True), ("2m", True),
    ("3min", False), ("30min", False), ("1h", False), (None, False), ("soon", False)])
def test_a_server_frees_checkpoints_when_it_collects_its_garbage_within_two_minutes(interval, frees):
    """Spark's time strings (a bare number is seconds for this setting); unset is Spark's 30 minutes."""
    server = type("Session", (), {"conf": _Conf(interval)})()
    assert session.frees_checkpoints(server) is frees
