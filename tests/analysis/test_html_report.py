"""The HTML report: one self-contained page, every value escaped, "no data" instead of errors,
and (slow) every chart drawn by real headless chromium with nothing logged as an error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis import html_report

from .browser import chromium_binary, open_page
from .report_dom import PROBE, layout_problems, time_series_problems
from .report_results import HOSTILE_CLIENT, HOSTILE_TOPIC, findings, iso, results

CHARTS = {"ch-latency-time", "ch-latency-cdf", "ch-errors-time", "ch-throughput-time", "ch-lag",
          "ch-rebalances-0", "ch-rebalances-1"}  # a timeline per group: the fixture has two


def figures(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="kd-figures">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def page() -> str:
    return html_report.render(results(), title="group-rebalance <sample>")


def test_plotly_is_inlined_once_and_nothing_is_fetched(page: str) -> None:
    assert page.count("plotly.js v") == 1
    assert page.count("<script") == 3  # plotly.js, the figures as JSON, the glue that draws them
    # plotly.js itself holds url(#clip...) references; the browser test watches the real requests.
    ours = page.replace(html_report.plotly_js(), "")
    assert len(ours) < 200_000
    assert not re.search(r"<(script|img|iframe)[^>]*\bsrc=|<link\b|@import|url\(", ours, re.I)
    assert not re.search(r'href="(?!#)', ours)


def test_every_chart_of_the_contract_gets_a_figure(page: str) -> None:
    figs = figures(page)
    assert set(figs) == CHARTS
    assert all(f["data"] for f in figs.values())
    assert page.count('class="kd-chart"') == len(CHARTS)


def test_wire_strings_are_escaped_everywhere(page: str) -> None:
    for hostile in (HOSTILE_CLIENT, HOSTILE_TOPIC, "<sample>"):
        assert hostile not in page
    assert "&lt;img src=x onerror=" in page                      # tables and title
    assert "\\u003cimg src=x" not in page                          # figures carry the escaped text only
    assert "&lt;img src=x onerror=" in json.dumps(figures(page))


def test_tables_put_the_worst_rows_first(page: str) -> None:
    first = re.search(r'data-table="latency_by_api".*?<tbody><tr><td>([^<]+)</td>', page, re.S)
    assert first and first.group(1) == "JoinGroup"  # the highest p99 of the fixture
    lag = re.search(r'data-table="consumer_lag".*?<tbody><tr>(.*?)</tr>', page, re.S)
    assert lag and "kd-lag-mock" in lag.group(1) and ">16<" in lag.group(1)


def test_size_buckets_in_size_order_and_commit_errors_shown() -> None:
    page = html_report.render({
        "latency_by_size": [{"size_bucket": "16-256 KiB", "size_low_bytes": 16384, "count": 1},
                            {"size_bucket": "< 1 KiB", "size_low_bytes": 0, "count": 5},
                            {"size_bucket": "1-16 KiB", "size_low_bytes": 1024, "count": 2}],
        "offset_commits": [{"group_id": "g", "topic": "t", "partition": 0, "committed_offset": 3,
                            "ts": "2026-11-23T19:00:00Z", "error_name": "REBALANCE_IN_PROGRESS"}]})
    sizes = re.findall(r"<tr><td>([^<]*KiB)</td>", page)
    assert sizes == ["&lt; 1 KiB", "1-16 KiB", "16-256 KiB"]
    assert "REBALANCE_IN_PROGRESS" in page


def test_header_comes_from_summary(page: str) -> None:
    assert "2026-11-23 19:39:47 → 19:41:12 UTC · 85.2 s" in page
    for value, key in (("898", "exchanges"), ("44", "connections"), ("14", "clients"), ("10", "rebalances")):
        assert f'<div class="v">{value}</div><div class="k">{key}</div>' in page


@pytest.mark.parametrize("broken", [
    {},
    {"summary": [], "latency_over_time": [], "rebalances": "not a list", "errors": [None, 3, {"count": "x"}]},
    {"latency_over_time": [{"window_start": "yesterday", "api_name": None, "p99_ms": float("nan")}],
     "latency_histogram": [{"api_name": "Fetch", "bucket_low_ms": 0, "bucket_high_ms": -1, "count": 5}],
     "rebalances": [{"group_id": "g", "start_ts": None, "end_ts": None}],
     "consumer_lag": [{"group_id": None, "client_id": None, "lag": None}]},
    "not even a mapping",
], ids=["empty", "wrong-types", "unusable-rows", "not-a-mapping"])
def test_missing_or_broken_tables_render_no_data(broken: object) -> None:
    page = html_report.render(broken)  # type: ignore[arg-type]
    assert figures(page) == {}
    assert page.count('class="nodata"') >= len(CHARTS) - 1 + 10
    assert "capture span unknown" in page


def test_caught_up_consumers_are_said_so_rather_than_no_data() -> None:
    page = html_report.render({"consumer_lag": [{"group_id": "g", "topic": "t", "partition": 0, "lag": 0}]})
    assert '<div class="nodata">every partition is at lag 0</div>' in page


def test_findings_open_the_report() -> None:
    page = html_report.render({**results(), "findings": findings()})
    assert page.index('id="findings"') < page.index('id="latency"')
    assert HOSTILE_CLIENT not in page


def test_tables_without_a_view_are_still_shown() -> None:
    page = html_report.render({**results(), "from_the_future": [{"x": 1, "y": "<b>"}]})
    assert 'id="t-from_the_future"' in page and "&lt;b&gt;" in page


def test_write_makes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    html_report.write(out, results())
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


def test_command_line_renders_a_results_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out = tmp_path / "results.json", tmp_path / "report.html"
    src.write_text(json.dumps(results()))
    assert html_report.main([str(src), str(out), "--title", "t"]) == 0
    assert out.stat().st_size > 4_000_000 and f"report: {out}" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"), ("{not json", "is not a JSON results file"), ("[1, 2]", "holds a JSON list"),
    (b"\xff\xfe", "is not a JSON results file")])
def test_command_line_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            content: str | bytes | None, message: str) -> None:
    src = tmp_path / "results.json"
    if isinstance(content, bytes):
        src.write_bytes(content)
    elif content is not None:
        src.write_text(content)
    assert html_report.main([str(src), str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


# --------------------------------------------------------------------------
# Real headless chromium

def _open(path: Path, probe: str | None = None):  # type: ignore[no-untyped-def]
    if chromium_binary() is None:
        pytest.fail("chromium not found: apt-get install chromium", pytrace=False)
    return open_page(path, probe=probe)


@pytest.mark.slow
def test_report_draws_every_chart_in_chromium(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    html_report.write(path, results())
    seen = _open(path, PROBE)
    (tmp_path / "report.png").write_bytes(seen.screenshot)
    assert time_series_problems(results(), seen.probe) == []
    assert layout_problems(seen.probe) == []
    assert all(c["caption"] for c in seen.probe["charts"]), [c["id"] for c in seen.probe["charts"] if not c["caption"]]
    assert seen.errors == []
    assert seen.external_requests == []
    assert seen.rendered == str(len(CHARTS))
    assert seen.title == "kafka-dissect report"  # the hostile strings never ran
    assert {c["id"] for c in seen.charts} == CHARTS
    for chart in seen.charts:
        assert chart["svgs"] and chart["width"] > 300 and chart["height"] > 150, chart
        assert chart["traces"] >= 1, chart
    assert seen.screenshot.startswith(b"\x89PNG") and len(seen.screenshot) > 100_000


@pytest.mark.slow
def test_the_dom_check_sees_a_line_joined_across_missing_windows(tmp_path: Path) -> None:
    """The check of the sample reports can fail: the latency line drawn as the report drew it before,
    points joined across the windows where an api had no requests, is caught from the DOM."""
    data = results()
    data["latency_over_time"] = [r for r in data["latency_over_time"]
                                 if not (r["api_name"] == "Fetch" and r["window_start"] in (iso(20), iso(25)))]
    page = html_report.render(data)
    fig = figures(page)
    fetch = next(t for t in fig["ch-latency-time"]["data"] if t["name"] == "Fetch")
    keep = [(x, y) for x, y in zip(fetch["x"], fetch["y"]) if x is not None]   # gaps closed up
    fetch["x"], fetch["y"] = [x for x, _ in keep], [y for _, y in keep]
    spec = json.dumps(fig, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    page = re.sub(r'(<script type="application/json" id="kd-figures">).*?(</script>)',
                  lambda m: m.group(1) + spec + m.group(2), page, flags=re.S)
    (tmp_path / "joined.html").write_text(page)
    seen = _open(tmp_path / "joined.html", PROBE)
    assert seen.errors == []
    assert [p for p in time_series_problems(data, seen.probe) if "Fetch" in p] == [
        "ch-latency-time: Fetch drawn in 1 pieces of 30 points; its table has 15 windows in 2 runs"]


@pytest.mark.slow
def test_empty_report_shows_no_data_in_chromium(tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    html_report.write(path, {})
    seen = _open(path)
    assert seen.errors == [] and seen.external_requests == []
    assert seen.rendered == "0" and seen.charts == []
    assert seen.no_data >= len(CHARTS) - 1


SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _sample_report(spark, tmp_path: Path, pcap: str):  # type: ignore[no-untyped-def]
    """A bundled sample through decode -> analyze --report (kdissect analyze's own code, on the test run's
    Spark session) -> chromium: the report's path and what chromium saw."""
    import argparse
    import io

    import kdissect
    from analysis import cli

    ds, report = tmp_path / "dataset", tmp_path / "report.html"
    kdissect.write_dataset([SAMPLES / pcap], ds)
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    assert cli.run(p.parse_args([str(ds), "--report", str(report)]), io.StringIO(), spark=spark) == 0
    return report, _open(report)


