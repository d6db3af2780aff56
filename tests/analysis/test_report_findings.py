"""The report's "What to look at" section: worst first, escaped, every link landing on a part of the page;
(slow) drawn by real headless chromium with nothing logged as an error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis import html_report, report_findings
from analysis.findings import RULES

from .browser import chromium_binary, open_page
from .report_results import results

HOSTILE = "<script>document.title='pwned'</script>"


def finding(fid: str, severity: str, subject: str, ts: str) -> dict:
    return {"finding": fid, "severity": severity, "subject_kind": "client", "subject": subject,
            "capture": "x.pcap", "first_ts": ts, "last_ts": ts,
            "evidence": json.dumps({"produce_requests": 160, "topics": ["t"]}),
            "explanation": f"{subject} did something.", "advice": "Raise linger.ms.",
            "show": f"kdissect show x.pcap --client-id {subject}"}


ROWS = [finding("client.no_client_id", "info", "rdkafka", "2024-05-01T12:00:00.000000Z"),
        finding("producer.tiny_batches", "warning", HOSTILE, "2024-05-01T12:00:02.000000Z"),
        finding("client.auth_failures", "critical", "bad-creds", "2024-05-01T12:00:05.000000Z"),
        finding("producer.acks", "warning", "early", "2024-05-01T12:00:01.000000Z")]


def test_worst_first_then_earliest():
    assert [r["subject"] for r in report_findings.ordered(ROWS)] == ["bad-creds", "early", HOSTILE, "rdkafka"]


def test_every_rule_links_to_something_the_report_always_has():
    page = html_report.render({**results(), "findings": [finding(r.id, "warning", "c", "") for r in RULES]})
    targets = re.findall(r'<ol class="kd-look">.*?</ol>', page, re.S)[0]
    for anchor in re.findall(r'href="#([^"]+)"', targets):
        assert f'id="{anchor}"' in page, anchor
    assert page.count('<li class="warning"') == len(RULES)


def test_section_opens_the_report_and_escapes_the_wire():
    page = html_report.render({**results(), "findings": ROWS})
    first = re.search(r'<section class="block" id="([^"]+)"><h2>([^<]+)</h2>', page)
    assert first and first.groups() == ("findings", "What to look at")
    assert HOSTILE not in page and html_report.html.escape(HOSTILE) in page


def test_no_findings_no_section():
    assert report_findings.what_to_look_at([]) == ""
    assert 'id="findings"' not in html_report.render({k: v for k, v in results().items() if k != "findings"})


PROBE = """(function () {
  var first = document.querySelector('section.block');
  return {first: first && first.id, title: document.title,
          items: Array.from(document.querySelectorAll('.kd-look li')).map(function (li) {
            var a = li.querySelector('a'), id = a.getAttribute('href').slice(1);
            return {finding: li.getAttribute('data-finding'), severity: li.className,
                    target: !!document.getElementById(id), height: li.getBoundingClientRect().height};
          })};
})()"""


@pytest.mark.slow
def test_what_to_look_at_in_chromium(tmp_path: Path) -> None:
    if chromium_binary() is None:
        pytest.fail("chromium not found: apt-get install chromium", pytrace=False)
    path = tmp_path / "report.html"
    html_report.write(path, {**results(), "findings": ROWS})
    seen = open_page(path, probe=PROBE)
    assert seen.errors == [] and seen.external_requests == []
    assert seen.probe["first"] == "findings" and seen.probe["title"] == "kafka-dissect report"
    items = seen.probe["items"]
    assert [i["severity"] for i in items] == ["critical", "warning", "warning", "info"]
    assert all(i["target"] and i["height"] > 20 for i in items), items
