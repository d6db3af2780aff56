from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from pathlib import Path

from analysis import dataset
from analysis.jobs import throughput
from tests.analysis.conftest import at, exchange, part, table
from tests.analysis.engines import connect_mode

SAMPLES = Path(__file__).resolve().parents[3] / "samples"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data(spark):
    ex = table(spark, "exchanges", [
        exchange(1, "Produce", api_key=0, t=0, client="p"),
        exchange(2, "Produce", api_key=0, t=1, client="p"),
        exchange(3, "Produce", api_key=0, t=2, client="p", latency=None, status="no_response_expected"),  # acks=0
        exchange(4, "Produce", api_key=0, t=3, client="p", latency=None, status="no_response"),  # never answered
        exchange(5, "Fetch", api_key=1, t=10, client="c"),
    ])
    parts = table(spark, "partitions", [
        # accepted: 3 records on o-0; rejected: 2 records on o-1
        part(1, "Produce", 0, "request", "o", 0, record_count=3, bytes=300, client_id="p"),
        part(1, "Produce", 0, "request", "o", 1, record_count=2, bytes=200, client_id="p"),
        part(1, "Produce", 0, "response", "o", 0, error_code=0, client_id="p"),
        part(1, "Produce", 0, "response", "o", 1, error_code=6, client_id="p"),
        part(2, "Produce", 0, "request", "o", 0, t=1, record_count=1, bytes=100, client_id="p"),
        part(2, "Produce", 0, "response", "o", 0, t=1, error_code=0, client_id="p"),
        part(3, "Produce", 0, "request", "o", 1, t=2, record_count=4, bytes=400, client_id="p"),
        part(4, "Produce", 0, "request", "o", 1, t=3, record_count=9, bytes=900, client_id="p"),
        # a consumer fetched 4 records of o-0 (one request, two partitions)
        part(5, "Fetch", 1, "response", "o", 0, t=10, record_count=4, bytes=410, error_code=0, client_id="c"),
        part(5, "Fetch", 1, "response", "o", 1, t=10, record_count=0, bytes=0, error_code=0, client_id="c"),
    ])
    return ex, parts


def test_by_topic_counts_only_what_the_broker_accepted_plus_acks0(spark, data):
    ex, parts = data
    # Each partition's rate over its own span: o-0 from 0 to 10 s (3 requests), o-1 from its acks=0 produce
    # at 2 s to the fetch at 10 s (2 requests; its rejected and unanswered produces are not its traffic).
    assertDataFrameEqual(throughput.by_topic(ex, parts), spark.createDataFrame([
        ("o", 0, 4, 400, 0, 4, 410, 3, 0.3),
        ("o", 1, 4, 400, 4, 0, 0, 2, 0.25),
    ], "topic string, partition int, produced_records long, produced_bytes long, acks0_records long, "
       "fetched_records long, fetched_bytes long, requests long, requests_per_s double"))


def test_a_partition_of_one_exchange_has_no_rate(spark):
    ex = table(spark, "exchanges", [exchange(1, "Produce", api_key=0, t=0, client="p"),
                                    exchange(2, "Produce", api_key=0, t=5, client="p")])
    parts = table(spark, "partitions", [
        part(1, "Produce", 0, "request", "once", 0, record_count=1, bytes=10, client_id="p"),
        part(1, "Produce", 0, "response", "once", 0, error_code=0, client_id="p"),
        part(2, "Produce", 0, "request", "twice", 0, t=5, record_count=1, bytes=10, client_id="p"),
        part(2, "Produce", 0, "response", "twice", 0, t=5, error_code=0, client_id="p")])
    # Not 1 request over a second made up for it, nor over the 5 s the dataset spans.
    assert {r.topic: r.requests_per_s for r in throughput.by_topic(ex, parts).collect()} == \
        {"once": None, "twice": None}


# Two real captures recorded days apart: the consumer group's on 2026-11-21, the vanished member's on
# 2026-11-26. A partition's rate is its own traffic over its own span, whatever else the dataset holds.
APART = [SAMPLES / "tansu-consume-group.pcap", SAMPLES / "findings" / "findings-member-vanished.pcap"]


@pytest.fixture(scope="module")
def apart(tmp_path_factory) -> dict[str, Path]:
    import kdissect
    root = tmp_path_factory.mktemp("apart")
    kdissect.write_dataset([str(p) for p in APART], root / "both")
    kdissect.write_dataset([str(APART[0])], root / "one")
    return {"both": root / "both", "one": root / "one"}


def _rates(spark, path: Path) -> dict[tuple[str, int], tuple[int, float]]:
    ds = dataset.load(spark, [str(path)])
    return {(r.topic, r.partition): (r.requests, r.requests_per_s)
            for r in throughput.by_topic(ds.exchanges, ds.partitions).collect()}


def _own_rates(path: Path) -> dict[tuple[str, int], float]:
    """Each partition's Produce and Fetch entries counted by exchange, over its first to last entry, in Python."""
    import pyarrow.parquet as pq
    rows = pq.read_table(path / "partitions").to_pylist()
    accepted = {(r["capture"], r["connection"], r["correlation_id"], r["topic"], r["partition"]) for r in rows
                if r["api_key"] == 0 and r["direction"] == "response" and r["error_code"] == 0}
    seen: dict[tuple[str, int], dict[tuple, object]] = {}
    for r in rows:
        key = (r["capture"], r["connection"], r["correlation_id"], r["topic"], r["partition"])
        if (r["api_key"] == 1 and r["direction"] == "response") or (r["api_key"] == 0 and key in accepted
                                                                      and r["direction"] == "request"):
            seen.setdefault((r["topic"], r["partition"]), {})[key[:3]] = r["ts"]
    out = {}
    for tp, times in seen.items():
        span = (max(times.values()) - min(times.values())).total_seconds()
        out[tp] = len(times) / span if span > 0 else None
    return out


@pytest.mark.parametrize("engine", ["spark", "embedded"])
def test_requests_per_s_is_over_the_partition_s_own_span(request, apart, engine):
    session = request.getfixturevalue(engine)
    with connect_mode(engine == "embedded"):
        spark = session if engine == "spark" else session.session
        both, alone = _rates(spark, apart["both"]), _rates(spark, apart["one"])
    group = {tp: v for tp, v in both.items() if tp[0] == "group-topic"}
    assert group and all(rate is not None and rate > 1 for _, rate in group.values()), group
    # The same as in a dataset of its capture alone, and as counted here from the partition rows.
    assert group == {tp: alone[tp] for tp in group}
    own = _own_rates(apart["both"])
    assert {tp: rate for tp, (_, rate) in both.items()} == pytest.approx(own)


def test_over_time_and_top_clients(spark, data):
    ex, parts = data
    assertDataFrameEqual(throughput.over_time(ex, parts, "5 seconds").select(
        "window_start", "topic", "produced_records", "fetched_records", "requests"), spark.createDataFrame(
        [(at(0), "o", 8, 0, 3), (at(10), "o", 0, 4, 1)],
        "window_start timestamp, topic string, produced_records long, fetched_records long, requests long"))
    assertDataFrameEqual(throughput.top_clients(ex, parts), spark.createDataFrame(
        [("p", 800, 0, 8, 0, 4), ("c", 0, 410, 0, 4, 1)],
        "client_id string, produced_bytes long, fetched_bytes long, produced_records long, fetched_records long, "
        "requests long"))
