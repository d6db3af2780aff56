"""The live metrics' figures are the analysis' tables: the same rules, streaming (kdissect) and in Spark
(analysis), on every bundled sample decoded into one dataset."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect.metrics.fold import MetricsFold
from tests.analysis.conftest import spark  # noqa: F401 - the shared session fixture

from tests.kdissect.metrics.helpers import PCAPS, live_fold, share_truth

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory) -> tuple[MetricsFold, object]:  # noqa: F811
    from analysis.dataset import load
    out = tmp_path_factory.mktemp("agree") / "out"
    fold, _ = live_fold(PCAPS, out)
    return fold, load(spark, [str(out)])


def test_latency_histogram_counts_what_the_latency_tables_count(both) -> None:
    from pyspark.sql import functions as F

    from analysis import derived
    from analysis.jobs import latency
    fold, ds = both
    rows = latency.classified(ds.exchanges, ds.partitions)
    busy = latency.timed(rows)
    got = {(r["api"], r["broker"]): (r["n"], r["s"]) for r in busy.groupBy(
        F.coalesce("api_name", F.lit("unknown")).alias("api"), derived.broker().alias("broker"))
        .agg(F.count(F.lit(1)).alias("n"), (F.sum("latency_ms") / 1000).alias("s")).collect()}
    mine = {k: (sum(h[:-1]), h[-1]) for k, h in fold.durations.items()}
    assert mine.keys() == got.keys()
    for k, (n, s) in got.items():
        assert mine[k][0] == n and mine[k][1] == pytest.approx(s), k
    assert rows.where("idle").count() > 0       # the rule had something to leave out


def test_consumer_lag_equals_the_consumer_lag_table(both) -> None:
    from analysis import derived
    fold, ds = both
    table = {(r["group_id"], r["topic"], r["partition"]): r["lag"]
             for r in derived.consumer_lag(ds.exchanges, ds.partitions).collect()
             if r["group_id"] is not None and r["lag"] is not None}
    assert table and fold.lag() == table


def test_throughput_equals_the_throughput_flows(both) -> None:
    from pyspark.sql import functions as F

    from analysis.jobs import throughput
    fold, ds = both
    flows = throughput.flows(ds.exchanges, ds.partitions)
    sums = {(r["topic"] or "", r["client_id"] or ""): r for r in flows.groupBy("topic", "client_id").agg(
        F.sum("produced_records").alias("pr"), F.sum("produced_bytes").alias("pb"),
        F.sum("fetched_records").alias("fr"), F.sum("fetched_bytes").alias("fb")).collect()}
    for name, column in (("produced_records", "pr"), ("produced_bytes", "pb"), ("fetched_records", "fr"),
                         ("fetched_bytes", "fb")):
        mine = {k: v for k, v in getattr(fold, name).items()}
        theirs = {k: r[column] for k, r in sums.items() if k in mine or r[column]}
        assert mine == theirs, name


def test_rebalances_equal_the_rebalances_table(both) -> None:
    from analysis.jobs import groups
    fold, ds = both
    counts: dict[tuple, int] = {}
    for r in groups.rebalances(ds.exchanges).collect():
        counts[(r["group_id"],)] = counts.get((r["group_id"],), 0) + 1
    assert counts and fold.rebalances == counts


def test_share_counters_equal_the_share_deliveries_table(both) -> None:
    """Per group, topic and client (the table's partitions summed), and on the sample the consumers' own counts."""
    from analysis import derived
    fold, ds = both
    columns = {"acquired": None, "redelivered": None, "accepted": "accept", "released": "release",
               "rejected": "reject"}
    table: dict[str, dict[tuple, int]] = {c: {} for c in columns}
    for r in derived.share_deliveries(ds.exchanges, ds.partitions).collect():
        key = (r["group_id"] or "", r["topic"] or "", r["client_id"] or "")
        for c, kind in columns.items():
            k = key if kind is None else (*key, kind)
            if kind is None or r[c]:
                table[c][k] = table[c].get(k, 0) + r[c]
    acknowledged = {k: v for c in ("accepted", "released", "rejected") for k, v in table[c].items()}
    assert table["acquired"] and fold.shares.acquired_records() == table["acquired"]
    assert fold.shares.redelivered_records() == table["redelivered"]
    assert fold.shares.acknowledged == acknowledged
    truth = share_truth()
    assert {k: v for k, v in acknowledged.items() if k[0] == "kd-share"} == truth["acknowledged"]


def test_share_members_gauge_counts_the_members_the_share_groups_table_has_not_seen_leave(both) -> None:
    from analysis import derived
    fold, ds = both
    table: dict[tuple, int] = {}
    for r in derived.share_members(ds.exchanges, ds.partitions).collect():
        k = (r["group_id"] or "",)
        table[k] = table.get(k, 0) + (r["left_ts"] is None)
    assert table and fold.shares.group_members() == table
