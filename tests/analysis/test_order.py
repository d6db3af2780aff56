"""A table's rows come out in one order whatever the partitioning and join strategy: each sort ends with
the table's keys.

Rows tied on a table's leading sort columns (two clients with one error each, two topics with the same
p99) used to come out in whichever order the plan produced them, so the same analysis differed between
a local run, a Spark Connect server and another ``spark.sql.shuffle.partitions``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import jobs, output, schedule

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "mixed.pcap"   # ./run-sample.sh's


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    import kdissect
    out = tmp_path_factory.mktemp("order") / "mixed"
    kdissect.write_dataset([str(SAMPLE)], out)
    return out


def test_every_table_is_row_for_row_the_same_whatever_the_partitions_and_joins(spark, dataset):
    """One shuffle partition and sort-merge joins (a small input's settings) against three partitions and
    broadcast joins (a large input's)."""
    large = {"spark.sql.shuffle.partitions": "3", "spark.sql.autoBroadcastJoinThreshold": "10485760"}
    before = {key: spark.conf.get(key) for key in large}
    assert before["spark.sql.autoBroadcastJoinThreshold"] == "-1"
    try:
        one = output.as_json(schedule.analyze(spark, schedule.Request([str(dataset)]), jobs.JOBS))
        for key, value in large.items():
            spark.conf.set(key, value)
        three = output.as_json(schedule.analyze(spark, schedule.Request([str(dataset)], conf=large), jobs.JOBS))
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    assert {key: spark.conf.get(key) for key in large} == before
    # The sample has the ties this is about: three consumers each met MEMBER_ID_REQUIRED once.
    assert [r["count"] for r in one["errors"]] == [1, 1, 1]
    assert len({r["client_id"] for r in one["errors"]}) == 3
    assert [name for name in one if one[name] != three[name]] == []
