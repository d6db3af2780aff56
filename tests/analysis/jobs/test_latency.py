from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis.jobs import latency
from tests.analysis.conftest import at, exchange, part, table

pytestmark = pytest.mark.slow

STATS = "count long, mean_ms double, p50_ms double, p90_ms double, p99_ms double, p999_ms double, max_ms double"


def produce(cid, lat, t=0.0, **kw):
    return exchange(cid, "Produce", api_key=0, latency=lat, t=t, version=9, **kw)


def fetch(cid, lat, t=0.0, max_wait=500, **kw):
    return exchange(cid, "Fetch", api_key=1, latency=lat, t=t, version=12, client="c2",
                    request={"max_wait_ms": max_wait, "topics": []}, **kw)


@pytest.fixture(scope="module")
def rows(spark):
    ex = [produce(i + 1, lat, t=i) for i, lat in enumerate([4.0, 1.0, 100.0, 3.0, 2.0])]
    ex += [produce(6, None, t=5, status="no_response_expected"),   # acks=0: no latency at all
           fetch(10, 499.0, t=70),                                   # empty and waited 499/500 ms: idle
           fetch(11, 480.0, t=71, broker=("10.0.0.8", 9093)),        # 480 >= 0.9 * 500: idle too
           fetch(12, 499.0, t=72),                                   # carried a record: real work
           fetch(13, 20.0, t=73)]                                    # empty but answered fast: counts
    parts = [part(12, "Fetch", 1, "response", "t", 0, t=72.5, record_count=1),
             part(13, "Fetch", 1, "response", "t", 0, t=73, record_count=0),
             part(3, "Produce", 0, "request", "a", 0), part(3, "Produce", 0, "request", "a", 1),
             part(3, "Produce", 0, "request", "b", 0), part(1, "Produce", 0, "request", "a", 0)]
    parts_df = table(spark, "partitions", parts)
    return latency.classified(table(spark, "exchanges", ex), parts_df), parts_df


def test_percentiles_are_observed_values_and_idle_fetches_are_left_out(spark, rows):
    classified, _ = rows
    # Produce: sorted 1,2,3,4,100 -> p50 is the 3rd value, p90/p99/p99.9 the 5th; mean 110/5.
    assertDataFrameEqual(latency.by_api(latency.timed(classified)), spark.createDataFrame(
        [("Produce", 9, 5, 22.0, 3.0, 100.0, 100.0, 100.0, 100.0),
         ("Fetch", 12, 2, 259.5, 20.0, 499.0, 499.0, 499.0, 499.0)],
        f"api_name string, api_version int, {STATS}"))


def test_a_fetch_that_asks_no_wait_is_timed(spark):
    # Kafka 0.7's Fetch has no max_wait_ms: it asked for no wait, so it is no idle long-poll.
    ex = table(spark, "exchanges", [exchange(1, "Fetch", api_key=1, latency=7.0, version=0, request={"topics": []})])
    classified = latency.classified(ex, table(spark, "partitions", []))
    assert [r["idle"] for r in classified.collect()] == [False]
    assert latency.timed(classified).count() == 1


def test_idle_fetches_are_counted_apart_per_client_and_broker(spark, rows):
    classified, _ = rows
    assertDataFrameEqual(latency.idle_fetches(classified), spark.createDataFrame(
        [("c2", "10.0.0.9:9092", 1, 499.0, 500.0), ("c2", "10.0.0.8:9093", 1, 480.0, 500.0)],
        "client_id string, broker string, count long, mean_ms double, max_wait_ms double"))


def test_by_client_broker_and_topic(spark, rows):
    classified, parts = rows
    busy = latency.timed(classified)
    assertDataFrameEqual(latency.by_client(busy).select("client_id", "count", "p50_ms"), spark.createDataFrame(
        [("c1", 5, 3.0), ("c2", 2, 20.0)], "client_id string, count long, p50_ms double"))
    assertDataFrameEqual(latency.by_broker(busy).select("broker", "count"), spark.createDataFrame(
        [("10.0.0.9:9092", 7)], "broker string, count long"))
    # correlation 3 (100 ms) wrote two partitions of "a" and one of "b": counted once per topic.
    assertDataFrameEqual(latency.by_topic(busy, parts).select("api_name", "topic", "count", "max_ms"),
                         spark.createDataFrame([("Produce", "a", 2, 100.0), ("Produce", "b", 1, 100.0),
                                                ("Fetch", "t", 2, 499.0)],
                                               "api_name string, topic string, count long, max_ms double"))


def test_over_time_histogram_and_size_buckets(spark, rows):
    classified, _ = rows
    busy = latency.timed(classified)
    assertDataFrameEqual(latency.over_time(busy, "1 minute").select("window_start", "api_name", "count", "p50_ms"),
                         spark.createDataFrame([(at(0), "Produce", 5, 3.0), (at(60), "Fetch", 2, 20.0)],
                                               "window_start timestamp, api_name string, count long, p50_ms double"))
    # Four buckets per decade: 1 ms falls in [1, 10^0.25), 100 ms in [100, 10^2.25), 20 ms in [10^1.25, 10^1.5).
    assertDataFrameEqual(latency.histogram(busy).select("api_name", "bucket_low_ms", "count"), spark.createDataFrame(
        [("Produce", 1.0, 1), ("Produce", 1.778279, 2), ("Produce", 3.162278, 1), ("Produce", 100.0, 1),
         ("Fetch", 17.782794, 1), ("Fetch", 316.227766, 1)], "api_name string, bucket_low_ms double, count long"))
    assertDataFrameEqual(latency.by_size(busy).select("size_bucket", "count"),
                         spark.createDataFrame([("< 1 KiB", 5)], "size_bucket string, count long"))


def test_spikes_flag_the_window_far_above_the_median(spark):
    # One request every 0.1 s for 10 s; second 7 holds a 50 ms request among 1 ms ones.
    ex = [produce(i, 50.0 if i == 70 else 1.0, t=i / 10) for i in range(100)]
    windows = latency.over_time(latency.timed(latency.classified(table(spark, "exchanges", ex),
                                                                  table(spark, "partitions", []))), "1 second")
    assertDataFrameEqual(latency.spikes(windows, 3.0, 5).select("window_start", "count", "p99_ms",
                                                                 "baseline_p99_ms", "ratio"),
                         spark.createDataFrame([(at(7), 10, 50.0, 1.0, 50.0)],
                                               "window_start timestamp, count long, p99_ms double, "
                                               "baseline_p99_ms double, ratio double"))
    assert latency.spikes(windows, 3.0, 11).count() == 0  # too few requests in the window
