"""The findings samples: each misconfigured capture triggers its finding, the good one none that matters,
and every ``show`` line runs and lists the exchanges behind its finding."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest

import kdissect
from analysis import dataset
from analysis.findings import Inputs, findings
from kdissect.commands.cli import main as kdissect_main

pytestmark = pytest.mark.slow

FOLDER = Path(__file__).resolve().parents[3] / "samples" / "findings"
EXPECTED = {p.name.removesuffix(".expected.json"): json.loads(p.read_text())
            for p in sorted(FOLDER.glob("*.expected.json"))}


@pytest.fixture(scope="module")
def found(spark, tmp_path_factory) -> list[dict]:
    if not EXPECTED:
        pytest.skip("no findings samples")
    out = tmp_path_factory.mktemp("findings") / "ds"
    kdissect.write_dataset([FOLDER / e["pcap"] for e in EXPECTED.values()], out)
    exchanges = dataset.read_table(spark, str(out), "exchanges").cache()
    partitions = dataset.read_table(spark, str(out), "partitions").cache()
    try:
        return [r.asDict() for r in findings(Inputs(exchanges, partitions)).collect()]
    finally:     # the session is shared by the whole run: what is kept here must not stay kept
        exchanges.unpersist()
        partitions.unpersist()


@pytest.mark.parametrize("name", [n for n, e in EXPECTED.items() if e["expect_findings"]])
def test_misconfigured_sample_triggers_its_finding(found, name):
    mine = [f for f in found if f["capture"] == f"{name}.pcap"]
    for want in EXPECTED[name]["expect_findings"]:
        hits = [f for f in mine if f["finding"] == want["finding"] and f["subject"] == want["subject"]]
        assert hits, (want, [(f["finding"], f["subject"]) for f in mine])
        assert hits[0]["subject_kind"] == want["subject_kind"]
        assert hits[0]["severity"] in ("warning", "critical")
        assert json.loads(hits[0]["evidence"])


def test_evidence_of_the_samples(found):
    def evidence(capture: str, finding: str) -> dict:
        return next(json.loads(f["evidence"]) for f in found
                    if f["capture"] == f"findings-{capture}.pcap" and f["finding"] == finding)
    assert evidence("tiny-batches", "producer.tiny_batches")["median_records_per_batch"] == 1
    assert evidence("tiny-batches", "producer.tiny_batches")["produce_requests"] == 160
    assert evidence("acks0", "producer.acks") == {"acks": 0, "produce_requests": 20, "topics": ["find-acks0"]}
    dup = evidence("duplicates", "producer.duplicates")
    assert (dup["copies"], dup["records"], [s["outcome"] for s in dup["sends"]]) == (2, 8, ["no answer", "NONE"])
    assert evidence("commit-per-message", "consumer.commit_per_message")["commits"] == 40
    assert evidence("busy-polling", "consumer.busy_polling")["max_wait_ms"] == 1
    st = evidence("session-timeout", "group.session_timeout")
    assert st["client_id"] == "kd-find-stalled" and st["silent_ms"] > st["session_timeout_ms"] == 6000
    assert evidence("reconnect-loop", "client.connection_churn")["connections"] >= 15
    gone = evidence("member-vanished", "group.member_vanished")
    group = EXPECTED["findings-member-vanished"]["groups"]["kd-find-gone"]
    killed = group["killed"]["member"]
    assert gone["client_id"] == killed and gone["last_request"].startswith("Heartbeat")
    # The wire's last word from the member precedes the kill; the group waited out the 6 s session after it.
    assert gone["last_request_ts"] < group["killed"]["at"]
    assert gone["session_timeout_ms"] == 6000 < gone["waited_ms"] < 6000 + 1500   # + a heartbeat interval
    assert gone["members_after"] == sorted(set(group["members"]) - {killed})
    assert gone["unassigned_ms"] > gone["waited_ms"] + gone["rebalance_ms"] - 1


def test_tiny_batches_needs_traffic_that_matters(found):
    """The acks=0 producer sent 20 one-record batches in 0.4 s (20 requests, 20/s counted over at least a
    second): too little traffic for its batching to matter. The producer recorded with linger.ms 0 sent 160."""
    def tiny(capture: str) -> list[dict]:
        return [json.loads(f["evidence"]) for f in found
                if f["capture"] == f"findings-{capture}.pcap" and f["finding"] == "producer.tiny_batches"]
    assert EXPECTED["findings-acks0"]["client_ids"] == ["kd-find-acks0"]
    assert "producer.tiny_batches" not in {w["finding"] for w in EXPECTED["findings-acks0"]["expect_findings"]}
    assert tiny("acks0") == []
    assert [(e["records"], e["produce_requests"]) for e in tiny("tiny-batches")] == [(160, 160)]


def test_a_member_that_never_returns_is_not_a_session_timeout(found):
    mine = {f["finding"] for f in found if f["capture"] == "findings-member-vanished.pcap"}
    assert "group.member_vanished" in mine and "group.session_timeout" not in mine
    # ... and the stalled member that came back is reported as a session timeout only.
    back = {f["finding"] for f in found if f["capture"] == "findings-session-timeout.pcap"}
    assert "group.session_timeout" in back and "group.member_vanished" not in back


def test_the_well_configured_capture_raises_no_alarm(found):
    alarms = [(f["finding"], f["subject"]) for f in found if f["capture"] == "findings-good.pcap"
              and f["severity"] in ("warning", "critical")]
    assert alarms == []


def test_every_show_line_runs_and_lists_exchanges(found):
    assert found
    for f in found:
        argv = shlex.split(f["show"])
        assert argv[:2] == ["kdissect", "show"] and argv[2] == f["capture"]
        argv[2] = str(FOLDER / argv[2])
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert kdissect_main(argv[1:]) == 0
        lines = [line for line in buf.getvalue().splitlines() if line.strip()]
        assert len(lines) >= 1, f["show"]
