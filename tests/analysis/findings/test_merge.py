"""findings.merge: the rules' findings, collected one query per rule, put in one order on the driver."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from analysis.findings import COLUMNS, merge


def _row(capture: str, evidence: str, severity: str = "info", subject: str = "p1") -> dict:
    return {"finding": "producer.acks", "severity": severity, "subject_kind": "client", "subject": subject,
            "capture": capture, "first_ts": dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc),
            "last_ts": dt.datetime(2026, 11, 27, 0, 0, 1, tzinfo=dt.timezone.utc), "evidence": evidence,
            "explanation": "", "advice": "", "show": ""}


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows])


def test_findings_tied_on_time_rule_and_subject_keep_one_order_whatever_spark_returned() -> None:
    # Two captures of the same moment (or copies of one), and one client with acks=0 and acks=1 at once:
    # the order Spark hands each rule's rows back in must not show in the result.
    rows = [_row("b.pcap", '{"acks":1}'), _row("a.pcap", '{"acks":1}'), _row("a.pcap", '{"acks":0}'),
            _row("a.pcap", '{"acks":1}', severity="warning")]
    one = merge([_table(rows[:2]), _table(rows[2:])])
    other = merge([_table(rows[::-1])])
    assert one.equals(other)
    assert [(r["severity"], r["capture"], r["evidence"]) for r in one.to_pylist()] == [
        ("warning", "a.pcap", '{"acks":1}'), ("info", "a.pcap", '{"acks":0}'), ("info", "a.pcap", '{"acks":1}'),
        ("info", "b.pcap", '{"acks":1}')]
