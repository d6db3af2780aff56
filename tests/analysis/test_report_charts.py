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


def window(second: int, step: int = 1) -> dict:
    """A window of ``step`` seconds starting ``second`` seconds after 19:00:00."""
    a = dt.datetime(2026, 11, 23, 19, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=second)
    return {"window_start": a.isoformat().replace("+00:00", "Z"),
            "window_end": (a + dt.timedelta(seconds=step)).isoformat().replace("+00:00", "Z")}


def test_the_timeline_is_every_window_from_first_to_last_with_far_apart_captures_cut_out() -> None:
    rows = [window(0), window(3), window(4)]
    tl = charts.timeline(rows)
    assert tl is not None and tl.step == dt.timedelta(seconds=1) and tl.breaks == ()
    assert [t.second for t in tl.starts] == [0, 1, 2, 3, 4]       # 1 and 2 are there, empty
    assert tl.caption() == "5 windows of 1 s each, 19:00:00 to 19:00:05."
    # The capture span widens it to the windows holding its first and last exchange.
    assert len(charts.timeline(rows, first_ts="2026-11-23T18:59:59.5Z").starts) == 6
    # 3 windows with traffic, then 11 empty (more than 10 and than the 3): cut out, and said so.
    far = charts.timeline([window(0), window(1), window(2), window(14)])
    assert [t.second for t in far.starts] == [0, 1, 2, 14]
    assert far.breaks == ((charts.parse_ts(window(3)["window_start"]), charts.parse_ts(window(14)["window_start"])),)
    assert "1 stretch without traffic (the longest 11 s) is cut out of the time axis" in far.caption()
    # ... but a pause of 10 windows within a capture stays on the axis, empty.
    assert len(charts.timeline([window(0), window(11)]).starts) == 12
    # Days apart, one-day windows: each capture's day, the years between cut out.
    days = [window(0, 86400), window(86400 * 400, 86400), window(86400 * 401, 86400)]
    tl = charts.timeline(days)
    assert len(tl.starts) == 3 and len(tl.breaks) == 1 and tl.label == "1 day"
    assert "the longest 399 days" in tl.caption()
    # More windows than a chart can show: none drawn, and the caption says what to do.
    many = charts.timeline([window(0), window(5000)], idle_windows=10_000)
    assert many.starts == () and many.too_many == 5001 and "larger --window" in many.caption()
    assert charts.timeline([]) is None and charts.timeline([{"window_start": None}]) is None


def test_a_single_window_says_so_and_gets_its_width() -> None:
    rows = [{**window(0), "api_name": "Produce", "error_name": "E", "count": 2}]
    tl = charts.timeline(rows)
    assert tl.caption() == "One 1 s window (19:00:00 – 19:00:01): the whole capture falls in it."
    fig = charts.errors_over_time(rows, tl)
    (bar,) = fig["data"]
    assert (bar["x"], bar["width"], bar["offset"]) == (["2026-11-23 19:00:00.000000"], 1000.0, 0)
    lo, hi = fig["layout"]["xaxis"]["range"]
    assert lo < "2026-11-23 19:00:00" and hi > "2026-11-23 19:00:01"  # the whole window in view, a margin around
    assert fig["layout"]["xaxis"]["title"]["text"] == "time (UTC) · windows of 1 s"
    # Sub-second windows read with milliseconds.
    short = charts.timeline([{"window_start": "2026-11-23T19:00:00.250Z", "window_end": "2026-11-23T19:00:00.500Z"}])
    assert short.label == "250 ms" and short.window_text(short.starts[0]) == "19:00:00.250 – 19:00:00.500"


def test_latency_steps_across_each_window_and_breaks_where_an_api_has_none() -> None:
    rows = [{**window(0), "api_name": "Produce", "p50_ms": 1.0, "p99_ms": 3.0, "count": 4},
            {**window(1), "api_name": "Produce", "p50_ms": 0.0, "p99_ms": 2.0, "count": 1},
            {**window(3), "api_name": "Produce", "p50_ms": 1.5, "p99_ms": 5.0, "count": 2},
            {**window(0), "api_name": "JoinGroup", "p50_ms": 3000.0, "p99_ms": 3100.0, "count": 1}]
    fig = charts.latency_over_time(rows)
    assert fig is not None
    assert [t["name"] for t in fig["data"]] == ["JoinGroup", "Produce"]   # the worst api first
    produce = fig["data"][1]
    t = lambda s: f"2026-11-23 19:00:0{s}.000000"  # noqa: E731
    # Windows 0 and 1 join (a step at 19:00:01); window 2 had no Produce: the line stops; window 3 alone.
    assert produce["x"] == [t(0), t(1), t(1), t(2), None, t(3), t(4)]
    assert produce["y"] == [3.0, 3.0, 2.0, 2.0, None, 5.0, 5.0]
    assert produce["connectgaps"] is False and produce["line"]["simplify"] is False
    p50 = next(b for b in fig["layout"]["updatemenus"][0]["buttons"] if b["label"] == "p50")
    # p50 of window 1 is 0: nothing on a log axis, so that window is a gap too.
    assert p50["args"][0]["y"][1] == [1.0, 1.0, None, 1.5, 1.5]
    assert p50["args"][0]["x"][1] == [t(0), t(1), None, t(3), t(4)]
    assert fig["layout"]["meta"]["windows"] == [t(i) for i in range(4)]


