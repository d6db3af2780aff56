"""The report's figure builders on tiny hand-made rows, with answers worked out by hand."""

from __future__ import annotations

import datetime as dt

import pytest

from analysis import report_charts as charts


def test_timestamps_in_every_iso_form_become_utc() -> None:
    want = dt.datetime(2026, 11, 23, 19, 30, 1, 123456, tzinfo=dt.timezone.utc)
    for text in ("2026-11-23T19:30:01.123456Z", "2026-11-23T20:30:01.123456+01:00", "2026-11-23 19:30:01.123456"):
        assert charts.parse_ts(text) == want
    assert charts.plotly_ts(want) == "2026-11-23 19:30:01.123456"
    assert charts.parse_ts("yesterday") is None and charts.parse_ts(None) is None and charts.parse_ts(5) is None


def test_cdf_accumulates_bucket_counts_in_latency_order() -> None:
    rows = [{"api_name": "Fetch", "bucket_low_ms": 4, "bucket_high_ms": 8, "count": 1},
            {"api_name": "Fetch", "bucket_low_ms": 1, "bucket_high_ms": 2, "count": 2},
            {"api_name": "Fetch", "bucket_low_ms": 2, "bucket_high_ms": 4, "count": 1},
            {"api_name": "Fetch", "bucket_low_ms": 8, "bucket_high_ms": 16, "count": 0}]
    fig = charts.latency_cdf(rows)
    assert fig is not None
    (trace,) = fig["data"]
    assert trace["x"] == [1, 2, 4, 8] and trace["y"] == [0.0, 0.5, 0.75, 1.0]
    assert trace["name"] == "Fetch (4)" and fig["layout"]["xaxis"]["type"] == "log"


def test_latency_over_time_orders_apis_worst_first_and_drops_non_positive_values_on_the_log_axis() -> None:
    rows = [{"window_start": "2026-11-23T19:00:00Z", "api_name": "Produce", "p50_ms": 1.0, "p99_ms": 3.0},
            {"window_start": "2026-11-23T19:01:00Z", "api_name": "Produce", "p50_ms": 0.0, "p99_ms": 2.0},
            {"window_start": "2026-11-23T19:00:00Z", "api_name": "JoinGroup", "p50_ms": 3000.0, "p99_ms": 3100.0}]
    fig = charts.latency_over_time(rows)
    assert fig is not None
    assert [t["name"] for t in fig["data"]] == ["JoinGroup", "Produce"]
    assert fig["data"][1]["y"] == [3.0, 2.0]
    p50 = next(b for b in fig["layout"]["updatemenus"][0]["buttons"] if b["label"] == "p50")
    assert p50["args"][0]["y"] == [[3000.0], [1.0, None]]


def test_gantt_spans_rebalances_and_the_generations_members_hold() -> None:
    rebalances = [
        {"group_id": "g", "generation_id": 1, "start_ts": "2026-11-23T19:00:00Z", "end_ts": "2026-11-23T19:00:03Z",
         "members": 1, "member_client_ids": ["a"]},
        {"group_id": "g", "generation_id": 2, "start_ts": "2026-11-23T19:00:10Z", "end_ts": "2026-11-23T19:00:12.5Z",
         "members": 2, "member_client_ids": ["a", "b"], "errors": ["REBALANCE_IN_PROGRESS"]},
        {"group_id": "h", "generation_id": 7, "start_ts": "2026-11-21T05:00:00Z", "end_ts": "2026-11-21T05:00:01Z",
         "members": 1, "member_client_ids": ["<c>"]},
    ]
    members = [{"group_id": "g", "generation_id": 2, "member_id": "a-1", "client_id": "a",
                "assigned_partitions": ["t-0"]},
               {"group_id": "g", "generation_id": 2, "member_id": "a-2", "client_id": "a",
                "assigned_partitions": ["t-1"]}]
    commits = [{"group_id": "g", "ts": "2026-11-23T19:00:20Z"}]
    seen = charts.group_last_seen(rebalances, commits)
    assert seen["g"] == charts.parse_ts("2026-11-23T19:00:20Z")
    (g, n, fig), (h, m, other) = charts.rebalance_gantts(rebalances, members, seen)
    assert (g, n, h, m) == ("g", 2, "h", 1)
    held, reb = fig["data"]
    assert reb["x"] == [3000.0, 2500.0] and reb["base"][1] == "2026-11-23 19:00:10.000000"
    assert "REBALANCE_IN_PROGRESS" in reb["hovertext"][1]
    # generation 1 (from member_client_ids): held from its end to generation 2's start, 7 s;
    # generation 2 (from group_members, two members sharing a client id): until the last commit, 7.5 s.
    assert held["x"] == [7000.0, 7500.0, 7500.0]
    assert held["y"] == ["a", "a (a-1)", "a (a-2)"]
    assert fig["layout"]["yaxis"]["categoryarray"] == ["<i>rebalancing</i>", "a", "a (a-1)", "a (a-2)"]
    # Group h was seen only during its rebalance: a sliver (1% of its 1 s span, at least 50 ms), escaped lane.
    held_h, _ = other["data"]
    assert held_h["y"] == ["&lt;c&gt;"] and held_h["x"] == [50.0]
    assert charts.rebalance_gantts([], []) == []


