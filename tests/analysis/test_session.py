"""(slow) Starting Spark: the JVM's start-up warning about the incubating Vector API is left out of
stderr (it broke the progress line), and everything else the JVM writes there still arrives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