@pytest.mark.slow
def test_report_of_the_rebalance_sample_through_the_real_pipeline(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """decode -> analyze --report (kdissect analyze's own code, on the test run's Spark session) -> chromium,
    on the sample recorded for it: every chart drawn (a timeline per rebalancing group), nothing logged,
    and the lag bars are the lagging consumers' own figures (last high watermark minus what they committed)."""
    report, seen = _sample_report(spark, tmp_path, "group-rebalance.pcap")
    (tmp_path / "report.png").write_bytes(seen.screenshot)
    assert seen.errors == [] and seen.external_requests == []
    ids = {c["id"] for c in seen.charts}
    assert {"ch-latency-time", "ch-latency-cdf", "ch-errors-time", "ch-throughput-time", "ch-lag"} <= ids
    assert all(c["traces"] >= 1 and c["width"] > 300 for c in seen.charts), seen.charts
    page = report.read_text()
    titles = dict(re.findall(r"<figcaption>Rebalance timeline of ([^:<]+): (\d+) rebalances?</figcaption>", page))
    expected = json.loads((SAMPLES / "group-rebalance.expected.json").read_text())
    for group in ("kd-rb-tansu", "kd-rb-mock", "kd-848-mock"):
        assert int(titles.get(group, 0)) >= expected["groups"][group]["rebalances_seen"], (group, titles)
    want = {(g, t, int(p)): float(v["lag"]) for g in ("kd-lag-tansu", "kd-lag-mock")
            for t, parts in expected["groups"][g]["lag"].items() for p, v in parts.items() if v["lag"]}
    got = {}
    for trace in figures(page)["ch-lag"]["data"]:
        for label, lag in zip(trace["y"], trace["x"]):
            tp, group = label.split(" · ")
            topic, part = tp.rsplit("-", 1)
            got[(group, topic, int(part))] = lag
    assert {k: v for k, v in got.items() if k[0] in ("kd-lag-tansu", "kd-lag-mock")} == want


@pytest.mark.slow
def test_report_of_the_share_sample_shows_its_share_groups(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """decode -> analyze --report -> chromium on the share-group sample: a Share groups section whose
    deliveries table holds each member's own counts, and nothing logged."""
    import html as html_lib

    report, seen = _sample_report(spark, tmp_path, "mock-share-groups.pcap")
    assert seen.errors == [] and seen.external_requests == []
    page = report.read_text()
    assert '<section class="block" id="shares">' in page and 'href="#shares"' in page
    table = re.search(r'id="t-share_deliveries">(.*?)</section>', page, re.S).group(1)
    head = [html_lib.unescape(h).replace(" ", "_") for h in re.findall(r"<th[^>]*>(.*?)</th>",
                                                                         table.split("</thead>")[0])]
    rows = [[html_lib.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1].split("</tbody>")[0], re.S)]
    got = {(r[head.index("client_id")], r[head.index("partition")]):
           tuple(int(r[head.index(c)].replace(",", "")) for c in ("acquired", "accepted", "released", "rejected"))
           for r in rows}
    expected = json.loads((SAMPLES / "mock-share-groups.expected.json").read_text())
    want = {(c["client_id"], p): (a["count"], c["acks"][t][p].get("ACCEPT", 0), c["acks"][t][p].get("RELEASE", 0),
                                  c["acks"][t][p].get("REJECT", 0))
            for c in expected["clients"] if "acquired" in c for t, parts in c["acquired"].items()
            for p, a in parts.items()}
    assert got == want
    assert "share.lock_expired" in page and "kd-share-stuck" in page
