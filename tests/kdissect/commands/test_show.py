"""``kdissect show`` on the bundled samples: the filters a tshark user reaches for, frame numbers as
Wireshark counts them, standard input, the compact view and the -V tree."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

import pyarrow.dataset as pads
import pytest

from tests.kdissect.commands.test_cli import kd
from tests.kdissect.conftest import REPO, SAMPLES

MIXED = SAMPLES / "mixed.pcap"


def lines(*args: object) -> list[str]:
    p = kd("show", *map(str, args))
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def messages(out: list[str]) -> list[str]:
    return [line for line in out if not line.lstrip().startswith("!")]


def test_topic_filter_finds_fetches_that_name_the_topic_by_id() -> None:
    # Fetch v13+ names topics by id; the capture's Metadata responses name them.
    out = lines(MIXED, "--topic", "mixed-kp", "--api", "Fetch")
    by_version = {v: sum(f"Fetch {v} " in line for line in out) for v in ("v12", "v16")}
    assert by_version == {"v12": 14, "v16": 16}
    assert all("mixed-kp[" in line for line in out)            # ids shown by name
    assert all("client=kd-mixed-ck-consumer" in line for line in out if "v16 request" in line)
    named: dict[str, str] = {}
    name = None
    for line in lines(MIXED, "--api", "Metadata", "-V"):
        if line.strip().startswith("name: "):
            name = line.split("name: ")[1].strip("'")
        elif line.strip().startswith("topic_id: ") and name is not None and "AAAAAAAAAAAAAAAAAAAAAA" not in line:
            named[name] = line.split("topic_id: ")[1].strip("'")
    kp = named["mixed-kp"]
    # A topic id given as the filter matches too, though its name is known.
    assert lines(MIXED, "--api", "Fetch", "--topic", kp) == [line for line in out if "Fetch v16" in line]


def test_frame_numbers_are_wiresharks() -> None:
    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark not installed (apt-get install tshark)")
    for sample in ("tansu-kafka-python.pcap", "group-rebalance.pcap"):
        out = messages(lines(SAMPLES / sample))
        ours = {(int(line.split()[0]), int(line.split("corr=")[1].split()[0])) for line in out}
        ports = {line.split()[4].rsplit(":", 1)[1] for line in out}
        decode_as = [a for p in sorted(ports) for a in ("-d", f"tcp.port=={p},kafka")]
        p = subprocess.run([tshark, "-r", str(SAMPLES / sample), *decode_as, "-Y", "kafka", "-T", "fields",
                            "-e", "frame.number", "-e", "kafka.correlation_id", "-E", "occurrence=a",
                            "-E", "aggregator=,"], capture_output=True, text=True, check=True)
        theirs = {(int(f), int(c)) for f, cs in (row.split("\t") for row in p.stdout.splitlines()) for c in cs.split(",")}
        assert ours == theirs, sample


def test_frames_filter() -> None:
    out = lines(MIXED, "--frames", "100-110")
    assert out and all(100 <= int(line.split()[0]) <= 110 for line in out)
    assert len(lines(MIXED, "--frames", "104")) == 1
    assert lines(MIXED, "--frames", "-8") == lines(MIXED, "-c", "3")


def test_unanswered_matches_the_dataset(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for sample in ("mixed.pcap", "group-rebalance.pcap"):
        out = lines(SAMPLES / sample, "--unanswered")
        assert out and all(line.endswith("[no response]") and " request " in line for line in out)
        assert kd("decode", SAMPLES / sample, "-o", tmp_path / sample, "-q").returncode == 0
        ex = pads.dataset(tmp_path / sample / "exchanges").to_table(columns=["status", "correlation_id"]).to_pylist()
        assert len(out) == sum(r["status"] == "no_response" for r in ex)
    # Unfiltered, a ! line says which request went unanswered, by its frame.
    marks = [line for line in lines(MIXED) if "no_response:" in line]
    assert len(marks) == 1 and "Metadata v12 request corr=23 (frame 473)" in marks[0]


def test_slower_than_leaves_idle_long_polls_out() -> None:
    out = lines(MIXED, "--slower-than", "100")
    assert len(out) == 3 and all("JoinGroup" in line for line in out)
    with_idle = lines(MIXED, "--slower-than", "100", "--include-idle")
    assert len(with_idle) == 22 and sum("Fetch" in line for line in with_idle) == 19


def test_time_range() -> None:
    out = lines(MIXED, "--since", "3.1", "--until", "3.15")
    times = [float(line.split()[1]) for line in out]
    assert out and all(3.1 <= t <= 3.15 for t in times)
    first = lines(MIXED, "-t", "-c", "1")[0].split()
    start = f"{first[1]}T{first[2]}"
    absolute = lines(MIXED, "--since", start, "-c", "5")
    assert absolute == lines(MIXED, "-c", "5")
    p = kd("show", MIXED, "--since", "yesterday")
    assert p.returncode == 2 and "--since" in p.stderr and p.stderr.count("\n") == 1


def test_standard_input() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    whole = lines(MIXED)
    for data in (MIXED.read_bytes(), gzip.compress(MIXED.read_bytes())):
        p = subprocess.run([sys.executable, "-m", "kdissect", "show", "-"], input=data, capture_output=True,
                           check=False, env=env, cwd=REPO)
        assert p.returncode == 0 and p.stdout.decode().splitlines() == whole, p.stderr
    p = subprocess.run([sys.executable, "-m", "kdissect", "show", "-", "--topic", "mixed-kp"], input=MIXED.read_bytes(),
                       capture_output=True, check=False, env=env, cwd=REPO)
    assert p.stdout.decode().splitlines() == lines(MIXED, "--topic", "mixed-kp")
    p = subprocess.run([sys.executable, "-m", "kdissect", "show", "-"], input=b"not a capture at all, just words",
                       capture_output=True, check=False, env=env, cwd=REPO)
    assert p.returncode == 3 and p.stderr.decode().count("\n") == 1


def test_compact_lines_fit() -> None:
    wide = lines(MIXED)
    compact = lines(MIXED, "--compact")
    assert len(compact) == len(wide) and max(map(len, compact)) <= 120
    assert sum(len(line) > 120 for line in wide) > 0
    assert compact[0].split()[:2] == wide[0].split()[:2] and "52688>9092" in compact[0]


def test_verbose_tree_speaks_like_wireshark() -> None:
    out = lines(SAMPLES / "tansu-admin-errors.pcap", "--errors", "-V", "-c", "1")
    assert "        length: 61" in out                              # the size field, as tshark's Length
    assert any(line.strip() == "error_code: 36 TOPIC_ALREADY_EXISTS" for line in out)
    assert "        [request in frame 30]" in out                 # tshark: [Request Frame: 30]


def test_known_quirks_are_said() -> None:
    quirks = [line for line in lines(MIXED) if "trailing_bytes" in line]
    assert len(quirks) == 1
    assert "known quirk of librdkafka 2.16.0 (confluent-kafka-python)" in quirks[0]
    mock = [line for line in lines(SAMPLES / "mock-transactions.pcap") if "trailing_bytes" in line]
    assert mock and all("known quirk of" in line for line in mock)


def test_help_names_the_filters() -> None:
    text = kd("show", "--help").stdout
    for option in ("--topic", "--client-id", "--api", "--errors", "--unanswered", "--slower-than", "--include-idle",
                   "--since", "--until", "--frames", "--compact", "examples:"):
        assert option in text
    assert "OUTDIR" not in text


def _cut(tmp_path, frames: str):  # type: ignore[no-untyped-def]
    """The mixed sample from a frame on, as a capture begun late has it (editcap, from tshark's package)."""
    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.skip("editcap not installed (apt-get install tshark)")
    out = tmp_path / f"cut-{frames}.pcap"
    subprocess.run([editcap, "-r", str(MIXED), str(out), frames], check=True, capture_output=True)
    return out


def _corrs(out: list[str]) -> list[tuple[str, str]]:
    return [(line.split()[6], line.split("corr=")[1].split()[0]) for line in out]


def test_topic_filter_reads_ahead_for_names_taught_later(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Begun at frame 280, the capture has Fetch v16 requests naming mixed-kp by id before any Metadata
    # response names it: a file is read ahead once for the names.
    late = _cut(tmp_path, "280-100000")
    whole = lines(MIXED, "--topic", "mixed-kp", "--api", "Fetch")
    assert _corrs(lines(late, "--topic", "mixed-kp", "--api", "Fetch")) == _corrs(whole)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "kdissect", "show", "-", "--topic", "mixed-kp", "--api", "Fetch"],
                       input=late.read_bytes(), capture_output=True, check=False, env=env, cwd=REPO)
    piped = p.stdout.decode().splitlines()
    assert p.returncode == 0 and 0 < len(piped) < len(whole)
    assert "a pipe is read once" in p.stderr.decode() and "Traceback" not in p.stderr.decode()


def test_topic_filter_says_which_ids_it_could_not_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = kd("show", _cut(tmp_path, "300-350"), "--topic", "mixed-kp", "--api", "Fetch")
    assert p.returncode == 0 and p.stdout
    assert "no Metadata response in the capture names" in p.stderr and "give --topic the id" in p.stderr
