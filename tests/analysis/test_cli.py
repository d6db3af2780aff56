"""How the jobs are run: ``spark-submit`` of a job module, and the progress line of ``kdissect analyze``."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kdissect
from analysis import jvm, output, runner
from analysis.jobs import errors
from tests.analysis.test_session import LOGGED

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "tansu-admin-errors.pcap"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "ds"
    kdissect.write_dataset([SAMPLE], out)
    return out


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def _csv_lines(directory: Path) -> dict[str, list[str]]:
    return {f.name: sorted(f.read_text().splitlines()) for f in sorted(directory.glob("*.csv"))}


def test_spark_submit_of_a_job_module_writes_what_the_job_computes(spark, dataset: Path, tmp_path: Path) -> None:
    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists():
        submit = Path(shutil.which("spark-submit") or "spark-submit")
    out = tmp_path / "submitted"
    p = subprocess.run([str(submit), "--master", "local[1]", str(REPO / "analysis" / "jobs" / "errors.py"), str(dataset),
                        "--out", str(out), "--format", "csv"],
                       capture_output=True, text=True, timeout=600, env=_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "errors: errors" in p.stdout and "Traceback" not in p.stderr
    # The same job in this process, on the tests' Spark session: the same tables, row for row.
    here = tmp_path / "here"
    assert runner.run_job("errors", errors.tables, [str(dataset), "--out", str(here), "--format", "csv"],
                          out=io.StringIO(), spark=spark) == 0
    submitted = _csv_lines(out)
    assert set(submitted) == {"errors.csv", "errors_over_time.csv"}
    assert submitted == _csv_lines(here)
    assert len(submitted["errors.csv"]) > 1            # the sample's clients met errors: rows beyond the header


def test_progress_line_only_on_a_terminal(dataset: Path, tmp_path: Path) -> None:
    # Not a terminal: nothing written by the indicator.
    quiet = output.Progress(io.StringIO(), "analyze")
    quiet(1, 3, "errors")
    quiet.clear()
    assert not quiet.enabled and quiet.stream.getvalue() == ""
    # A real pseudo-terminal as stderr: the line appears while Spark works, and is cleared at the end.
    primary, secondary = pty.openpty()
    # Spark logging everything it logs: none of it on the terminal.
    p = subprocess.Popen([sys.executable, "-m", "kdissect", "analyze", str(dataset), "--master", "local[1]"],
                         stdout=subprocess.PIPE, stderr=secondary, stdin=subprocess.DEVNULL,
                         env={**_env(), "KDISSECT_SPARK_LOG": "INFO"}, cwd=tmp_path)
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:        # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif p.poll() is not None:
            break
    os.close(primary)
    stdout = p.communicate(timeout=60)[0].decode()
    assert p.returncode == 0, seen.decode(errors="replace")[-2000:]
    text = seen.decode(errors="replace")
    assert "analyze: starting Spark" in text
    counts = re.findall(r"analyze: (\d+)/(\d+) tables", text)
    assert counts and counts[-1][0] == counts[-1][1]       # it counts up to every table
    assert "tables (latency_by_api)" in text
    assert text.endswith("\r" + " " * 79 + "\r")          # and is wiped before the results are printed
    assert "analyze: " not in stdout and "exchanges" in stdout
    # Nothing from the JVM's start breaks the line (its incubator-module warning did), nor anything Spark
    # logs (an error it recovered from printed a stack trace): that is in the run's log file.
    assert "WARNING" not in text and "\n" not in text.replace("\r\n", "")
    assert not LOGGED.search(text), text[-2000:]
    log = jvm.cache_dir() / "logs" / f"spark-{p.pid}.log"
    try:
        assert " INFO " in log.read_text()
    finally:
        log.unlink(missing_ok=True)
    # What was read comes first: a dataset holding more than the user thinks says so.
    assert stdout.startswith(f"read 1 capture and 32 exchanges from {dataset}: 4 connections, "), stdout[:300]
