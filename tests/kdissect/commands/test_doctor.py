"""``kdissect doctor``: bad use exits 2 before Spark starts; the findings print compactly with runnable show
lines; exit 1 exactly when a finding is critical; (slow) the whole command on two real samples."""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kdissect.commands import doctor
from kdissect.commands.cli import main

from tests.kdissect.conftest import SAMPLES
from tests.kdissect.commands.test_cli import kd, no_stack_trace

FINDINGS = SAMPLES / "findings"
DUP = FINDINGS / "findings-duplicates.pcap"


@pytest.mark.parametrize(("argv", "message"), [
    (["doctor", "/nonexistent.pcap"], "no such file or directory"),
    (["doctor", str(DUP), "--set", "producer.tiny_batch.min_requests=1"], "unknown rule"),
    (["doctor", str(DUP), "--set", "producer.acks.min_requests=lots"], "expected a number"),
    (["doctor", str(DUP), "--rules", "/nonexistent.toml"], "nonexistent.toml"),
    (["doctor", str(DUP), "--report", "/nonexistent/dir/r.html"], "does not exist"),
    (["doctor"], "the following arguments are required"),
])
def test_bad_use_exits_2_with_one_line(argv, message, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err


ROW = {"finding": "client.auth_failures", "severity": "critical", "subject_kind": "client", "subject": "app",
       "capture": "findings-duplicates.pcap", "first_ts": "2024-05-01T12:00:00.000000Z",
       "last_ts": "2024-05-01T12:00:01.000000Z", "evidence": '{"failures":3,"errors":["SASL_AUTHENTICATION_FAILED"]}',
       "explanation": "app failed SASL authentication 3 times.", "advice": "Check sasl.jaas.config.",
       "show": "kdissect show findings-duplicates.pcap --api SaslHandshake,SaslAuthenticate --client-id app"}


def test_show_lines_name_the_capture_as_given():
    rows = doctor.with_paths([ROW, {**ROW, "capture": "other.pcap", "show": "kdissect show other.pcap"}],
                             {"findings-duplicates.pcap": Path("samples/findings/findings-duplicates.pcap")})
    assert shlex.split(rows[0]["show"])[2] == "samples/findings/findings-duplicates.pcap"
    assert rows[1]["show"] == "kdissect show other.pcap"   # unknown capture: left as it was


def test_compact_print_hides_info_unless_asked():
    info = {**ROW, "severity": "info", "finding": "client.no_client_id"}
    out = io.StringIO()
    doctor.print_findings([info, ROW], out, show_info=False, captures=1)
    text = out.getvalue()
    assert text.startswith("2 findings in 1 capture: 1 critical, 0 warning, 1 info")
    assert "CRITICAL  client.auth_failures  client app" in text and "no_client_id" not in text.split("\n\n")[1]
    assert "evidence: failures=3, errors=[\"SASL_AUTHENTICATION_FAILED\"]" in text
    assert "(1 info finding not shown" in text


def test_a_blank_client_id_is_said_to_be_blank():
    out = io.StringIO()
    doctor.print_findings([{**ROW, "finding": "client.old_versions", "severity": "warning", "subject": ""}], out,
                          show_info=False, captures=1)
    assert "WARNING   client.old_versions  client (empty client id)  [findings-duplicates.pcap]" in out.getvalue()


def _args(tmp_path: Path, *inputs: Path, **kw) -> argparse.Namespace:
    base = dict(inputs=[str(p) for p in inputs], dataset=None, master="local[1]", report=None, json=None, set=[],
                rules=None, ports=None, tls_keylog=[], all=False)
    return argparse.Namespace(**{**base, **kw})


def no_spark_start(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With ``_analyze`` stubbed there is no analysis, so no Spark to start beside the decoding either."""
    monkeypatch.setattr(doctor, "_SparkStart", lambda *a, **k: argparse.Namespace(wait=lambda: None,
                                                                                 stop=lambda: None))


@pytest.mark.parametrize(("rows", "status"), [([ROW], 1), ([{**ROW, "severity": "warning"}], 0), ([], 0)])
def test_exit_status_is_1_only_for_a_critical_finding(tmp_path, monkeypatch, rows, status):
    monkeypatch.setattr(doctor, "_analyze", lambda *a, **k: {"findings": [dict(r) for r in rows]})
    no_spark_start(monkeypatch)
    out = io.StringIO()
    assert doctor.run(_args(tmp_path, DUP, json=str(tmp_path / "r.json")), out) == status
    written = json.loads((tmp_path / "r.json").read_text())["findings"]
    assert [r["severity"] for r in written] == [r["severity"] for r in rows]
    if rows:  # the show line runs as printed, from where doctor was started
        assert f"show: kdissect show {DUP} " in out.getvalue()


def test_tls_without_keys_is_said_as_decode_says_it(tmp_path):
    """No exchange because the Kafka is in TLS without its keys: the hint is decode's summary's own."""
    tls = SAMPLES / "tls" / "tls13.pcap"
    summary = kd("decode", tls, "-o", tmp_path / "out").stdout
    hint = next(line for line in summary.splitlines() if line.startswith("tls "))[len("tls "):].strip()
    assert hint.startswith("10 TLS connections not decoded; decrypt with --tls-keylog FILE")
    p = kd("doctor", tls)
    assert (p.returncode, p.stderr) == (2, f"kdissect doctor: no Kafka exchanges in the input: {hint}\n")
    p = kd("doctor", SAMPLES / "tls" / "tls13-port19443.pcap")   # TLS off Kafka ports: no hint of keys
    assert (p.returncode, p.stderr) == (2, "kdissect doctor: no Kafka exchanges in the input: nothing to judge "
                                           "(are --ports right?)\n")


@pytest.mark.slow
def test_doctor_on_real_samples(tmp_path):
    good = FINDINGS / "findings-good.pcap"
    env = {**os.environ, "PYTHONPATH": str(SAMPLES.parent)}
    proc = subprocess.run([sys.executable, "-m", "kdissect", "doctor", str(DUP), str(good), "--master", "local[1]",
                           "--json", str(tmp_path / "d.json"), "--report", str(tmp_path / "d.html"),
                           "--dataset", str(tmp_path / "ds")],
                          capture_output=True, text=True, env=env, timeout=1200)
    no_stack_trace(proc.stderr)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("2 findings in 2 captures (80 exchanges): 0 critical, 2 warning, 0 info")
    rows = json.loads((tmp_path / "d.json").read_text())["findings"]
    assert {(r["finding"], r["subject"]) for r in rows} == {
        ("producer.duplicates", "find-dup-0"), ("producer.not_idempotent", "kd-find-dup-producer")}
    shows = [line.split("show: ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("    show: ")]
    assert len(shows) == 2
    for line in shows:
        argv = shlex.split(line)
        listed = subprocess.run([sys.executable, "-m", "kdissect", *argv[1:]], capture_output=True, text=True,
                                env=env, timeout=120)
        no_stack_trace(listed.stderr)
        assert listed.returncode == 0 and "Produce" in listed.stdout, line
    page = (tmp_path / "d.html").read_text()
    assert "What to look at" in page and "find-dup-0" in page
    assert (tmp_path / "ds" / "exchanges").is_dir()
