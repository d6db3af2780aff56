"""What ``kdissect analyze`` and ``doctor`` check before Spark starts, and the one line a Spark that cannot
start gives: a bad master URL, a master nobody answers at, no Java, a Spark Connect server that is not there.

None of these starts a JVM: each answers in a second or two, where pyspark alone took 11 s to reject a bad
``--set``, printed a 20-line Java stack trace for ``local[0]`` and retried ``spark://nohost:7077`` for a minute.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis import preflight
from analysis.exceptions import AnalysisError, SparkUnavailable

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "tansu-admin-errors.pcap"
CAPTURE = REPO / "samples" / "findings" / "findings-acks0.pcap"
# Well under a JVM's start on any machine: the answer came from the checks, not from Spark.
QUICK_S = 20


@pytest.fixture(scope="module")
def decoded(tmp_path_factory) -> Path:
    import kdissect
    out = tmp_path_factory.mktemp("start") / "admin"
    kdissect.write_dataset([str(SAMPLE)], out)
    return out


def kdissect(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kdissect", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **(env or {})})
    return proc, time.monotonic() - t0


def one_line(proc: subprocess.CompletedProcess, seconds: float, code: int, *texts: str) -> None:
    assert proc.returncode == code and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and "at org." not in proc.stderr, \
        proc.stderr
    for text in texts:
        assert text in proc.stderr, proc.stderr
    assert seconds < QUICK_S, f"{seconds:.1f} s: a JVM was started"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("master", "message"), [
    ("local[0]", "invalid Spark master 'local[0]': local[N] needs at least 1 thread"),
    ("local[two]", "invalid Spark master 'local[two]'"),
    ("spark://nohost.invalid:7077", "Spark master spark://nohost.invalid:7077 is unreachable "
                                    "(host nohost.invalid not found)"),
    ("spark://:7077", "invalid Spark master 'spark://:7077': expected spark://HOST:PORT"),
    ("sc://localhost:15002", "is a Spark Connect URL: give it with --remote"),
])
def test_a_master_spark_cannot_use_is_one_line_before_spark_starts(decoded, master, message):
    # A master that is not one is bad use (2); one that names a host nobody answers at, a failure (1).
    code = 1 if "unreachable" in message else 2
    one_line(*kdissect("analyze", str(decoded), "--master", master), code, message)


def test_a_master_nobody_answers_at_is_one_line():
    port = closed_port()
    with pytest.raises(SparkUnavailable, match=f"Spark master spark://127.0.0.1:{port} is unreachable "
                                               f"\\(127.0.0.1:{port}: Connection refused\\)"):
        preflight.check_start(f"spark://127.0.0.1:{port}")


def test_without_java_the_embedded_engine_answers_and_jvm_spark_is_one_line(decoded, tmp_path):
    # No JAVA_HOME and no java on PATH (the Python runs by its full path).
    nojava = {"JAVA_HOME": str(tmp_path / "nojava"), "PATH": str(tmp_path)}
    report = tmp_path / "report.html"
    proc, seconds = kdissect("analyze", str(decoded), "--report", str(report), env=nojava)
    assert proc.returncode == 0 and "analyzed in" in proc.stdout and report.stat().st_size > 100_000, proc.stderr
    assert proc.stderr == "" and seconds < QUICK_S
    proc, seconds = kdissect("doctor", str(CAPTURE), env=nojava)
    assert proc.returncode in (0, 1) and "producer.acks" in proc.stdout and "Traceback" not in proc.stderr, \
        proc.stdout + proc.stderr
    proc, seconds = kdissect("analyze", str(decoded), "--engine", "spark", env=nojava)
    one_line(proc, seconds, 1, "Spark needs Java 17 or newer and none was found: install a Java runtime")


def test_java_too_old_is_one_line_for_doctor_on_jvm_spark(tmp_path):
    old = tmp_path / "jdk8" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    (old / "java").chmod(0o755)
    proc, seconds = kdissect("doctor", str(CAPTURE), "--engine", "spark", env={"JAVA_HOME": str(tmp_path / "jdk8")})
    one_line(proc, seconds, 4, "kdissect doctor: Spark needs Java 17 or newer, found Java 8")


@pytest.mark.parametrize(("engine", "master", "remote", "env", "chosen"), [
    (None, None, None, {}, "sail"),
    ("spark", None, None, {}, "spark"),
    (None, "local[2]", None, {}, "spark"),
    (None, None, "sc://h:1", {}, "remote"),
    (None, None, None, {"KDISSECT_ENGINE": "spark"}, "spark"),
    ("sail", None, None, {"KDISSECT_ENGINE": "spark"}, "sail"),
    (None, None, None, {"PYSPARK_GATEWAY_PORT": "1"}, "spark"),     # under spark-submit
])
def test_which_engine_runs(monkeypatch, engine, master, remote, env, chosen):
    for name in ("KDISSECT_ENGINE", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert preflight.engine_for(engine, master, remote) == chosen


def test_engine_choices_that_contradict_themselves_are_one_line(decoded):
    one_line(*kdissect("analyze", str(decoded), "--engine", "sail", "--master", "local[2]"), 2,
             "--master local[2] runs JVM Spark, --engine sail the embedded engine: give one")
    one_line(*kdissect("analyze", str(decoded), "--engine", "spark", "--remote", "sc://localhost:1"), 2,
             "--engine and --remote both given")
    one_line(*kdissect("analyze", str(decoded), env={"KDISSECT_ENGINE": "duckdb"}), 2,
             "KDISSECT_ENGINE 'duckdb': expected one of sail, spark")


def test_a_pyspark_the_embedded_engine_does_not_serve_is_one_line(monkeypatch):
    import pyspark
    monkeypatch.setattr(pyspark, "__version__", "9.1.0")
    with pytest.raises(SparkUnavailable, match="serves pyspark up to 4.2, this is pyspark 9.1.0: pip install "
                                               ".*or run JVM Spark with --engine spark"):
        preflight.check_start()


def test_a_connect_server_that_is_not_there_is_one_line(decoded):
    port = closed_port()
    proc, seconds = kdissect("analyze", str(decoded), "--remote", f"sc://127.0.0.1:{port}")
    one_line(proc, seconds, 1, f"Spark Connect server sc://127.0.0.1:{port} is unreachable",
             "kdissect spark-server start")
    # The environment variable is the same as --remote; --master beside it is a contradiction.
    proc, seconds = kdissect("doctor", str(CAPTURE), env={"KDISSECT_SPARK_REMOTE": f"sc://127.0.0.1:{port}"})
    one_line(proc, seconds, 4, "is unreachable")        # doctor itself could not work
    proc, seconds = kdissect("analyze", str(decoded), "--master", "local[1]", "--remote", "sc://localhost")
    one_line(proc, seconds, 2, "--master and --remote (or KDISSECT_SPARK_REMOTE) both given")
    proc, seconds = kdissect("analyze", str(decoded), "--remote", "localhost:15002")
    one_line(proc, seconds, 2, "invalid Spark Connect URL 'localhost:15002': expected sc://HOST:PORT")


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "foo.bar=1"], "unknown rule 'foo'"),
    (["--set", "producer.acks.min_requests=lots"], "expected a number"),
    (["--rules", "/nonexistent/rules.toml"], "/nonexistent/rules.toml"),
    (["--window", "fortnight"], "--window 'fortnight': expected an interval such as '10 seconds'"),
    (["--window", "0 seconds"], "the window must be longer than 0"),
    (["--since", "2024-05-02", "--until", "2024-05-01"], "is not before --until"),
    (["--conf", "spark.sql.shuffle.partitions"], "expected KEY=VALUE"),
    (["--json", "/nonexistent/dir/out.json"], "directory /nonexistent/dir does not exist"),
    (["--out", str(SAMPLE)], "is a file, expected a directory"),
    (["--limit", "-1"], "expected 0 or more rows"),
])
def test_what_can_be_wrong_without_spark_answers_before_it_starts(decoded, args, message):
    one_line(*kdissect("analyze", str(decoded), *args), 2, message)


def test_paths_are_checked_before_spark_starts(tmp_path):
    one_line(*kdissect("analyze", str(tmp_path / "nope")), 2, "nope: no such directory")


def test_check_master_accepts_what_spark_accepts():
    for master in ("local", "local[1]", "local[*]", "local[4,2]", "local-cluster[2,1,1024]", "yarn",
                   "k8s://https://10.0.0.1:6443"):
        assert preflight.check_master(master) == []
    assert preflight.check_master("spark://a:7077,b:7078") == [("a", 7077), ("b", 7078)]
    assert preflight.check_remote("sc://h") == ("h", preflight.CONNECT_PORT)
    assert preflight.check_remote("sc://h:1234/;token=x") == ("h", 1234)
    with pytest.raises(AnalysisError, match="invalid Spark master 'mesos'"):
        preflight.check_master("mesos")