def test_errors_stack_per_error_and_api_in_bars_one_window_wide_with_empty_windows_at_zero() -> None:
    rows = [{**window(0, 60), "api_name": "Heartbeat", "error_name": "REBALANCE_IN_PROGRESS", "count": 2},
            {**window(120, 60), "api_name": "Heartbeat", "error_name": "REBALANCE_IN_PROGRESS", "count": 1},
            {**window(120, 60), "api_name": "Fetch", "error_name": "<x>", "count": 5}]
    fig = charts.errors_over_time(rows)
    assert fig is not None and fig["layout"]["barmode"] == "stack"
    assert [(t["name"], t["y"]) for t in fig["data"]] == [("&lt;x&gt; · Fetch", [0.0, 0.0, 5.0]),
                                                         ("REBALANCE_IN_PROGRESS · Heartbeat", [2.0, 0.0, 1.0])]
    assert {t["width"] for t in fig["data"]} == {60_000.0}
    assert fig["data"][0]["customdata"] == ["19:00:00 – 19:01:00", "19:01:00 – 19:02:00", "19:02:00 – 19:03:00"]


def test_errors_past_the_twelve_most_frequent_stack_as_one_bar() -> None:
    rows = [{**window(0), "api_name": "Fetch", "error_name": f"E{i}", "count": i + 1} for i in range(15)]
    fig = charts.errors_over_time(rows)
    assert len(fig["data"]) == charts.MAX_SERIES + 1
    assert fig["data"][-1]["name"] == "3 other errors" and fig["data"][-1]["y"] == [1.0 + 2.0 + 3.0]
    assert sum(t["y"][0] for t in fig["data"]) == sum(range(1, 16))   # the window's total is whole


def test_throughput_draws_produced_over_fetched_and_switches_records_and_bytes() -> None:
    rows = [{**window(0), "topic": "t", "produced_records": 3, "produced_bytes": 300, "fetched_records": 0,
             "fetched_bytes": 0},
            {**window(2), "topic": "t", "produced_records": 0, "produced_bytes": 0, "fetched_records": 3,
             "fetched_bytes": 300},
            {**window(2), "topic": "u", "produced_records": 3, "produced_bytes": 300, "fetched_records": 0,
             "fetched_bytes": 0}]
    fig = charts.throughput_over_time(rows)
    assert fig is not None
    got = [(t["name"], t["yaxis"], t["meta"], t["y"], t["showlegend"]) for t in fig["data"]]
    assert got == [("t", "y", "produced", [3.0, 0.0, 0.0], True), ("u", "y", "produced", [0.0, 0.0, 3.0], True),
                   ("t", "y2", "fetched", [0.0, 0.0, 3.0], False)]   # u fetched nothing: no empty fetched bars
    by_label = {b["label"]: b["args"][0]["y"] for b in fig["layout"]["updatemenus"][0]["buttons"]}
    assert by_label == {"records": [[3.0, 0.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 3.0]],
                        "bytes": [[300.0, 0.0, 0.0], [0.0, 0.0, 300.0], [0.0, 0.0, 300.0]]}
    assert fig["layout"]["xaxis"]["anchor"] == "y2" and fig["layout"]["yaxis2"]["domain"] == [0.0, 0.45]
    # Nothing fetched at all: one panel, no empty one under it.
    produced_only = charts.throughput_over_time([r for r in rows if r["produced_records"]])
    assert {t["yaxis"] for t in produced_only["data"]} == {"y"} and "yaxis2" not in produced_only["layout"]
    assert produced_only["layout"]["yaxis"]["title"]["text"] == "produced records"


def test_log_ticks_label_every_digit_in_a_narrow_range_and_decades_in_a_wide_one() -> None:
    assert charts.log_ticks([1.1, 3.9]) == "D1"
    assert charts.log_ticks([0.2, 40.0]) == "D2"
    assert charts.log_ticks([0.1, 3000.0, None]) == 1


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


@pytest.mark.parametrize("builder", [charts.latency_over_time, charts.latency_cdf, charts.errors_over_time,
                                     charts.throughput_over_time, charts.lag_per_partition])
def test_nothing_to_draw_gives_no_figure(builder) -> None:  # type: ignore[no-untyped-def]
    assert builder([]) is None
    assert builder([{"window_start": None, "count": None, "lag": None}]) is None


def test_many_topics_are_bounded_and_their_sum_kept() -> None:
    rows = [{**window(m * 60, 60), "topic": f"t{t}", "produced_records": t + 1, "produced_bytes": 100 * (t + 1)}
            for t in range(500) for m in range(3)]
    fig = charts.throughput_over_time(rows)
    assert fig is not None and len(fig["data"]) == charts.MAX_SERIES + 1
    assert fig["data"][0]["name"] == "t499"  # the busiest topics are the ones kept
    assert fig["data"][-1]["name"] == "488 other topics"
    assert sum(t["y"][0] for t in fig["data"]) == sum(range(1, 501))
