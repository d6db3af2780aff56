"""Rotated captures: which files continue one another, and reading them as one stream of records.

The rotated sets are cut from real captures by the tools users rotate with:
``editcap -c`` (Wireshark's, as dumpcap's ring buffer names its files) and
``tcpdump -C`` (reading a capture back and writing it out rotated).
"""

from __future__ import annotations

import gzip
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from capture import CaptureError, capture_sets, open_capture
from capture.rotation import (
    ChainSource,
    _gzip_pcap_last_ts,
    _pcap_last_ts,
    _pcapng_last_ts,
    _read_last_ts,
    probe,
    rotation_key,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
PUBLIC = REPO.parent / "shared" / "public-captures"
EVERY_CAPTURE = sorted([*SAMPLES.rglob("*.pcap"), *SAMPLES.rglob("*.pcapng"), *PUBLIC.glob("*.pcap*")])


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed (apt-get install tshark tcpdump)")
    return path


def editcap_split(src: Path, outdir: Path, packets: int, name: str | None = None) -> list[Path]:
    """``editcap -c``: ``<name>_00000_<time>.<ext>``, ... as Wireshark's tools name the files."""
    outdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([need("editcap"), "-c", str(packets), str(src), str(outdir / (name or src.name))], check=True)
    return sorted(outdir.iterdir())


def records(source) -> list[tuple]:
    try:
        return list(source)
    finally:
        source.close()


@pytest.mark.parametrize(("names", "key"), [
    (["x.pcap", "x.pcap1", "x.pcap2", "x.pcap10"], "x.pcap"),                       # tcpdump -C
    (["x.pcap00", "x.pcap01", "x.pcap02"], "x.pcap"),                               # tcpdump -C -W 3
    (["dump-20261125-101500.pcap", "dump-20261125-101600.pcap"], "dump-#-#.pcap"),  # tcpdump -G strftime
    (["ring_00001_20261125101500.pcapng", "ring_00002_20261125101612.pcapng"], "ring_#_#.pcapng"),  # dumpcap -b
    (["x.pcap.gz", "x.pcap1.gz"], "x.pcap.gz"),                                     # tcpdump -C -z gzip
])
def test_the_names_a_rotation_gives_share_one_key(names: list[str], key: str) -> None:
    assert {rotation_key(n) for n in names} == {key}


def test_names_that_differ_in_more_than_numbers_do_not() -> None:
    assert rotation_key("tls13-chacha.pcap") != rotation_key("tls13-aes128.pcap")
    assert rotation_key("x.pcap") != rotation_key("x.pcapng")
    assert rotation_key("broker1.pcap") == rotation_key("broker2.pcap")   # then time decides


@pytest.mark.parametrize("path", EVERY_CAPTURE, ids=[p.name for p in EVERY_CAPTURE])
def test_the_last_packet_time_is_the_last_records(path: Path) -> None:
    span = probe(path)
    assert span is not None
    recs = records(open_capture(path))
    assert (span.first_ts, span.last_ts, span.linktype) == (recs[0][0], max(recs[-1][0], recs[0][0]), recs[0][1])


@pytest.mark.parametrize("name", ["group-rebalance", "mixed", "legacy-clients"])
def test_a_gzipped_pcap_gives_its_last_packet_time_too(name: str, tmp_path: Path) -> None:
    gz = tmp_path / f"{name}.pcap.gz"
    gz.write_bytes(gzip.compress((SAMPLES / f"{name}.pcap").read_bytes()))
    recs = records(open_capture(SAMPLES / f"{name}.pcap"))
    assert probe(gz).last_ts == recs[-1][0]  # type: ignore[union-attr]
    assert _gzip_pcap_last_ts(gz) == recs[-1][0]


def test_a_pcapng_gives_its_last_packet_time_from_its_tail(tmp_path: Path) -> None:
    """As Wireshark's writers lay pcapng out (editcap -F pcapng, and the keys-in-file TLS sample)."""
    written = tmp_path / "group-rebalance.pcapng"
    subprocess.run([need("editcap"), "-F", "pcapng", str(SAMPLES / "group-rebalance.pcap"), str(written)], check=True)
    for path in (written, SAMPLES / "tls" / "tls13-port19443.pcapng", *PUBLIC.glob("*.pcapng")):
        assert _pcapng_last_ts(path) == records(open_capture(path))[-1][0], path.name
    late = tmp_path / "late-interface.pcapng"     # an interface described after packets: read through
    data = written.read_bytes()
    shb_len = int.from_bytes(data[4:8], "little")
    idb_len = int.from_bytes(data[shb_len + 4:shb_len + 8], "little")
    idb = data[shb_len:shb_len + idb_len]
    late.write_bytes(data + idb)
    assert _pcapng_last_ts(late) is None
    assert probe(late).last_ts == records(open_capture(late))[-1][0]  # type: ignore[union-attr]


def test_a_pcap_cut_inside_its_last_record_is_read_through(tmp_path: Path) -> None:
    whole = (SAMPLES / "mixed.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(whole[:-5])
    assert probe(cut).last_ts == _read_last_ts(cut) == records(open_capture(cut))[-1][0]  # type: ignore[union-attr]


def test_a_tail_made_of_candidates_gives_up_and_is_read_through(tmp_path: Path) -> None:
    """Hand-built (no writer makes it): every 16 bytes a header whose length reaches the end of the file,
    none chaining to another. The tail search stops at its budget instead of trying each against each."""
    n = 1 << 20
    body = bytearray(n)
    for p in range(0, n - 16, 16):
        struct.pack_into("<IIII", body, p, 1, 0, n - p - 16, n)
    craft = tmp_path / "craft.pcap"
    craft.write_bytes((SAMPLES / "mixed.pcap").read_bytes()[:24] + bytes(body))
    assert _pcap_last_ts(craft) is None
    recs = records(open_capture(craft))
    assert recs and probe(craft).last_ts == max(recs[-1][0], recs[0][0])  # type: ignore[union-attr]


def test_not_a_capture_and_an_empty_capture_have_no_span(tmp_path: Path) -> None:
    (tmp_path / "notes.pcap").write_text("hello\n")
    (tmp_path / "empty.pcap").write_bytes((SAMPLES / "mixed.pcap").read_bytes()[:24])
    assert probe(tmp_path / "notes.pcap") is None and probe(tmp_path / "empty.pcap") is None


def test_a_split_capture_is_one_set_in_time_order_however_listed(tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / "group-rebalance.pcap", tmp_path, 500)
    assert len(files) >= 5
    shuffled = files[:]
    random.Random(7).shuffle(shuffled)
    assert capture_sets(shuffled) == [tuple(files)]


def test_a_tcpdump_ring_that_wrapped_is_ordered_by_time_not_by_number(tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / "group-rebalance.pcap", tmp_path / "split", 700)
    ring = tmp_path / "ring"
    ring.mkdir()
    # tcpdump -C -W 3 after wrapping: the oldest surviving file is x.pcap2, then x.pcap0, x.pcap1.
    order = [2, 0, 1]
    kept = []
    for src, n in zip(files[-3:], order):
        kept.append(shutil.copy(src, ring / f"x.pcap{n}"))
    assert capture_sets(sorted(ring.iterdir())) == [tuple(Path(k) for k in kept)]


def test_real_tcpdump_rotation_is_one_set(tmp_path: Path) -> None:
    """tcpdump -C 1 over 2+ MB of real traffic writes x.pcap, x.pcap1, x.pcap2, ..."""
    need("tcpdump")
    big = long_capture(tmp_path)
    out = tmp_path / "rot"
    out.mkdir()
    as_me = ["-Z", "root"] if os.geteuid() == 0 else []     # tcpdump -C drops root before writing
    subprocess.run([need("tcpdump"), "-r", str(big), "-w", str(out / "x.pcap"), "-C", "1", *as_me],
                   check=True, capture_output=True)
    files = sorted(out.iterdir(), key=lambda p: (len(p.name), p.name))
    assert [p.name for p in files][:3] == ["x.pcap", "x.pcap1", "x.pcap2"]
    assert capture_sets(sorted(files)) == [tuple(files)]
    assert records(ChainSource(files)) == records(open_capture(big))


def long_capture(tmp_path: Path, copies: int = 4) -> Path:
    """The largest sample played ``copies`` times one after the other (each 1 s after the last): 2+ MB."""
    src = SAMPLES / "group-rebalance.pcap"
    span = probe(src)
    assert span is not None
    step = (span.last_ts - span.first_ts) // 1_000_000_000 + 1
    parts = []
    for i in range(copies):
        part = tmp_path / f"part{i}.pcap"
        subprocess.run([need("editcap"), "-t", str(i * step), str(src), str(part)], check=True)
        parts.append(part)
    big = tmp_path / "long.pcap"
    subprocess.run([need("mergecap"), "-a", "-F", "pcap", "-w", str(big), *map(str, parts)], check=True)
    for p in parts:
        p.unlink()
    return big


def test_sources_named_alike_that_interleave_in_time_make_one_set_each(tmp_path: Path) -> None:
    """Two brokers' rotations in one directory (broker1_..., broker2_...), over the same minutes."""
    one, two = SAMPLES / "group-rebalance.pcap", SAMPLES / "tansu-consume-group.pcap"
    s1, s2 = probe(one), probe(two)
    assert s1 is not None and s2 is not None
    moved = tmp_path / "two.pcap"       # broker 2's traffic starts 2 s after broker 1's
    subprocess.run([need("editcap"), "-t", f"{(s1.first_ts - s2.first_ts) / 1e9 + 2:.6f}", str(two), str(moved)],
                   check=True)
    a = editcap_split(one, tmp_path / "split", 300, name="broker1.pcap")
    b = [f for f in editcap_split(moved, tmp_path / "split", 40, name="broker2.pcap") if f not in a]
    assert len(a) > 3 and len(b) > 3
    got = capture_sets(sorted((tmp_path / "split").iterdir()))
    assert sorted(got) == sorted([tuple(a), tuple(b)])


def test_samples_and_public_captures_are_never_joined() -> None:
    """Recordings named alike (tls12-chacha / tls13-chacha, deepflow's 00-produce-v2 / -v9) lie apart in time."""
    files = [p for p in EVERY_CAPTURE]
    assert capture_sets(files) == [(p,) for p in files]


def test_copies_that_overlap_in_time_stay_apart(tmp_path: Path) -> None:
    """Two taps of the same moments (here: the same capture twice) are not one rotation."""
    for n in (1, 2):
        shutil.copy(SAMPLES / "mixed.pcap", tmp_path / f"tap{n}.pcap")
    assert capture_sets(sorted(tmp_path.iterdir())) == [(tmp_path / "tap1.pcap",), (tmp_path / "tap2.pcap",)]


def test_a_gap_longer_than_the_limit_ends_the_set(tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / "group-rebalance.pcap", tmp_path / "a", 800)
    moved = tmp_path / "b"
    moved.mkdir()
    for i, f in enumerate(files):      # from the third file on, everything an hour later
        dst = moved / f.name
        if i < 2:
            shutil.copy(f, dst)
        else:
            subprocess.run([need("editcap"), "-t", "3600", str(f), str(dst)], check=True)
    got = capture_sets(sorted(moved.iterdir()))
    assert got == [tuple(moved / f.name for f in files[:2]), tuple(moved / f.name for f in files[2:])]


def test_different_link_types_stay_apart(tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / "mixed.pcap", tmp_path / "a", 60)
    changed = tmp_path / "b"
    changed.mkdir()
    shutil.copy(files[0], changed / files[0].name)
    # Same packets, second file relabelled as raw IP: no longer the same capture.
    subprocess.run([need("editcap"), "-T", "rawip", str(files[1]), str(changed / files[1].name)], check=True)
    assert len(capture_sets(sorted(changed.iterdir()))) == 2


def test_the_chain_reads_the_files_records_in_order_and_counts_their_bytes(tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / "tansu-consume-group.pcap", tmp_path, 100)
    files[1] = gzip_file(files[1])                     # a compressed member reads the same
    chain = ChainSource(files)
    assert chain.size == sum(f.stat().st_size for f in files)
    got = records(chain)
    assert got == records(open_capture(SAMPLES / "tansu-consume-group.pcap"))
    assert chain.bytes_read == chain.size and chain.records == len(got)


def split_pcapng(src: Path, outdir: Path, packets: int) -> list[Path]:
    """A pcapng cut every ``packets`` packets as a rotating writer cuts it: each file opens with the
    section header and interface blocks; every other block stays where it was (the keys in the first)."""
    data = src.read_bytes()
    assert data[8:12] == b"\x4d\x3c\x2b\x1a"             # little-endian section
    head, files, current, count, pos = b"", [], b"", 0, 0
    while pos < len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        block = data[pos:pos + blen]
        pos += blen
        if btype in (0x0A0D0D0A, 1):
            head += block
            current += block
            continue
        if btype in (3, 6) and count and count % packets == 0:
            files.append(current)
            current = head
        count += btype in (3, 6)
        current += block
    files.append(current)
    outdir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, body in enumerate(files):
        out.append(outdir / f"ring_{i + 1:05d}.pcapng")
        out[-1].write_bytes(body)
    return out


def test_pcapng_files_chain_with_their_secrets(tmp_path: Path) -> None:
    """The TLS sample with its keys inside (a Decryption Secrets Block), cut in pieces: still one stream."""
    src = SAMPLES / "tls" / "tls13-port19443.pcapng"
    files = split_pcapng(src, tmp_path, 40)
    assert len(files) > 3 and capture_sets(files) == [tuple(files)]
    chain = ChainSource(files)
    assert records(chain) == records(open_capture(src))
    whole = open_capture(src)
    records(whole)
    assert chain.tls_secrets == whole.tls_secrets and chain.tls_secrets  # type: ignore[attr-defined]


def test_a_member_that_is_gone_is_reported_and_the_rest_is_read(tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / "mixed.pcap", tmp_path, 40)
    chain = ChainSource(files)
    files[2].unlink()
    got = records(chain)
    assert len(got) == len(records(open_capture(SAMPLES / "mixed.pcap"))) - 40
    assert [p.kind for p in chain.problems] == ["capture_corrupt"]
    assert files[2].name in chain.problems[0].detail


def test_the_first_member_must_be_a_capture(tmp_path: Path) -> None:
    (tmp_path / "a.pcap").write_text("nope")
    with pytest.raises(CaptureError):
        ChainSource([tmp_path / "a.pcap", SAMPLES / "mixed.pcap"])


def gzip_file(path: Path) -> Path:
    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return out
