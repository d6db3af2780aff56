"""The command line, run as users run it: ``python -m kdissect`` in a subprocess."""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.kdissect.conftest import REPO, public, read_table

# A stack trace on stderr, Python's or the JVM's (py4j passes Spark's on): no command prints one, on any path.
STACK_TRACE = re.compile(r"Traceback \(most recent call last\)|^\s*at (?:org\.apache|java\.|scala\.)"
                         r"|Exception in thread", re.M)


def no_stack_trace(stderr: str) -> None:
    found = STACK_TRACE.search(stderr)
    assert found is None, f"a stack trace on stderr:\n{stderr[max(found.start() - 500, 0):found.start() + 1500]}"


def kd(*args: str, cwd: Path = REPO, stack_trace_ok: bool = False) -> subprocess.CompletedProcess[str]:
    """``kdissect ARGS`` in a subprocess; its stderr holds no stack trace unless ``stack_trace_ok``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "kdissect", *map(str, args)], capture_output=True, text=True,
                       check=False, cwd=cwd, env=env, timeout=300)
    if not stack_trace_ok:
        no_stack_trace(p.stderr)
    return p


def one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode != 0
    no_stack_trace(p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_help_teaches() -> None:
    p = kd("--help")
    assert p.returncode == 0
    for cmd in ("decode", "show", "live", "compare", "protocol"):
        assert cmd in p.stdout
    p = kd("decode", "--help")
    assert p.returncode == 0 and "examples:" in p.stdout and "--records" in p.stdout


def test_commands_that_read_no_capture_start_without_importing_capture() -> None:
    """analyze, spark-server and --help need neither capture nor the dissector: their import was a sixth of
    a second of every start."""
    code = ("import sys; from kdissect.commands.parser import build_parser; build_parser('analyze'); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'capture', 'dissector'}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    no_stack_trace(p.stderr)
    assert p.stdout.strip() == "[]", p.stdout


def test_decode_prints_a_summary(tmp_path: Path) -> None:
    p = kd("decode", public("ntop__nDPI__kafka-2024-05-rdkafka.pcapng"),
           public("ntop__nDPI__kafka-2023-12-original.pcapng"), "-o", tmp_path / "out")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # no progress bar when stderr is not a terminal
    out = p.stdout
    assert "read 2 captures" in out
    assert "connections  9" in out
    assert "Metadata" in out and "Produce" in out
    assert "orphan_response" in out and "no_response" in out
    assert str(tmp_path / "out") in out
    assert read_table(tmp_path / "out", "exchanges").num_rows > 10


def test_missing_input(tmp_path: Path) -> None:
    one_line_error(kd("decode", tmp_path / "nope.pcap", "-o", tmp_path / "out"), "nope.pcap", "no such file")
    assert not (tmp_path / "out").exists()  # nothing written for a bad command


def test_not_a_capture(tmp_path: Path) -> None:
    text = tmp_path / "notes.pcap"
    text.write_text("these are my notes, not a capture\n")
    one_line_error(kd("decode", text, "-o", tmp_path / "out"), "notes.pcap", "text")
    one_line_error(kd("show", text), "notes.pcap")


def test_directory_without_captures(tmp_path: Path) -> None:
    one_line_error(kd("decode", tmp_path, "-o", tmp_path / "out"), "no capture files")


def test_unwritable_outdir(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        target = Path("/proc/kdissect-test/out")  # even root cannot create directories in /proc
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        target = ro / "out"
    one_line_error(kd("decode", public("arkime__arkime__kafka.pcap"), "-o", target), str(target), "cannot")


def test_outdir_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(kd("decode", public("arkime__arkime__kafka.pcap"), "-o", f), "not a directory")
    one_line_error(kd("decode", public("arkime__arkime__kafka.pcap"), "-o", f / "sub"), "cannot create")


def test_bad_options() -> None:
    one_line_error(kd("decode", "x.pcap", "-o", "out", "--frobnicate"), "unrecognized arguments: --frobnicate")
    one_line_error(kd("decode", "x.pcap"), "-o/--output")
    one_line_error(kd("decode", public("arkime__arkime__kafka.pcap"), "-o", "/tmp/x", "--ports", "90x"), "--ports")
    one_line_error(kd("show", public("arkime__arkime__kafka.pcap"), "--api", "Prodace"), "unknown api", "Produce")
    one_line_error(kd("show", public("arkime__arkime__kafka.pcap"), "--slower-than", "-3"), "greater than 0")
    one_line_error(kd("nosuchcommand"), "invalid choice")


def test_show_lines() -> None:
    p = kd("show", public("ntop__nDPI__kafka-2023-12-original.pcapng"))
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if not line.lstrip().startswith("!")]
    assert len(lines) == 8
    assert "ApiVersions v3 request" in lines[0] and "corr=3" in lines[0] and "client=console-producer" in lines[0]
    assert "ApiVersions v3 response" in lines[1] and " ms" in lines[1] and "NONE" in lines[1]
    assert "127.0.0.1:46136 -> 127.0.0.1:9092" in lines[0] and "<-" in lines[1]


def test_show_filters() -> None:
    cap = public("ntop__nDPI__kafka-2023-12-original.pcapng")
    p = kd("show", cap, "--api", "produce")
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and all("Produce v9" in line for line in lines)
    assert all("[0]" in line for line in lines)  # topic[partition] summary
    p = kd("show", cap, "--slower-than", "10")
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and "Produce v9 response" in lines[0]
    assert kd("show", cap, "--client-id", "someone-else").stdout == ""
    assert len(kd("show", cap, "--client-id", "console-producer").stdout.splitlines()) == 8
    p = kd("show", public("deepflowio__deepflow__01-fetch-v12-unknown.pcap"), "--errors")
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and "UNKNOWN_ERROR_CODE(5120)" in lines[0]
    p = kd("show", public("deepflowio__deepflow__00-produce-v7-sw8.pcap"), "--topic", "quickstart-events")
    assert len(p.stdout.splitlines()) == 2
    assert kd("show", public("deepflowio__deepflow__00-produce-v7-sw8.pcap"), "--topic", "other").stdout == ""


def test_show_verbose_tree() -> None:
    p = kd("show", public("deepflowio__deepflow__00-produce-v7-sw8.pcap"), "-V")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Kafka Produce v7 request" in out and "Kafka Produce v7 response" in out
    assert "client_id: 'kafka-python-producer-1'" in out
    assert "name: 'quickstart-events'" in out and "base_offset: 7" in out
    assert "key 'MyKey'" in out and "value 'Hello Kafka'" in out and "header 'sw8'" in out


def test_show_count_and_pipe_closed() -> None:
    p = kd("show", public("ntop__nDPI__kafka-2024-05-rdkafka.pcapng"), "-c", "3")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 3
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = f"{sys.executable} -m kdissect show {public('ntop__nDPI__kafka-2024-05-rdkafka.pcapng')} -V | head -1"
    p2 = subprocess.run(["bash", "-c", cmd], check=False, capture_output=True, text=True, env=env)
    no_stack_trace(p2.stderr)
    assert len(p2.stdout.splitlines()) == 1


def test_protocol_table() -> None:
    p = kd("protocol")
    assert p.returncode == 0
    assert "Produce" in p.stdout and "Fetch" in p.stdout and "api keys" in p.stdout.splitlines()[-1]


def test_compare_is_wired() -> None:
    import shutil
    one_line_error(kd("compare", "/nonexistent/x.pcap"), "no such file")
    if shutil.which("tshark") is None:
        return  # compare's own tests cover the missing-tshark message
    p = kd("compare", public("deepflowio__deepflow__00-produce-v7-sw8.pcap"))
    assert p.returncode == 0, p.stderr
    assert "messages compared" in p.stdout


def test_decompression_cap_reports_instead_of_inflating(tmp_path: Path) -> None:
    sample = REPO / "samples" / "tansu-produce-codecs.pcap"
    p = kd("decode", str(sample), "-o", str(tmp_path), "--records", "--max-decompressed", "0", "-q")
    assert p.returncode == 0, p.stderr
    kinds = read_table(tmp_path, "anomalies").column("kind").to_pylist()
    # Every compressed batch (gzip, snappy, lz4, zstd) is over a 0 MiB cap; uncompressed ones still decode.
    assert kinds.count("records_decode") >= 4
    records = read_table(tmp_path, "records")
    assert records.num_rows > 0


def test_installed_command_is_python_m_kdissect() -> None:
    """The console script and ``python -m kdissect`` both go through cli.run (main, then the quick exit)."""
    import tomllib
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"kdissect": "kdissect.commands.cli:run"}
    assert "sys.exit(run())" in (REPO / "kdissect" / "__main__.py").read_text()
    p = kd("decode", REPO / "samples" / "no-such.pcap", "-o", REPO / "out-never")
    one_line_error(p, "no-such.pcap")
    assert p.returncode == 2 and not (REPO / "out-never").exists()   # a missing input is bad use


def test_the_command_works_out_the_dataclass_field_spec_once() -> None:
    """Cython's dataclasses ask it of every field as the compiled modules load (kdissect.commands.cli.run)."""
    from kdissect.commands.cli import _field_spec_once

    real = inspect.getfullargspec
    with _field_spec_once():
        spec = inspect.getfullargspec(dataclasses.field)
        assert spec == real(dataclasses.field) and inspect.getfullargspec(dataclasses.field) is spec
        assert inspect.getfullargspec(dataclasses.replace) == real(dataclasses.replace)
    assert inspect.getfullargspec is real
