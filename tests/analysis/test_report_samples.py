"""(slow) The report of every sample, and of all of them as one dataset, drawn by headless chromium and
checked from the DOM: each time-series chart has one bar, or one step, per window of its table, complete
from the first window to the last, no line joined across a window without requests, every chart has a
caption, and every table fits inside its card."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kdissect
from analysis import html_report, output, schedule

from .browser import chromium_binary, open_pages
from .report_dom import OVER_TIME, PROBE, layout_problems, time_series_problems

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
PCAPS = sorted(SAMPLES.glob("*.pcap")) + sorted((SAMPLES / "findings").glob("*.pcap")) \
    + sorted((SAMPLES / "v07").glob("*.pcap"))
CHART_OF = {"latency_over_time": "ch-latency-time", "errors_over_time": "ch-errors-time",
            "throughput_over_time": "ch-throughput-time"}


def computed(spark, dataset: Path, jobs) -> dict:  # type: ignore[no-untyped-def]
    """``kdissect analyze``'s tables of ``jobs`` over ``dataset`` (collected), on the test run's Spark session."""
    # What earlier tests left cached on the shared session is not this analysis' to carry.
    spark.catalog.clearCache()
    return schedule.analyze(spark, schedule.Request([str(dataset)]), jobs)


@pytest.fixture(scope="module")
def sample_reports(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    """Per sample: its time-series tables as ``analyze --json`` writes them, and what chromium drew of its
    report. Only those three tables are collected (the rest of a report is tested elsewhere): with one
    chromium for every page, that keeps the whole at a few seconds a sample."""
    if chromium_binary() is None:
        pytest.fail("chromium not found: apt-get install chromium", pytrace=False)
    out = tmp_path_factory.mktemp("reports")
    results, pages = {}, []
    for pcap in PCAPS:
        kdissect.write_dataset([pcap], out / pcap.stem)
        tables = computed(spark, out / pcap.stem, ("latency", "errors", "throughput"))
        results[pcap.name] = {name: output.rows(tables[name]) for name in OVER_TIME}
        pages.append(out / f"{pcap.stem}.html")
        html_report.write(pages[-1], results[pcap.name])
    seen = dict(zip((p.name for p in PCAPS), open_pages(pages, probe=PROBE)))
    return {name: (results[name], seen[name]) for name in results}


@pytest.mark.parametrize("pcap", [p.name for p in PCAPS])
def test_report_of_each_sample(sample_reports, pcap: str) -> None:  # type: ignore[no-untyped-def]
    results, seen = sample_reports[pcap]
    assert seen.errors == [] and seen.external_requests == []
    ids = {c["id"] for c in seen.probe["charts"]}
    # A table with rows gets its chart (errors_over_time may be empty: then "no errors").
    assert {CHART_OF[t] for t in OVER_TIME if results.get(t)} <= ids, ids
    assert time_series_problems(results, seen.probe) == []
    assert layout_problems(seen.probe) == []
    assert all(c["caption"].strip() for c in seen.probe["charts"])


def test_report_of_all_samples_as_one_dataset(tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Captures recorded days apart in one dataset, every table: the idle days are cut out of the time
    axis, and the findings fold to one line per rule with the info ones hidden. The tables come from
    ``kdissect analyze --json`` itself, in its own JVM sized to the input (the whole run's shared session,
    after every other analysis test, is not what a user's analysis runs on)."""
    keys = sorted((SAMPLES / "tls").glob("*.keys"))
    kdissect.write_dataset([SAMPLES], tmp_path / "ds", tls_keylog=keys)
    run = subprocess.run([sys.executable, "-m", "kdissect", "analyze", str(tmp_path / "ds"), "--json",
                          str(tmp_path / "results.json")], cwd=SAMPLES.parent, capture_output=True, text=True,
                         timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["summary"][0]["captures"] >= len(PCAPS)
    html_report.write(tmp_path / "report.html", results)
    (seen,) = open_pages([tmp_path / "report.html"], probe=PROBE)
    assert seen.errors == [] and seen.external_requests == []
    assert time_series_problems(results, seen.probe) == []
    assert layout_problems(seen.probe) == []
    page = (tmp_path / "report.html").read_text()
    rules = re.findall(r'<details class="rule (\w+)" data-finding="[^"]+" data-count="(\d+)">', page)
    assert sum(int(n) for _, n in rules) == len(results["findings"])
    alarms = {r["finding"] for r in results["findings"] if r["severity"] != "info"}
    assert len([s for s, _ in rules if s != "info"]) == len(alarms)   # one line per rule
    infos = page.index('<details class="infos">')
    assert all(page.index(f'data-finding="{r["finding"]}"') < infos for r in results["findings"]
               if r["severity"] != "info")
