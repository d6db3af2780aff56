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


def test_a_long_log_indexed_in_many_runs_finds_every_key_and_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    import os
    import tempfile

    from capture.tls import keylog
    monkeypatch.setattr(keylog, "_FLUSH", 50)              # many runs on disk, and merges of them
    monkeypatch.setattr(keylog, "_CHUNK", 4096)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    path = tmp_path / "keys.log"
    randoms = [os.urandom(32) for _ in range(3000)]
    randoms[1] = randoms[0][:3] + os.urandom(29)            # the same index prefix: told apart by the line
    path.write_text("".join(f"CLIENT_RANDOM {r.hex()} {i:096x}\n" for i, r in enumerate(randoms[:2000])))
    log = KeyLog([path], live=True)
    log.refresh()
    with open(path, "a") as f:                              # a live log growing by many runs again
        f.write("".join(f"CLIENT_RANDOM {r.hex()} {i + 2000:096x}\n" for i, r in enumerate(randoms[2000:])))
    assert log.refresh() and log.lines == 3000
    for i in range(0, 3000, 7):
        assert log.lookup(randoms[i]) == {"CLIENT_RANDOM": bytes.fromhex(f"{i:096x}")}
    assert log.lookup(randoms[1]) == {"CLIENT_RANDOM": bytes.fromhex(f"{1:096x}")}
    assert log.lookup(os.urandom(32)) == {}
    path.write_text(f"CLIENT_RANDOM {R1} {MS}\n")           # rewritten shorter: indexed again from the start
    log.refresh()
    assert log.lookup(bytes.fromhex(R1)) == {"CLIENT_RANDOM": bytes.fromhex(MS)} and log.lookup(randoms[5]) == {}
    assert not list(private.iterdir())                      # the index file has no name: nothing to clean up


def test_without_a_usable_temporary_directory_the_index_stays_in_memory(tmp_path: Path, monkeypatch) -> None:
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    path = tmp_path / "keys.log"
    path.write_text(TEXT)
    log = KeyLog([path])
    assert log.lookup(bytes.fromhex(R1)) == {"CLIENT_RANDOM": bytes.fromhex(MS)}
