"""(slow) Spark going away in the middle of an analysis is one line, at once: the local JVM killed (as
running out of heap kills it: its own handler exits it, a moment after the query's connection broke), and
a Spark Connect server stopped under a ``--remote`` analysis. Before, the first printed a gRPC traceback and
the second hung for ten minutes in pyspark's retries, then printed one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.analysis.test_connect import dataset, env, free_port, kdissect  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

# Runs one analysis in a process of its own, which sends SIGTERM to Spark's JVM (the local one, or the
# server whose pid is given) once three tables are in, and prints how the analysis ended.
SCRIPT = """
import os, signal, sys, time
from analysis import jobs, schedule, session
from analysis.exceptions import AnalysisError
dataset, remote, server_pid = sys.argv[1], sys.argv[2] or None, int(sys.argv[3])
running = session.start("kdissect-test", "local[2]" if not remote else None, {}, remote, 100_000)
victim = server_pid or running.host.sparkContext._gateway.proc.pid
def progress(done, total, name):
    if done == 3:
        os.kill(victim, signal.SIGTERM)
t0 = time.monotonic()
try:
    schedule.analyze(running, schedule.Request(datasets=[dataset]), jobs.JOBS, progress)
    print("finished")
except AnalysisError as exc:
    print(f"{type(exc).__name__}: {exc}")
finally:
    running.stop()
print(f"seconds: {time.monotonic() - t0:.1f}")
"""

# Well under pyspark's ten minutes of retries: the few seconds kdissect retries for, and the JVM's exit.
QUICK_S = 60


def analyze_and_kill(env: dict[str, str], dataset: Path, remote: str = "", server_pid: int = 0) -> list[str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(dataset), remote, str(server_pid)], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False, env=env)
    # The process ends with the analysis: pyspark's exit handler once asked the dead server to clean its ML
    # cache, retrying for up to ten minutes after the one line was printed.
    assert time.monotonic() - t0 < 2 * QUICK_S, proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "RETRIES_EXCEEDED" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_the_local_jvm_dying_mid_analysis_is_one_line(env, dataset):
    out = analyze_and_kill(env, dataset)
    assert out[0] == ("SparkUnavailable: Spark's JVM died during the analysis (out of memory? give it more with "
                      "--conf spark.driver.memory=4g)"), out
    assert float(out[1].split()[1]) < QUICK_S, out


@pytest.mark.parametrize("engine", ["sail", "spark"])
def test_a_connect_server_stopping_mid_analysis_is_one_line(env, dataset, engine):
    port = free_port()
    started = kdissect(env, "spark-server", "start", "--engine", engine, "--port", str(port), timeout=400)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        url = kdissect(env, "spark-server", "url").stdout.strip()
        from analysis import connect_server
        pid = connect_server.status(Path(env["KDISSECT_CACHE_DIR"]) / "spark-server").pid
        assert pid is not None
        out = analyze_and_kill(env, dataset, url, pid)
    finally:
        kdissect(env, "spark-server", "stop", timeout=120)
    assert out[0] == ("SparkUnavailable: the Spark Connect server stopped answering during the analysis; is it "
                      "still running? (kdissect spark-server start)"), out
    assert float(out[1].split()[1]) < QUICK_S, out
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, signal.SIGKILL)
