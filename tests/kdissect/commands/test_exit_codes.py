"""One rule for the exit status of every command (the README's table): 2 for bad use, 3 for a damaged
input once everything readable is written, 1 when the command could not do its work, 4 for doctor's own
failures; each with one line on stderr. Run as users run it, in a subprocess."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from kdissect import errors

from kdissect.commands import doctor
from kdissect.commands.cli import main

from tests.kdissect.conftest import REPO, SAMPLES, read_table
from tests.kdissect.commands.test_cli import kd

MIXED = SAMPLES / "mixed.pcap"


@pytest.fixture
def cut(tmp_path):  # type: ignore[no-untyped-def]
    """The mixed sample cut inside its 261st record, as a copy stopped half-way leaves it."""
    path = tmp_path / "cut.pcap"
    path.write_bytes(MIXED.read_bytes()[:50_000])
    return path


def _rule(tmp_path: Path) -> dict[str, list[tuple[list[object], int]]]:
    """Per command: bad use (2), a text file where it reads captures or datasets (3), a missing input (2)."""
    notes = tmp_path / "notes.pcap"
    notes.write_text("these are my notes, not a capture\n")
    gone, out = tmp_path / "gone.pcap", tmp_path / "out"
    return {
        "decode": [(["decode", MIXED, "-o", out, "--jobs", "0"], 2), (["decode", notes, "-o", out], 3),
                   (["decode", gone, "-o", out], 2)],
        "show": [(["show", MIXED, "-c", "0"], 2), (["show", notes], 3), (["show", gone], 2)],
        "compare": [(["compare", MIXED, "--ports", "abc"], 2), (["compare", notes], 3), (["compare", gone], 2),
                    (["compare", MIXED, "--tls-keylog", gone], 2)],
        "doctor": [(["doctor", MIXED, "--frobnicate"], 2), (["doctor", notes], 3), (["doctor", gone], 2)],
        "analyze": [(["analyze", tmp_path, "--since", "yesterday"], 2), (["analyze", notes], 3),
                    (["analyze", tmp_path / "gone"], 2)],
        # A text file is found out by a Spark task (a JVM): test_spark_decode_of_a_text_file_exits_3.
        "spark-decode": [(["spark-decode", MIXED, "-o", out, "--shards", "0"], 2),
                         (["spark-decode", gone, "-o", out], 2)],
        "live": [(["live", "-i", "lo", "-o", out, "--rotate", "0"], 2), (["live", "-o", out], 2)],
        "spark-server": [(["spark-server", "begin"], 2)],
        "protocol": [(["protocol", "extra"], 2)],
    }


@pytest.mark.parametrize("command", ["decode", "show", "compare", "doctor", "analyze", "spark-decode", "live",
                                     "spark-server", "protocol"])
def test_one_rule_for_every_command(command: str, tmp_path: Path) -> None:
    for argv, status in _rule(tmp_path)[command]:
        p = kd(*argv)       # kd: no stack trace on stderr
        assert (p.returncode, p.stderr.count("\n")) == (status, 1), (argv, p.returncode, p.stderr)


@pytest.mark.slow
def test_spark_decode_of_a_text_file_exits_3(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("spark-decode runs JVM Spark: no java")
    notes = tmp_path / "notes.pcap"
    notes.write_text("these are my notes, not a capture\n")
    p = kd("spark-decode", notes, "-o", tmp_path / "out", "-q")
    assert (p.returncode, p.stderr.count("\n")) == (3, 1) and "notes.pcap: looks like text" in p.stderr, p.stderr


def test_compare_says_a_damaged_capture_after_comparing_what_could_be_read(cut: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    p = kd("compare", cut)
    compared = re.search(r"^messages compared +(\d+)", p.stdout, re.M)
    assert p.returncode == 3 and compared and int(compared.group(1)) > 100, p.stdout + p.stderr
    assert p.stderr == (f"kdissect: damaged input: {cut}: file ends inside record 261 (offset 49903): 81 of its "
                        "115 bytes present; delivered as a truncated packet; what could be read is compared\n")


def test_bad_use_exits_2(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for argv, needle in ((["decode", MIXED, "-o", tmp_path / "o", "--ports", "abc"], "--ports: bad port 'abc'"),
                         (["decode", MIXED, "-o", tmp_path / "o", "--jobs", "0"], "--jobs"),
                         (["decode", tmp_path / "nope.pcap", "-o", tmp_path / "o"], "no such file"),
                         (["decode", tmp_path, "-o", tmp_path / "o"], "no capture files"),
                         (["show", MIXED, "--api", "Nope"], "--api: unknown api"),
                         (["show", MIXED, "--protocol", "0.9"], "--protocol"),
                         (["analyze", tmp_path / "nope"], "no such directory")):
        p = kd(*argv)
        assert (p.returncode, p.stderr.count("\n")) == (2, 1), (argv, p.stderr)
        assert needle in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "o").exists()


def test_a_capture_cut_short_is_decoded_then_exits_3_saying_where(tmp_path, cut) -> None:  # type: ignore[no-untyped-def]
    p = kd("decode", cut, "-o", tmp_path / "out")
    assert p.returncode == 3, p.stderr
    assert p.stderr == (f"kdissect: damaged input: {cut}: file ends inside record 261 (offset 49903): 81 of its "
                        "115 bytes present; delivered as a truncated packet; what could be read is in the dataset\n")
    assert "exchanges    58" in p.stdout and read_table(tmp_path / "out", "exchanges").num_rows == 58
    # show: every line it could read, then the same line; with filters too.
    p = kd("show", cut, "--api", "Produce")
    assert p.returncode == 3 and p.stdout.count("Produce v") == 12
    assert p.stderr.startswith(f"kdissect: damaged input: {cut}: file ends inside record 261")
    # --jobs: the same rows, the same status.
    p = kd("decode", cut, "-o", tmp_path / "out2", "--jobs", "2")
    assert p.returncode == 3 and f"damaged input: {cut}: file ends" in p.stderr


def test_a_ten_byte_file_and_a_file_that_is_no_capture_exit_3(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ten = tmp_path / "ten.pcap"
    ten.write_bytes(MIXED.read_bytes()[:10])
    p = kd("decode", ten, "-o", tmp_path / "out")
    assert (p.returncode, p.stderr) == (3, f"kdissect: damaged input: {ten}: file ends inside the pcap header "
                                           "(10 of its 24 bytes); what could be read is in the dataset\n")
    notes = tmp_path / "notes.pcap"
    notes.write_text("these are my notes\n")
    for argv in (["decode", notes, "-o", tmp_path / "out3"], ["show", notes], ["doctor", notes], ["analyze", tmp_path]):
        p = kd(*argv)
        assert p.returncode == 3 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, (argv, p.stderr)


def test_a_command_that_cannot_do_its_work_exits_1(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "file").write_text("x")
    p = kd("decode", MIXED, "-o", tmp_path / "file")
    assert (p.returncode, p.stderr.count("\n")) == (1, 1) and "not a directory" in p.stderr
    p = kd("compare", MIXED, "--tshark", tmp_path / "no-tshark")
    assert (p.returncode, p.stderr.count("\n")) == (1, 1) and "not found" in p.stderr


def test_doctor_a_damaged_input_exits_3_unless_something_is_critical(tmp_path, monkeypatch, cut, capsys) -> None:  # type: ignore[no-untyped-def]
    from tests.kdissect.commands.test_doctor import ROW, _args, no_spark_start

    no_spark_start(monkeypatch)
    monkeypatch.setattr(doctor, "_analyze", lambda *a, **k: {"findings": [{**ROW, "severity": "warning"}]})
    assert doctor.run(_args(tmp_path, cut), io.StringIO()) == 3
    assert f"kdissect doctor: damaged input: {cut}: file ends inside record 261" in capsys.readouterr().err
    monkeypatch.setattr(doctor, "_analyze", lambda *a, **k: {"findings": [ROW]})
    assert doctor.run(_args(tmp_path, cut), io.StringIO()) == 1   # a critical finding wins


def test_doctor_fails_with_4_as_1_is_its_critical_finding(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    def no_spark(*_a, **_k):  # type: ignore[no-untyped-def]
        raise errors.KdissectError("Spark did not start (no JVM); check Java")
    from tests.kdissect.commands.test_doctor import no_spark_start

    no_spark_start(monkeypatch)
    monkeypatch.setattr(doctor, "_analyze", no_spark)
    assert main(["doctor", str(SAMPLES / "findings" / "findings-duplicates.pcap")]) == 4
    assert capsys.readouterr().err == "kdissect doctor: Spark did not start (no JVM); check Java\n"


def test_doctor_help_states_the_whole_rule() -> None:
    text = " ".join(doctor.HELP.split())
    rule = text[text.index("Exit status:"):]
    for says in ("0 when no finding is critical", "1 when one is", "2 on bad use", "3 when an input is damaged",
                 "4 when doctor itself fails"):
        assert says in rule, says


def test_the_readme_documents_each_status() -> None:
    text = (REPO / "README.md").read_text()
    table = re.search(r"\| exit \| meaning \|\n\|---\|---\|\n((?:\|.*\|\n)+)", text)
    assert table
    codes = [line.split("|")[1].strip() for line in table.group(1).splitlines()]
    assert codes == ["0", str(errors.EXIT_FAILED), str(errors.EXIT_USAGE), str(errors.EXIT_DAMAGED),
                     str(errors.EXIT_DOCTOR_FAILED), "130, 143"]
