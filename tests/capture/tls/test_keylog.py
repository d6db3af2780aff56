"""NSS key logs: the lines that count, the lines that do not, growth, and unreadable files."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.tls.errors import KeyLogError
from capture.tls.keylog import KeyLog, parse_line

R1, R2 = "11" * 32, "22" * 32
MS = "ab" * 48
TEXT = f"""# comment
CLIENT_RANDOM {R1} {MS}

EXPORTER_SECRET {R2} {"cd" * 48}
CLIENT_TRAFFIC_SECRET_0 {R2} {"ef" * 48}
SERVER_TRAFFIC_SECRET_0 {R2} {"01" * 48}
CLIENT_RANDOM {R1[:-2]}zz {MS}
CLIENT_RANDOM {"33" * 32} {MS[:-10]}"""


def test_labels_comments_junk_and_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "keys.log"
    path.write_text(TEXT)
    log = KeyLog([path])
    assert log.lookup(bytes.fromhex(R1)) == {"CLIENT_RANDOM": bytes.fromhex(MS)}
    assert set(log.lookup(bytes.fromhex(R2))) == {"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"}
    assert log.lookup(bytes.fromhex("33" * 32)) == {}      # the cut line: no secret of the wrong length
    assert log.lookup(b"\x44" * 32) == {}
    assert parse_line(b"CLIENT_RANDOM nothex") is None


def test_several_files_and_embedded_secrets_blocks(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(f"CLIENT_RANDOM {R1} {MS}\n")
    b.write_text(f"CLIENT_TRAFFIC_SECRET_0 {R2} {'ef' * 48}\n")
    log = KeyLog([a, b])
    log.blocks.append(f"SERVER_TRAFFIC_SECRET_0 {R2} {'01' * 48}\n".encode())
    assert set(log.lookup(bytes.fromhex(R2))) == {"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"}
    assert log.configured and log.lines == 3


def test_a_live_log_is_read_again_as_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "keys.log"
    path.write_text("")
    log = KeyLog([path], live=True)
    assert log.lookup(bytes.fromhex(R1)) == {} and not log.refresh()
    with open(path, "a") as f:
        f.write(f"CLIENT_RANDOM {R1} {MS[:50]}")             # a line being written: not read yet
    log.refresh()
    assert log.lookup(bytes.fromhex(R1)) == {}
    with open(path, "a") as f:
        f.write(MS[50:] + "\n")
    assert log.refresh() and log.generation == 1
    assert log.lookup(bytes.fromhex(R1)) == {"CLIENT_RANDOM": bytes.fromhex(MS)}


def test_an_unreadable_key_log_is_one_line_naming_the_file(tmp_path: Path) -> None:
    for bad in (tmp_path / "missing.log", tmp_path):
        with pytest.raises(KeyLogError) as err:
            KeyLog([bad])
        assert str(bad) in str(err.value) and "\n" not in str(err.value)
