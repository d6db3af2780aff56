"""The column helpers the jobs share, held to the same answers on both engines: exact nearest-rank
percentiles, and the filter on a higher-order function's result (``where_lambda``) that the embedded
engine cannot run as a plain ``where``."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis import frames
from tests.analysis.engines import connect_mode


def nearest_rank(values: list[float], p: float) -> float | None:
    """The definition, in plain Python: the value at rank ceil(p * n) of the sorted values."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    return ordered[max(1, math.ceil(round(p * len(ordered), 9))) - 1]


GROUPS = {"a": [0.343, 0.751], "b": [float(v) for v in range(1, 101)], "c": [5.0], "d": [None, 2.0, 1.0, None],
          "e": [None]}
PS = (0.5, 0.9, 0.99, 0.999, 1.0)


def percentiles_table(session):
    rows = [(g, v) for g, values in GROUPS.items() for v in values]
    df = session.createDataFrame(rows, "g string, v double")
    values = frames.sorted_values("v")
    out = df.groupBy("g").agg(*[frames.nearest_rank(values, p).alias(f"p{i}") for i, p in enumerate(PS)])
    return {r["g"]: [r[f"p{i}"] for i in range(len(PS))] for r in out.collect()}


def test_percentiles_are_nearest_rank_values_of_the_data_on_both_engines(spark, embedded):
    want = {g: [nearest_rank(values, p) for p in PS] for g, values in GROUPS.items()}
    assert want["a"][0] == 0.343 and want["b"][2] == 99.0 and want["e"] == [None] * len(PS)
    with connect_mode(False):
        assert percentiles_table(spark) == want
    with connect_mode(True):
        assert percentiles_table(embedded.session) == want


def test_a_percentile_over_a_window_is_the_group_s(spark, embedded):
    def run(session):
        df = session.createDataFrame([("t", 1, 10), ("t", 2, 30), ("t", 3, 20), ("u", 1, 7)], "k string, i int, b long")
        w = Window.partitionBy("k")
        return sorted(map(tuple, df.select("k", "i", frames.percentile("b", 0.5, w).alias("m")).collect()))
    with connect_mode(False):
        jvm = run(spark)
    with connect_mode(True):
        sail = run(embedded.session)
    assert jvm == sail == [("t", 1, 20), ("t", 2, 20), ("t", 3, 20), ("u", 1, 7)]


def test_a_percentile_outside_0_to_1_is_refused():
    with pytest.raises(ValueError, match="expected 0 < p <= 1"):
        frames.nearest_rank(F.array(), 0)


def test_where_lambda_keeps_the_rows_where_would_on_both_engines(spark, embedded):
    def run(session):
        df = session.createDataFrame([(1, [1, 2]), (2, []), (3, None), (4, [5])], "id int, xs array<int>")
        doubled = df.select("id", F.transform("xs", lambda x: x * 2).alias("ys"))
        return sorted(r["id"] for r in frames.where_lambda(doubled, F.exists("ys", lambda y: y > 3)).collect())
    with connect_mode(False):
        assert run(spark) == [1, 4]     # id 3's null array: exists is null, and null is not true
    with connect_mode(True):
        assert run(embedded.session) == [1, 4]
