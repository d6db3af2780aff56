"""Every command's ``--help`` teaches with examples, and they run as written.

Each line of an ``examples:`` block (the main help's ``Start here:``) runs in a shell, in a directory
holding files of the names the examples use (traffic.pcap, caps/, out/, ...) made from the bundled
samples, so nothing in the line is rewritten. A line that needs what a test run has not (root and an
interface, a server left running, a cluster; Java or tshark when missing) is checked by the parser only:
every ``kdissect`` command in it must be accepted by ``build_parser().parse_args``."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kdissect
from kdissect.commands.parser import build_parser

from tests.kdissect.conftest import REPO, SAMPLES
from tests.kdissect.commands.test_cli import no_stack_trace

COMMANDS = ["decode", "spark-decode", "show", "live", "doctor", "compare", "analyze", "spark-server", "protocol"]
HEADINGS = ("examples:", "Start here:")

# What a line needs that a test run has not: checked by the parser only.
NEEDS = [
    (re.compile(r"^sudo |\btcpdump\b|\bkdissect live\b"), "root and a network interface, and no end"),
    (re.compile(r"\bspark-server\b|KDISSECT_SPARK_REMOTE"), "a Spark Connect server left running"),
    (re.compile(r"spark://|hdfs://|/shared/"), "a Spark cluster"),
]
JVM = re.compile(r"\bspark-decode\b|--engine spark|--master\b")
TSHARK = re.compile(r"\bkdissect compare\b")
# doctor's 1 is a critical finding: a result, not a failure.
ALLOWED_EXIT = {"doctor": (0, 1)}


def help_text(command: str | None) -> str:
    parser = build_parser(command)
    if command is None:
        return parser.format_help()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command].format_help()   # type: ignore[attr-defined]


def examples(text: str) -> list[str]:
    """The lines of the help's examples block: indented, up to the first blank line."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line in HEADINGS]
    if not starts:
        return []
    found = []
    for line in lines[starts[0] + 1:]:
        if not line.startswith("  ") or not line.strip():
            break
        found.append(line.strip())
    return found


def words(line: str) -> list[str]:
    """A shell line's words and operators, its comment left out."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return list(lex)


def kdissect_argvs(line: str) -> list[list[str]]:
    """The arguments of every ``kdissect`` command in a shell line (after sudo, in a pipe, in $(...))."""
    argvs: list[list[str]] = []
    command: list[str] = []
    for token in [*words(line), ";"]:
        if token and set(token) <= set("();<>|&"):
            while command and (command[0] == "sudo" or "=" in command[0]):
                command = command[1:]
            if command[:1] == ["kdissect"]:
                argvs.append(command[1:])
            command = []
        else:
            command.append(token)
    return argvs


def parses(argv: list[str]) -> None:
    try:
        build_parser(argv[0] if argv else None).parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"kdissect {shlex.join(argv)}: not accepted (exit {exc.code})") from None


def why_not_run(line: str) -> str | None:
    code = " ".join(words(line))
    for pattern, need in NEEDS:
        if pattern.search(code):
            return need
    if JVM.search(code) and shutil.which("java") is None:
        return "Java"
    if TSHARK.search(code) and shutil.which("tshark") is None:
        return "tshark"
    return None


@pytest.mark.parametrize("command", [None, *COMMANDS], ids=lambda c: c or "main")
def test_every_help_has_examples_the_parser_accepts(command: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    lines = examples(help_text(command))
    assert lines, f"kdissect {command or ''} --help has no examples"
    for line in lines:
        argvs = kdissect_argvs(line)
        assert argvs or line.startswith("python "), line
        for argv in argvs:
            parses(argv)
    assert capsys.readouterr().err == ""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding what the examples name: captures, a directory of captures, datasets, a key log."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SAMPLES / "mixed.pcap", work / "traffic.pcap")
    shutil.copy(SAMPLES / "tls" / "tls13-port19443.pcapng", work / "traffic.pcapng")
    shutil.copy(SAMPLES / "tls" / "tls13.keys", work / "keys.log")
    for name in ("caps", "rotated"):
        (work / name).mkdir()
        shutil.copy(SAMPLES / "mixed.pcap", work / name / "mixed.pcap")
    for name, sample in (("out", "mixed.pcap"), ("day1", "mixed.pcap"), ("day2", "tansu-consume-group.pcap")):
        kdissect.write_dataset([SAMPLES / sample], work / name)
    # `kdissect` and `python` as a user's shell finds them: this checkout, this interpreter.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, run in (("kdissect", f'"{sys.executable}" -m kdissect'), ("python", f'"{sys.executable}"')):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {run} "$@"\n')
        script.chmod(0o755)
    return work


def run_line(line: str, work: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KDISSECT_SPARK_REMOTE")}
    env.update(PATH=f"{work.parent / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO))
    return subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


SLOW = pytest.mark.slow   # doctor and analyze start an engine; spark-decode and --engine spark, a JVM


@pytest.mark.parametrize("command", [
    pytest.param(None, id="main", marks=SLOW), "decode", pytest.param("spark-decode", marks=SLOW), "show", "live",
    pytest.param("doctor", marks=SLOW), pytest.param("compare", marks=SLOW), pytest.param("analyze", marks=SLOW),
    pytest.param("spark-server", marks=SLOW), "protocol",
])
def test_examples_run_as_written(command: str | None, workdir: Path) -> None:
    for line in examples(help_text(command)):
        if why_not_run(line) is not None:
            continue                         # parsed by the test above
        p = run_line(line, workdir)
        name = kdissect_argvs(line)[0][0] if kdissect_argvs(line) else None
        assert p.returncode in ALLOWED_EXIT.get(name or "", (0,)), f"{line}\nexit {p.returncode}\n{p.stderr[-3000:]}"
        no_stack_trace(p.stderr)