def test_lag_bars_worst_first_and_caught_up_partitions_counted() -> None:
    rows = [{"group_id": "g", "topic": "t", "partition": 0, "lag": 0},
            {"group_id": "g", "topic": "t", "partition": 1, "lag": 7},
            {"group_id": "g", "topic": "t", "partition": 2, "lag": 3},
            {"group_id": None, "client_id": "c", "topic": "t", "partition": 1, "lag": 9},
            {"group_id": "h", "topic": "t", "partition": 2, "lag": None}]
    fig = charts.lag_per_partition(rows)
    assert fig is not None
    assert fig["layout"]["yaxis"]["categoryarray"] == ["t-1 · client c", "t-1 · g", "t-2 · g"]
    assert [(t["name"], t["x"]) for t in fig["data"]] == [("client c", [9.0]), ("g", [7.0, 3.0])]
    assert "1 partition rows at lag 0" in fig["layout"]["xaxis"]["title"]["text"]
    assert charts.lag_per_partition([{"group_id": "g", "lag": 0}]) is None  # nothing to draw: the page says why


def test_errors_stack_per_error_and_api() -> None:
    rows = [{"window_start": "2026-11-23T19:00:00Z", "api_name": "Heartbeat", "error_name": "REBALANCE_IN_PROGRESS",
             "count": 2},
            {"window_start": "2026-11-23T19:01:00Z", "api_name": "Heartbeat", "error_name": "REBALANCE_IN_PROGRESS",
             "count": 1},
            {"window_start": "2026-11-23T19:01:00Z", "api_name": "Fetch", "error_name": "<x>", "count": 5}]
    fig = charts.errors_over_time(rows)
    assert fig is not None and fig["layout"]["barmode"] == "stack"
    assert [(t["name"], t["y"]) for t in fig["data"]] == [("&lt;x&gt; · Fetch", [5.0]),
                                                         ("REBALANCE_IN_PROGRESS · Heartbeat", [2.0, 1.0])]


def test_throughput_switches_between_records_and_bytes() -> None:
    rows = [{"window_start": "2026-11-23T19:00:00Z", "topic": "t", "produced_records": 3, "produced_bytes": 300,
             "fetched_records": 0, "fetched_bytes": 0}]
    fig = charts.throughput_over_time(rows)
    assert fig is not None
    assert [t["name"] for t in fig["data"]] == ["t · produced"]  # nothing fetched: no empty line
    by_label = {b["label"]: b["args"][0]["y"] for b in fig["layout"]["updatemenus"][0]["buttons"]}
    assert by_label == {"records": [[3.0]], "bytes": [[300.0]]}


@pytest.mark.parametrize("builder", [charts.latency_over_time, charts.latency_cdf, charts.errors_over_time,
                                     charts.throughput_over_time, charts.lag_per_partition])
def test_nothing_to_draw_gives_no_figure(builder) -> None:  # type: ignore[no-untyped-def]
    assert builder([]) is None
    assert builder([{"window_start": None, "count": None, "lag": None}]) is None


def test_many_series_are_bounded() -> None:
    rows = [{"window_start": f"2026-11-23T19:{m:02d}:00Z", "topic": f"t{t}", "produced_records": t + 1,
             "produced_bytes": 100 * (t + 1)} for t in range(500) for m in range(3)]
    fig = charts.throughput_over_time(rows)
    assert fig is not None and len(fig["data"]) == charts.MAX_TRACES // 2
    assert fig["data"][0]["name"] == "t499 · produced"  # the busiest topics are the ones kept
    visible = [t for t in fig["data"] if t.get("visible") != "legendonly"]
    assert len(visible) == charts.MAX_SERIES
