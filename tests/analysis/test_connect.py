"""The analysis on a real Spark Connect server, started by ``kdissect spark-server --engine spark`` from the
pyspark install (its ``start-connect-server.sh``) on 127.0.0.1: every job's tables equal a local run's, row
for row; the URL works as ``--remote`` and as ``KDISSECT_SPARK_REMOTE``, for ``analyze`` and ``doctor``; and
the server stops. The server reads the datasets from this machine's file system, as it would on a laptop.
(Sail's server, the default engine: test_sail_server.py.)
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import dataset as dataset_module
from analysis import jobs, output, schedule

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLES = [REPO / "samples" / "mixed.pcap", REPO / "samples" / "tansu-consume-group.pcap",
           REPO / "samples" / "mock-transactions.pcap"]
CAPTURE = REPO / "samples" / "findings" / "findings-acks0.pcap"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    # The server's state (pid, logs, URL) in a directory of the test's own, not the user's cache.
    cache = tmp_path_factory.mktemp("connect-cache")
    return {**os.environ, "KDISSECT_CACHE_DIR": str(cache),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def kdissect(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kdissect", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False, env=env)


@pytest.fixture(scope="module")
def server(env):
    port = free_port()
    started = kdissect(env, "spark-server", "start", "--engine", "spark", "--port", str(port), timeout=400)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        url = kdissect(env, "spark-server", "url").stdout.strip()
        assert url.startswith(f"sc://localhost:{port}/;token=") and url in started.stdout
        yield url
    finally:
        stopped = kdissect(env, "spark-server", "stop", timeout=120)
        assert stopped.returncode == 0 and stopped.stdout.strip() in ("stopped", "no Spark Connect server was running")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    import kdissect as kd
    out = tmp_path_factory.mktemp("connect") / "ds"
    kd.write_dataset([str(p) for p in SAMPLES], out)
    return out


def local_results(spark, dataset: Path) -> dict:
    return output.as_json(schedule.analyze(spark, schedule.Request([str(dataset)]), jobs.JOBS))


def test_every_table_on_a_connect_server_equals_the_local_one(spark, server, env, dataset, tmp_path):
    out = tmp_path / "remote.json"
    proc = kdissect(env, "analyze", str(dataset), "--remote", server, "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    remote = json.loads(out.read_text())
    local = local_results(spark, dataset)
    assert set(remote) == set(local) and len(local) >= 25
    for name in local:
        assert remote[name] == local[name], name
    assert local["findings"] and local["latency_by_api"] and local["rebalances"]   # not a comparison of nothing


def test_the_environment_variable_works_as_remote_for_doctor_and_the_server_status(server, env, tmp_path):
    out = tmp_path / "doctor.json"
    proc = kdissect({**env, "KDISSECT_SPARK_REMOTE": server}, "doctor", str(CAPTURE), "--json", str(out))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]   # 1: a critical finding, which is an answer
    found = {row["finding"] for row in json.loads(out.read_text())["findings"]}
    assert "producer.acks" in found
    status = kdissect(env, "spark-server", "status")
    assert status.returncode == 0 and status.stdout.startswith("running (pid ") and ", spark): " in status.stdout
    again = kdissect(env, "spark-server", "start", "--engine", "spark", "--port", str(free_port()))
    assert again.returncode == 1 and "already running" in again.stderr and again.stderr.count("\n") == 1


# Run in a process of its own: there the server's session is the only Spark Connect session, as in a command.
_CHECKPOINTS = """
import json, sys
from analysis import schedule, session
remote = session.start("kdissect-test-checkpoints", remote=sys.argv[1])
try:
    ds, _ = schedule.prepare(remote.session, schedule.Request([sys.argv[2]]), checkpoints=remote.keeps_checkpoints())
    try:
        seen = {"frees": session.frees_checkpoints(remote.session), "keeps": remote.keeps_checkpoints(),
                "owned": remote.owned, "level": ds.checkpoint, "persisted": [k.persisted for k in ds.kept],
                "rows": [ds.exchanges.count(), ds.kept[0].frame.count()]}
    finally:
        ds.release()
    seen["left"] = len(ds.kept)
finally:
    remote.stop()
print(json.dumps(seen))
"""


def test_a_kdissect_server_frees_checkpoints_so_analyses_on_it_keep_checkpoints(spark, server, env, dataset):
    """kdissect's server collects its garbage every minute, which frees an analysis' local checkpoints:
    analyses on it keep their frames as checkpoints (no columnar cache to build, no reader classes to
    compile in every query); a Spark that collects only every 30 minutes (Spark's default) gets
    persisted frames, which the analysis unpersists as it ends."""
    from analysis import session
    run = subprocess.run([sys.executable, "-c", _CHECKPOINTS, server, str(dataset)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["frees"] and seen["keeps"] and not seen["owned"] and seen["level"] == "MEMORY_AND_DISK_DESER"
    assert seen["persisted"] and not any(seen["persisted"])       # every kept frame a checkpoint
    assert seen["rows"][0] == seen["rows"][1] > 0 and seen["left"] == 0
    assert not session.frees_checkpoints(spark) and not session.Spark(spark).keeps_checkpoints()


def test_a_second_connect_session_in_a_process_persists_what_it_keeps(server, dataset, embedded):
    """pyspark binds a Spark Connect checkpoint to the process's first session: with the embedded engine's
    session already there, an analysis on the server persists its frames instead, and still answers."""
    from analysis import session
    remote = session.start("kdissect-test-second-session", remote=server)
    try:
        assert not dataset_module.checkpoint_stays_on(remote.session)
        ds, _ = schedule.prepare(remote.session, schedule.Request([str(dataset)]), checkpoints=remote.keeps_checkpoints())
        try:
            assert ds.kept and all(k.persisted for k in ds.kept)
            assert ds.exchanges.count() == ds.kept[0].frame.count() > 0
        finally:
            ds.release()
        assert not ds.kept
    finally:
        remote.stop()


def test_the_jvm_server_without_java_is_one_line(tmp_path):
    """--engine spark still checks Java first: no Java is the one line saying what to install, and no
    server state is left behind."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update({"KDISSECT_CACHE_DIR": str(tmp_path / "cache"), "PATH": str(Path(sys.executable).parent),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    proc = kdissect(env, "spark-server", "start", "--engine", "spark", "--port", str(free_port()), "--memory", "2g")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("kdissect: Spark needs Java 17 or newer and none was found: install a Java")
    assert proc.stderr.count("\n") == 1
    assert kdissect(env, "spark-server", "status").stdout.strip() == "not running"
