"""One local Spark session for the whole test run, and builders for tiny tables."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import DataFrame, SparkSession

from analysis import dataset

T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    """A timestamp ``seconds`` after T0 (aware, so the host's timezone cannot shift it)."""
    return T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(scope="session")
def spark():
    session = (SparkSession.builder.master("local[1]").appName("kdissect-analysis-tests")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.default.parallelism", "1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.codegen.wholeStage", "false")
               .config("spark.sql.adaptive.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def table(spark: SparkSession, name: str, rows: list[dict]) -> DataFrame:
    """A DataFrame with the dataset's schema for ``name``; columns a row leaves out are null."""
    schema = dataset.SCHEMAS[name]
    return spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)
