"""A rotated capture decodes to the rows of the capture it was cut from: exchanges split by a rotation pair."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.commands.cli import main
from kdissect.run.decode import decode_files
from kdissect.run.source import DecodeOptions
from tests.capture.test_rotation import editcap_split, split_pcapng

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "samples"
EVERYTHING = DecodeOptions(records=True, record_bytes=True)
CUT = ["mixed", "group-rebalance", "tansu-consume-group", "mock-transactions", "legacy-clients"]


def table(outdir: Path, name: str) -> list[dict]:
    return [r for f in sorted((outdir / name).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def without_capture(outdir: Path, name: str) -> list[str]:
    return sorted(repr({k: v for k, v in r.items() if k != "capture"}) for r in table(outdir, name))


@pytest.mark.parametrize("name", CUT)
def test_a_rotated_capture_gives_the_rows_of_the_whole(name: str, tmp_path: Path) -> None:
    files = editcap_split(SAMPLES / f"{name}.pcap", tmp_path / "rotated", 37)
    assert len(files) > 3
    whole = decode_files([SAMPLES / f"{name}.pcap"], tmp_path / "whole", EVERYTHING)
    joined = decode_files([tmp_path / "rotated"], tmp_path / "joined", EVERYTHING)
    for t in ("exchanges", "partitions", "anomalies", "records"):
        assert without_capture(tmp_path / "joined", t) == without_capture(tmp_path / "whole", t), t
        assert {r["capture"] for r in table(tmp_path / "joined", t)} <= {files[0].name}
    assert joined.counts.captures == 1 and joined.counts.exchanges == whole.counts.exchanges
    assert (joined.packets, joined.bytes_read) == (whole.packets, sum(f.stat().st_size for f in files))


def test_decoded_file_by_file_the_cut_exchanges_are_lost(tmp_path: Path) -> None:
    """What joining saves: each file alone starts mid-stream and ends with requests unanswered."""
    editcap_split(SAMPLES / "group-rebalance.pcap", tmp_path / "rotated", 37)
    decode_files([tmp_path / "rotated"], tmp_path / "joined", DecodeOptions())
    apart = decode_files([tmp_path / "rotated"], tmp_path / "apart", DecodeOptions(rotated=False))
    assert apart.counts.captures > 10

    def paired(outdir: Path) -> int:
        return sum(r["response_ts"] is not None and r["request_ts"] is not None
                   for r in table(outdir, "exchanges"))

    assert paired(tmp_path / "apart") < paired(tmp_path / "joined")
    kinds = Counter(r["kind"] for r in table(tmp_path / "apart", "anomalies"))
    assert kinds["gap"] + kinds["resync"] > 0


@pytest.mark.parametrize("split", ["connections", "ranges"])
def test_worker_shares_of_a_rotated_capture_give_the_rows_of_one(split: str, tmp_path: Path) -> None:
    """Packet ranges run across the files: the packet count goes on from one file to the next."""
    editcap_split(SAMPLES / "mock-transactions.pcap", tmp_path / "rotated", 50)
    one = decode_files([tmp_path / "rotated"], tmp_path / "one", EVERYTHING)
    three = decode_files([tmp_path / "rotated"], tmp_path / "three", EVERYTHING, jobs=3, min_share_bytes=0,
                         split=split)
    assert three.counts.captures == 1 and three.counts == one.counts
    assert len(list((tmp_path / "three" / "exchanges").glob("*of3.parquet"))) == 3
    for t in ("exchanges", "partitions", "anomalies", "records"):
        if split == "ranges":       # in one process's order too
            assert list(map(repr, table(tmp_path / "three", t))) == list(map(repr, table(tmp_path / "one", t))), t
        assert sorted(map(repr, table(tmp_path / "three", t))) == sorted(map(repr, table(tmp_path / "one", t))), t


def test_tls_keys_in_the_first_file_decrypt_the_rest(tmp_path: Path) -> None:
    src = SAMPLES / "tls" / "tls13-port19443.pcapng"
    split_pcapng(src, tmp_path / "rotated", 40)
    whole = decode_files([src], tmp_path / "whole", DecodeOptions())
    joined = decode_files([tmp_path / "rotated"], tmp_path / "joined", DecodeOptions())
    assert whole.counts.exchanges > 0 and joined.counts.exchanges == whole.counts.exchanges
    assert without_capture(tmp_path / "joined", "exchanges") == without_capture(tmp_path / "whole", "exchanges")


def test_the_command_joins_by_default_and_separates_on_request(tmp_path: Path, capsys) -> None:
    files = editcap_split(SAMPLES / "mixed.pcap", tmp_path / "rotated", 40)
    assert main(["decode", str(tmp_path / "rotated"), "-o", str(tmp_path / "joined"), "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "read 1 capture:" in out
    assert f"rotated      {len(files)} files read as 1 capture: {files[0].name} (+{len(files) - 1})" in out
    assert main(["decode", *map(str, files), "-o", str(tmp_path / "apart"), "--separate-files", "-q"]) == 0
    assert len(list((tmp_path / "joined" / "exchanges").glob("*.parquet"))) == 1
    assert len(list((tmp_path / "apart" / "exchanges").glob("*.parquet"))) == len(files)


@pytest.mark.parametrize("jobs", [1, 3])
def test_joining_files_decoded_apart_before_replaces_their_rows(jobs: int, tmp_path: Path) -> None:
    """Decoded file by file into OUTDIR, then again as one capture: the per-file rows go, none twice."""
    editcap_split(SAMPLES / "mixed.pcap", tmp_path / "rotated", 40)
    decode_files([tmp_path / "rotated"], tmp_path / "out", DecodeOptions(rotated=False))
    decode_files([tmp_path / "rotated"], tmp_path / "out", DecodeOptions(), jobs=jobs, min_share_bytes=0)
    decode_files([tmp_path / "rotated"], tmp_path / "once", DecodeOptions())
    for t in ("exchanges", "partitions", "anomalies"):
        assert sorted(map(repr, table(tmp_path / "out", t))) == sorted(map(repr, table(tmp_path / "once", t))), t


def test_show_reads_a_rotated_capture_as_one(tmp_path: Path, capsys) -> None:
    files = editcap_split(SAMPLES / "mixed.pcap", tmp_path / "rotated", 40)
    assert main(["show", str(SAMPLES / "mixed.pcap")]) == 0
    whole = capsys.readouterr().out
    assert main(["show", str(tmp_path / "rotated")]) == 0
    assert capsys.readouterr().out == whole
    assert main(["show", str(files[0]), str(SAMPLES / "mixed.pcap")]) != 0
    assert "show takes one capture" in capsys.readouterr().err
