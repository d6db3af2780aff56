"""One local Spark session for the whole test run, and builders for tiny tables."""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import sys

import pytest
from pyspark.sql import DataFrame, SparkSession

from analysis import dataset
from analysis.session import LONG_RUNNING, conf_for_size

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    """A timestamp ``seconds`` after T0 (aware, so the host's timezone cannot shift it)."""
    return T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(scope="session")
def spark():
    # Later tests (the Spark decode's Python tasks) get this session back from getOrCreate: its workers
    # must be this Python, with kdissect's dependencies, not whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[1]").appName("kdissect-analysis-tests")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.default.parallelism", "1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "2g")
               # Spark sizes a memory page from the heap (64 MB here), and every broadcast join's hash
               # table takes at least one: tests' tables are tiny.
               .config("spark.buffer.pageSize", "4m")
               .config(map=LONG_RUNNING)
               .config(map=conf_for_size(0))         # what a small input's analysis runs with
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def embedded():
    """The embedded engine for the whole test run (its tests compare it with the JVM session ``spark``). A
    test builds its queries under ``tests.analysis.engines.connect_mode(True)``: the classic session's
    tests run with pyspark's Connect mark lifted, as it is between them."""
    from analysis.session import CONNECT_MODE_ENV, start_embedded
    from tests.analysis.engines import connect_mode
    running = start_embedded("kdissect-analysis-tests-embedded")
    os.environ.pop(CONNECT_MODE_ENV, None)
    yield running
    with connect_mode(True):
        running.stop()


@pytest.fixture(scope="session")
def sample_datasets(tmp_path_factory):
    """Every bundled sample decoded once for the test run (:mod:`tests.analysis.samples`): its dataset by name."""
    from tests.analysis.samples import decode_all
    return decode_all(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module", autouse=True)
def _free_jvm_objects():
    """Each module's py4j objects (which sit in reference cycles) released at its end, with the JVM plans
    they pin, rather than whenever Python's cycle collector next looks at old objects."""
    yield
    gc.collect()


def table(spark: SparkSession, name: str, rows: list[dict]) -> DataFrame:
    """A DataFrame with the dataset's schema for ``name``; columns a row leaves out are null.

    ``request``/``response`` given as dicts are written as the JSON text the dataset holds.
    """
    schema = dataset.SCHEMAS[name]

    def cell(row: dict, field: str):
        value = row.get(field)
        return json.dumps(value) if field in ("request", "response") and isinstance(value, dict) else value

    return spark.createDataFrame([tuple(cell(r, f.name) for f in schema.fields) for r in rows], schema)


def exchange(cid: int, api: str, *, api_key: int, t: float = 0.0, latency: float | None = 1.0, client="c1",
             conn="k1", broker=("10.0.0.9", 9092), status="ok", error=0, error_name=None, version=1,
             request=None, response=None, capture="cap") -> dict:
    """An exchanges row: request at ``t`` seconds, response ``latency`` ms later (None: no response)."""
    return {"capture": capture, "connection": conn, "correlation_id": cid, "api_key": api_key, "api_name": api,
            "api_version": version, "client_id": client, "broker_ip": broker[0], "broker_port": broker[1],
            "request_ts": at(t), "response_ts": None if latency is None else at(t + latency / 1000),
            "latency_ms": latency, "status": status,
            "error_code": None if latency is None else error,
            "error_name": None if latency is None else (error_name or ("NONE" if error == 0 else f"E{error}")),
            "request": request, "response": response, "inferred": False, "request_bytes": 100}


def part(cid: int, api: str, api_key: int, direction: str, topic: str, partition: int, *, t: float = 0.0,
         conn="k1", capture="cap", **cols) -> dict:
    """A partitions row."""
    return {"capture": capture, "connection": conn, "correlation_id": cid, "api_key": api_key, "api_name": api,
            "direction": direction, "ts": at(t), "topic": topic, "partition": partition, **cols}
