"""A failed Spark task is one line naming its capture, its share and the Python exception, and workers
that import another kdissect than the driver are said before any decoding.

The Spark errors' text is read without Spark first (the forms pyspark 4 raises); the two commands run
Spark for real, each in its own process: the workers' Python and working directory are the point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kdissect.spark.driver import job_failure
from kdissect.spark.fingerprint import PACKAGES, SOURCES, fingerprint
from kdissect.spark.tasks import Task

REPO = Path(__file__).resolve().parents[3]
MIXED = REPO / "samples" / "mixed.pcap"
TASKS = [Task(("/cap/a.pcap",), 0, 1, "a"), Task(("/cap/b.pcap",), 0, 2, "b"), Task(("/cap/b.pcap",), 1, 2, "b")]

# What py4j says of a job a task failed (its Java text, shortened), and what pyspark raises while handling it.
PY4J = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task {index} in stage 1.0 failed 1 "
        "times, most recent failure: Lost task {index}.0 in stage 1.0 (TID 7) (192.0.2.2 executor driver): "
        "{java}\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(...)\n")
TRACEBACK = ("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
             '  File "/x/pyspark/worker.py", line 4327, in invoke_udf\n    run_process()\n'
             '  File "/x/kdissect/spark/decode.py", line 58, in run_task\n'
             "    raise task.failed(exception_line(exc)) from exc\n{last}\n")


class Py4JJavaError(Exception):
    pass


class PythonException(Exception):
    pass


def spark_error(index: int, last: str | None,
                java: str = "org.apache.spark.api.python.PythonException: ...") -> Exception:
    """The exception pyspark raises for a job whose task ``index`` failed: the Python worker's traceback
    ending in ``last``, raised while handling py4j's error (``last`` None: py4j's, no Python traceback)."""
    py4j = Py4JJavaError(PY4J.format(index=index, java=java))
    if last is None:
        return py4j
    exc = PythonException(TRACEBACK.format(last=last))
    exc.__context__, exc.__suppress_context__ = py4j, True        # raise ... from None, in an except block
    return exc


def test_a_task_failure_names_the_capture_the_share_and_the_exception() -> None:
    # What run_task raised: its line is the message.
    line = str(TASKS[2].failed("KdissectError: /out/exchanges: write failed: File too large"))
    assert line == ("the Spark task decoding /cap/b.pcap (share 2 of 2) failed: "
                    "KdissectError: /out/exchanges: write failed: File too large")
    assert str(job_failure(spark_error(2, f"kdissect.spark.tasks.TaskFailed: {line}"), TASKS)) == line
    # Raised outside run_task (unpickling its arguments, say): the task is found from Spark's text.
    err = spark_error(1, "ModuleNotFoundError: No module named 'kdissect.dataset.writer'")
    assert str(job_failure(err, TASKS)) == ("the Spark task decoding /cap/b.pcap (share 1 of 2) failed: "
                                            "ModuleNotFoundError: No module named 'kdissect.dataset.writer'")
    assert str(job_failure(spark_error(0, "KeyError: 0"), TASKS)).endswith("(share 1 of 1) failed: KeyError: 0")
    # A chained traceback: the exception raised last is the cause.
    chained = ("AttributeError: 'Task' has no 'x'\n\nDuring handling of the above exception, another exception "
               "occurred:\n\nTraceback (most recent call last):\n  File \"s.py\", line 1\n"
               "_pickle.PicklingError: Could not serialize")
    assert str(job_failure(spark_error(0, chained), TASKS)).endswith("failed: PicklingError: Could not serialize")


def test_a_worker_that_died_is_named_with_what_spark_says() -> None:
    crashed = "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"
    err = spark_error(1, None, java=crashed)
    assert str(job_failure(err, TASKS)) == ("the Spark task decoding /cap/b.pcap (share 1 of 2) failed: "
                                            "Python worker exited unexpectedly (crashed)")


def test_an_error_raised_on_the_driver_says_its_type() -> None:
    # Reading what the tasks returned: what once was "the Spark job failed: 0".
    assert str(job_failure(KeyError(0), TASKS)) == "the Spark job failed: KeyError: 0"


def copy_of_kdissect(to: Path) -> Path:
    """kdissect's packages, sources only (so pure Python), one file edited: another kdissect."""
    for name in PACKAGES:
        shutil.copytree(REPO / name, to / name, ignore=lambda d, names: [
            n for n in names if not (n.endswith(SOURCES) or (Path(d) / n).is_dir()) or n == "__pycache__"])
    with open(to / "kdissect" / "__init__.py", "a") as f:
        f.write("# another kdissect\n")
    return to


def test_fingerprint_tells_copies_apart_by_sources_not_place(tmp_path: Path) -> None:
    other = copy_of_kdissect(tmp_path / "other")
    python, where, build, sources = fingerprint()
    assert python == sys.executable and Path(where, "kdissect").is_dir() and build in ("compiled", "pure Python")
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
             "from fingerprint import fingerprint; print('|'.join(fingerprint()))")
    run = subprocess.run([sys.executable, "-P", "-c", probe, str(REPO / "kdissect" / "spark"), str(other)],
                         capture_output=True, text=True, check=True)
    there = run.stdout.strip().split("|")
    assert there[1] == str(other) and there[2] == "pure Python" and there[3] != sources
    (other / "kdissect" / "__init__.py").write_bytes((REPO / "kdissect" / "__init__.py").read_bytes())
    again = subprocess.run(run.args, capture_output=True, text=True, check=True).stdout.strip().split("|")
    assert again[3] == sources            # the same sources elsewhere: the same kdissect


def kdissect_command(*args: str) -> list[str]:
    # -P: the driver does not import from its working directory; local workers do (``-m pyspark.daemon``).
    return [sys.executable, "-P", "-m", "kdissect", *args]


@pytest.mark.slow
def test_workers_that_import_another_kdissect_are_one_line(tmp_path: Path) -> None:
    other = copy_of_kdissect(tmp_path / "other")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               PYSPARK_PYTHON=sys.executable)
    env.pop("KDISSECT_SPARK_LOG", None)
    run = subprocess.run(kdissect_command("spark-decode", str(MIXED), "-o", str(out), "--master", "local[1]"),
                         cwd=other, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("kdissect: "), run.stderr
    line = run.stderr.strip()
    assert "the Spark workers run another kdissect than this driver: the driver runs the " in line, line
    assert f"the workers the pure Python one at {other} (sources " in line
    assert f"run it from outside {other}: a local Spark worker imports the kdissect of its working directory" in line
    assert not out.exists()               # found before anything was decoded


@pytest.mark.slow
def test_a_task_that_fails_is_one_line_naming_capture_share_and_cause(tmp_path: Path) -> None:
    # Workers that cannot write more than 16 KiB to a file (a full disk, a quota): every share's Parquet
    # write fails inside the task. Not a capture that does not open: the command failed (exit 1).
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nulimit -f 16\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "out"
    env = dict(os.environ, PYSPARK_PYTHON=str(python),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("KDISSECT_SPARK_LOG", None)
    run = subprocess.run(kdissect_command("spark-decode", str(MIXED), "-o", str(out), "--master", "local[2]",
                                          "--shards", "2"),
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    line = run.stderr.strip()
    assert line.startswith(f"kdissect: the Spark task decoding {MIXED} (share ") and " of 2) failed: " in line, line
    assert line.endswith("File too large") and f": KdissectError: {out}" in line, line
    assert not [f for f in out.rglob("*") if f.is_file()]       # no file of the capture, visible or temporary
