"""(slow) Starting Spark: the JVM's start-up warning about the incubating Vector API is left out of
stderr (it broke the progress line), and everything else the JVM writes there still arrives. And which
servers free an analysis' checkpoints promptly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import session

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_the_jvm_start_warning_is_left_out_and_the_rest_of_its_stderr_kept() -> None:
    # Spark as pyspark starts it: the warning is there.
    bare = python("from pyspark.sql import SparkSession\n"
                  "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
                  "s.stop()")
    assert bare.returncode == 0 and WARNING in bare.stderr, bare.stderr[-2000:]
    # As kdissect starts it: gone, while the JVM's own log lines still come through.
    ours = python("from analysis.session import build_session\n"
                  "s = build_session('kdissect-test', 'local[1]')\n"
                  "s.sparkContext.setLogLevel('INFO')\n"
                  "print(s.range(3).count())\n"
                  "s.stop()")
    assert ours.returncode == 0 and ours.stdout.strip() == "3", ours.stderr[-2000:]
    assert WARNING not in ours.stderr
    assert " INFO " in ours.stderr


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
