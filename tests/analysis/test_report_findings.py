"""The report's "What to look at" section: one line per rule, worst first, info folded away as doctor
does, escaped, every link landing on a part of the page; (slow) drawn by real headless chromium with
nothing logged as an error."""

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
    targets = re.findall(r'<div class="kd-look">.*?</div></section>', page, re.S)[0]
    for anchor in re.findall(r'href="#([^"]+)"', targets):
        assert f'id="{anchor}"' in page, anchor
    assert page.count('<details class="rule warning"') == len(RULES)


def test_findings_are_grouped_by_rule_worst_subjects_first_and_info_folded():
    def acks(subject, severity, requests):
        return {**finding("producer.acks", severity, subject, "2024-05-01T12:00:00.000000Z"),
                "evidence": json.dumps({"acks": 0 if severity == "warning" else 1, "produce_requests": requests})}
    rows = [acks(f"p{i}", "info", i) for i in range(30)] + [acks("loud", "warning", 5), acks("quiet", "warning", 2),
            acks("louder", "warning", 9), finding("client.old_versions", "warning", "", "2024-05-01T12:00:00Z"),
            finding("client.auth_failures", "critical", "bad-creds", "2024-05-01T12:00:05Z")]
    html = report_findings.what_to_look_at(rows)
    groups = re.findall(r'<details class="rule (\w+)" data-finding="([^"]+)" data-count="(\d+)">', html)
    # Critical first; the rule's three warnings apart from its thirty infos, which fold with the other infos.
    assert groups == [("critical", "client.auth_failures", "1"), ("warning", "producer.acks", "3"),
                      ("warning", "client.old_versions", "1"), ("info", "producer.acks", "30")]
    assert html.index('<details class="infos">') < html.index('data-count="30"')
    assert "30 info findings (1 rule), folded" in html
    # Worst subjects first (the largest measured figure), the rest counted; a blank client id is said so.
    assert "acks=0" not in html.split("</summary>")[1]  # the figures are inside, not on the line
    line = re.search(r'data-finding="producer.acks" data-count="3">(.*?)</summary>', html, re.S).group(1)
    assert "louder, loud, quiet" in line and "× 3" in line
    info = re.search(r'data-finding="producer.acks" data-count="30">(.*?)</summary>', html, re.S).group(1)
    assert "p29, p28, p27 and 27 more" in info
    assert "(empty client id)" in html
    assert report_findings.subject_text({"subject": "", "subject_kind": "client"}) == "(empty client id)"


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
          rules: Array.from(document.querySelectorAll('.kd-look details.rule')).map(function (d) {
            var a = d.querySelector('summary a'), id = a.getAttribute('href').slice(1);
            var item = d.querySelector('li');
            return {finding: d.getAttribute('data-finding'), severity: d.className.split(' ')[1],
                    open: d.open, visible: d.checkVisibility(), target: !!document.getElementById(id),
                    height: d.getBoundingClientRect().height,
                    itemShown: !!(item && item.checkVisibility())};
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
    rules = seen.probe["rules"]
    assert [(r["finding"], r["severity"]) for r in rules] == [
        ("client.auth_failures", "critical"), ("producer.acks", "warning"), ("producer.tiny_batches", "warning"),
        ("client.no_client_id", "info")]
    # One line each, closed: the findings inside show when opened; the info rule is folded away unseen
    # (checkVisibility: a closed <details> keeps its content laid out, only not rendered).
    assert all(r["target"] and not r["open"] and not r["itemShown"] for r in rules), rules
    assert all(20 < r["height"] < 80 for r in rules if r["visible"]), rules
    assert [r["visible"] for r in rules] == [True, True, True, False]
