"""``--jobs N``: shares of a capture decoded by worker processes give the rows one process gives."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from capture import open_capture
from capture.shard import Share
from kdissect.dataset.writer import TABLES, file_stem, prepare_outdir
from kdissect.run.decode import decode_files
from kdissect.run.shares import capture_shares, estimate_packets, shares_for
from kdissect.run.parallel import decode_share, finish_capture
from kdissect.run.source import DecodeOptions

REPO = Path(__file__).resolve().parents[3]
SAMPLES = sorted((REPO / "samples").glob("*.pcap"))
EVERYTHING = DecodeOptions(records=True, record_bytes=True)


def rows(outdir: Path) -> dict[str, list[str]]:
    """Every table's rows, order aside (each row as its repr, sorted)."""
    out = {}
    for table in TABLES:
        files = sorted((outdir / table).glob("*.parquet"))
        out[table] = sorted(repr(r) for f in files for r in pq.read_table(f).to_pylist())
    return out


@pytest.mark.parametrize("pcap", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_three_jobs_give_the_rows_of_one(pcap: Path, tmp_path: Path) -> None:
    one = decode_files([pcap], tmp_path / "one", EVERYTHING)
    three = decode_files([pcap], tmp_path / "three", EVERYTHING, jobs=3, min_share_bytes=0, split="connections")
    assert rows(tmp_path / "three") == rows(tmp_path / "one")
    assert len(list((tmp_path / "three" / "exchanges").glob("*.parquet"))) == 3
    assert three.counts == one.counts
    assert (three.packets, three.bytes_read) == (one.packets, one.bytes_read)


@pytest.mark.parametrize("name,shares", [("mock-transactions", 3), ("legacy-clients", 2)])
def test_topic_ids_are_named_from_metadata_another_share_decoded(name: str, shares: int, tmp_path: Path) -> None:
    """Fetch and Produce by topic id on one connection, the Metadata naming it on another, in another share."""
    pcap = REPO / "samples" / f"{name}.pcap"
    out = prepare_outdir(tmp_path / "out", TABLES)
    results = [decode_share(pcap, out, Share(k, shares), EVERYTHING) for k in range(shares)]

    def unnamed_rows(files: list[Path]) -> int:
        return sum(pq.read_table(f, columns=["topic"]).column(0).null_count
                   for f in files if f.parent.name in ("partitions", "records"))

    assert any(r.unnamed for r in results)
    assert unnamed_rows([tmp for r in results for tmp, _ in r.files]) > 0
    files = finish_capture(results)
    assert not list(out.rglob(".*"))                          # no temporary file left behind
    one = decode_files([pcap], tmp_path / "one", EVERYTHING)
    assert unnamed_rows(files) == unnamed_rows(one.files) == 0
    assert rows(out) == rows(tmp_path / "one")


def test_a_new_decode_replaces_the_files_of_an_earlier_one_split_differently(tmp_path: Path) -> None:
    pcap = REPO / "samples" / "mixed.pcap"
    decode_files([pcap], tmp_path, EVERYTHING, jobs=3, min_share_bytes=0)
    decode_files([pcap], tmp_path, DecodeOptions(), jobs=2, min_share_bytes=0)
    assert sorted(p.name.rsplit("-", 1)[-1] for p in (tmp_path / "exchanges").glob("*.parquet")) == \
        ["1of2.parquet", "2of2.parquet"]
    assert not list((tmp_path / "records").glob("*.parquet"))
    decode_files([pcap], tmp_path, DecodeOptions())
    assert [p.name for p in (tmp_path / "exchanges").glob("*.parquet")] == [f"{file_stem(pcap)}.parquet"]
    decode_files([pcap], tmp_path / "one", DecodeOptions())
    assert rows(tmp_path) == rows(tmp_path / "one")


def test_small_captures_are_not_split() -> None:
    assert shares_for(100_000, 4) == 1
    assert shares_for(100 << 20, 4) == 4
    assert shares_for(10 << 20, 4) == 2
    assert shares_for(10 << 20, 1) == 1
    assert shares_for(1000, 3, min_share_bytes=0) == 3


def test_captures_with_few_packets_are_not_split(tmp_path: Path) -> None:
    # A worker costs more than it saves on a share of a few thousand packets, however many bytes.
    pcap = REPO / "samples" / "mixed.pcap"
    packets = sum(1 for _ in open_capture(pcap))
    assert estimate_packets([pcap]) == packets                   # read whole: the count itself
    assert packets / 2 <= estimate_packets([pcap], sample=50) <= packets * 2   # from the first 50: a guess
    assert capture_shares([pcap], 4, min_share_bytes=1) == 1
    assert capture_shares([pcap], 4, min_share_bytes=0) == 4     # splitting forced
    gz = tmp_path / "mixed.pcap.gz"
    gz.write_bytes(gzip.compress(pcap.read_bytes()))
    assert estimate_packets([gz]) is None                        # compressed: size says little
    assert estimate_packets([tmp_path / "missing.pcap"]) is None


# A worker that cannot write its files: the file size limit (like a quota) stops it. The parent only
# renames, so it is not affected. Run in a child so the limit does not touch pytest.
_LIMITED = """
import resource, signal, sys
from kdissect.commands.cli import main
if sys.argv[1] == "killed":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)     # Python ignores it (writes fail with EFBIG instead)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
sys.exit(main(["decode", *sys.argv[2:], "--jobs", "3", "-q"]))
"""


@pytest.mark.parametrize("how", ["killed", "write_error"])
def test_a_failing_worker_fails_the_decode_and_leaves_no_files(how: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pcaps = [str(REPO / "samples" / f"{name}.pcap") for name in ("tansu-consume-group", "mixed", "group-rebalance")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _LIMITED, how, *pcaps, "-o", str(out), "--records"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert ("SIGXFSZ" in lines[0]) == (how == "killed")
    assert [p for p in out.rglob("*") if p.is_file()] == []


# Many short-lived librdkafka clients against tansu, each on connections of its own (bootstrap and
# broker): hundreds of connections spread over the shares, as a busy capture has them.
_CLIENTS = """
import sys
from confluent_kafka import Producer
bootstrap, count = sys.argv[1], int(sys.argv[2])
delivered = 0
def done(err, msg):
    global delivered
    delivered += err is None
for i in range(count):
    p = Producer({"bootstrap.servers": bootstrap, "client.id": f"kd-many-{i}", "linger.ms": 0})
    p.produce(f"many-{i % 7}", b"v%d" % i, b"k%d" % i, on_delivery=done)
    p.flush(30)
print(delivered)
"""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs root")
def test_three_jobs_give_the_rows_of_one_over_hundreds_of_connections(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    from tests.brokers import free_port, run_tansu, tcpdump
    port = free_port()
    pcap = tmp_path / "many.pcap"
    with run_tansu(port) as bootstrap:
        with tcpdump(pcap, iface="lo", bpf=["tcp", "port", str(port)], immediate=True):
            out = subprocess.run([sys.executable, "-c", _CLIENTS, bootstrap, "150"], capture_output=True,
                                 text=True, timeout=600, check=True)
    assert int(out.stdout) == 150
    one = decode_files([pcap], tmp_path / "one", EVERYTHING)
    three = decode_files([pcap], tmp_path / "three", EVERYTHING, jobs=3, min_share_bytes=0)
    assert len(one.counts.connections) >= 300
    assert rows(tmp_path / "three") == rows(tmp_path / "one")
    assert three.counts == one.counts
    per_share = [pq.read_metadata(f).num_rows for f in sorted((tmp_path / "three" / "exchanges").glob("*"))]
    assert len(per_share) == 3 and min(per_share) > 0.2 * sum(per_share)     # the hash spreads them
