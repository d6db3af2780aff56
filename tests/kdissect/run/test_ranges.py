"""Range shares (:mod:`kdissect.run.ranges`): a capture split by packet ranges gives one process's rows,
in one process's order, whatever the split."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.dataset.writer import TABLES, file_stem, prepare_outdir
from kdissect.run.decode import decode_files
from kdissect.run.parallel import decode_share, finish_capture
from capture import open_capture
from kdissect.run.ranges import PacketRange, packet_ranges, range_starts, split_kind, survey
from kdissect.run import ranges
from kdissect.run.shares import capture_shares, estimate_packets
from kdissect.run.source import DecodeOptions

REPO = Path(__file__).resolve().parents[3]
EVERYTHING = DecodeOptions(records=True, record_bytes=True)
TLS = REPO / "samples" / "tls"
PAYLOADS = REPO / "samples" / "payloads"
# Every sample capture, with what it is decoded with: TLS ones with their keys, payload ones with their schemas
# (schemas-topic: none, its _schemas records teach them, on a connection of their own).
SAMPLES = [(p, EVERYTHING) for p in sorted((REPO / "samples").glob("*.pcap"))
           + sorted((REPO / "samples" / "findings").glob("*.pcap")) + sorted((REPO / "samples" / "v07").glob("*.pcap"))]
SAMPLES += [(p, DecodeOptions(records=True, record_bytes=True, tls_keylog=(str(p.with_suffix(".keys")),)))
            for p in sorted(TLS.glob("*.pcap")) if p.with_suffix(".keys").exists()]
SAMPLES += [(d / f"{d.name}.pcap" if (d / f"{d.name}.pcap").exists() else next(d.glob("*.pcap")),
             DecodeOptions(records=True, schemas=str(d / "schemas") if d.name != "schemas-topic" else None))
            for d in sorted(PAYLOADS.iterdir()) if d.is_dir() and list(d.glob("*.pcap"))]


def ordered_rows(outdir: Path) -> dict[str, list[tuple]]:
    """Every table's rows in file-name order, then row order: what a reader of the dataset sees."""
    out = {}
    for table in TABLES:
        files = sorted((outdir / table).glob("*.parquet"))
        out[table] = [tuple(r.values()) for f in files for r in pq.read_table(f).to_pylist()]
    return out


@pytest.mark.parametrize("pcap,options", SAMPLES, ids=[p.parent.name + "/" + p.stem for p, _ in SAMPLES])
def test_packet_ranges_give_the_rows_of_one_process_in_its_order(pcap: Path, options: DecodeOptions,
                                                                 tmp_path: Path) -> None:
    one = decode_files([pcap], tmp_path / "one", options)
    expected = ordered_rows(tmp_path / "one")
    assert sum(len(rows) for rows in expected.values())
    for n in (2, 3):
        split = decode_files([pcap], tmp_path / f"r{n}", options, jobs=n, min_share_bytes=0, split="ranges")
        assert ordered_rows(tmp_path / f"r{n}") == expected, n
        assert len(list((tmp_path / f"r{n}" / "exchanges").glob("*.parquet"))) == n
        assert split.counts == one.counts
        assert (split.packets, split.bytes_read) == (one.packets, one.bytes_read)


def test_every_boundary_of_a_small_capture_gives_the_same_rows(tmp_path: Path) -> None:
    """Ranges cut at every 7th packet of a capture with Metadata, Produce and Fetch on several connections."""
    pcap = REPO / "samples" / "mixed.pcap"
    decode_files([pcap], tmp_path / "one", EVERYTHING)
    expected = ordered_rows(tmp_path / "one")
    packets = estimate_packets([pcap])
    for cut in range(1, packets, max(1, packets // 12)):
        out = prepare_outdir(tmp_path / f"c{cut}", TABLES)
        results = [decode_share(pcap, out, PacketRange(0, 2, 0, cut), EVERYTHING),
                   decode_share(pcap, out, PacketRange(1, 2, cut, None), EVERYTHING)]
        finish_capture(results)
        assert ordered_rows(out) == expected, cut


def test_earlier_ranges_are_wider_as_later_workers_skim_them() -> None:
    starts = range_starts(1000, 2, skim=0.3)
    assert starts[0] == 0 and 550 < starts[1] < 600        # 1 - 0.3 * w0 = 1 - w0 ... w0 = 1 / 1.7
    assert range_starts(1000, 3, skim=0.0) == [0, 333, 666]
    ranges = packet_ranges(100, 3)
    assert ranges[0].start == 0 and ranges[-1].stop is None
    assert all(a.stop == b.start for a, b in zip(ranges, ranges[1:]))


def test_one_busy_connection_is_split_by_ranges_many_even_ones_by_connection() -> None:
    one = {b"a" * 12: 1000, b"b" * 12: 5}
    many = {bytes([i]) * 12: 100 for i in range(64)}
    assert split_kind(one, 2) == "ranges"
    assert split_kind(many, 2) == "connections"
    assert split_kind(one, 1) == "connections"


def test_a_range_worker_that_dies_costs_its_range_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker 2 of 3 is killed after its third row: named with its packets and connections, the rest written."""
    import os
    import signal
    from types import SimpleNamespace

    from kdissect.errors import KdissectError
    from kdissect.run import parallel

    real = parallel._decode_range

    def dying(run, writer, share, on_connection=None):  # type: ignore[no-untyped-def]
        if share.index != 1:
            return real(run, writer, share, on_connection)
        calls = [0]

        def event(conn, ev):  # type: ignore[no-untyped-def]
            writer.event(conn, ev)
            calls[0] += 1
            if calls[0] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(run, SimpleNamespace(event=event, unowned=writer.unowned), share, on_connection)

    monkeypatch.setattr(parallel, "_decode_range", dying)
    pcap = REPO / "samples" / "mixed.pcap"
    with pytest.raises(KdissectError) as err:
        decode_files([pcap], tmp_path / "split", EVERYTHING, jobs=3, min_share_bytes=0, split="ranges")
    message = str(err.value)
    ranges = packet_ranges(survey([pcap]).packets, 3)
    stem = file_stem(pcap)
    assert f"mixed.pcap: the worker decoding share 2 of 3 ({ranges[1].describe()}; connection" in message
    assert "killed by SIGKILL" in message and "the rest of the capture is written" in message
    written = sorted(p.name for p in (tmp_path / "split" / "exchanges").glob("*.parquet"))
    assert written == [f"{stem}-1of3.parquet", f"{stem}-3of3.parquet"]
    assert not list((tmp_path / "split").rglob(".*"))          # no temporary file left behind
    monkeypatch.undo()
    out = prepare_outdir(tmp_path / "whole", TABLES)
    finish_capture([decode_share(pcap, out, r, EVERYTHING) for r in ranges])
    whole = ordered_rows(tmp_path / "whole")
    kept = ordered_rows(tmp_path / "split")
    for table in TABLES:
        first = [tuple(r.values()) for r in pq.read_table(out / table / f"{stem}-1of3.parquet").to_pylist()]
        last = [tuple(r.values()) for r in pq.read_table(out / table / f"{stem}-3of3.parquet").to_pylist()]
        assert kept[table] == first + last
        assert len(whole[table]) >= len(kept[table])


def _damaged(src: Path, dst: Path, every: int = 37) -> Path:
    """``src`` with the last 6 captured bytes of every ``every``-th packet of 120+ bytes inverted:
    frames of every kind damaged mid-body, in sizes, in records, and some connections losing sync."""
    data = bytearray(src.read_bytes())
    pos, n = 24, 0
    while pos + 16 <= len(data):
        caplen = int.from_bytes(data[pos + 8:pos + 12], "little")
        end = pos + 16 + caplen
        if caplen >= 120:
            n += 1
            if n % every == 0:
                data[end - 6:end] = bytes(b ^ 0xFF for b in data[end - 6:end])
        pos = end
    dst.write_bytes(bytes(data))
    return dst


def _dropped(src: Path, dst: Path, every: int) -> Path:
    """``src`` without every ``every``-th packet: gaps, both sides resyncing, requests left unanswered."""
    data = src.read_bytes()
    out, pos, n = bytearray(data[:24]), 24, 0
    while pos + 16 <= len(data):
        end = pos + 16 + int.from_bytes(data[pos + 8:pos + 12], "little")
        n += 1
        if n % every:
            out += data[pos:end]
        pos = end
    dst.write_bytes(bytes(out))
    return dst


@pytest.mark.parametrize("name", ["mixed", "mock-produce-consume", "tansu-consume-group", "group-rebalance"])
def test_lost_packets_cost_the_same_exchanges_in_every_split(name: str, tmp_path: Path) -> None:
    """A side resyncing on the response to a request skimmed before the range proves it as one process does."""
    pcap = _dropped(REPO / "samples" / f"{name}.pcap", tmp_path / f"{name}.pcap", 11)
    one = decode_files([pcap], tmp_path / "one", EVERYTHING)
    expected = ordered_rows(tmp_path / "one")
    assert one.counts.anomalies["gap"] > 0
    packets = survey([pcap]).packets
    for cut in range(1, packets, max(1, packets // 15)):
        out = prepare_outdir(tmp_path / f"c{cut}", TABLES)
        finish_capture([decode_share(pcap, out, PacketRange(0, 2, 0, cut), EVERYTHING),
                        decode_share(pcap, out, PacketRange(1, 2, cut, None), EVERYTHING)])
        assert ordered_rows(out) == expected, cut


@pytest.mark.parametrize("name", ["mixed", "tansu-produce-codecs", "mock-transactions"])
def test_damaged_frames_cost_the_same_exchanges_in_every_split(name: str, tmp_path: Path) -> None:
    pcap = _damaged(REPO / "samples" / f"{name}.pcap", tmp_path / f"{name}.pcap")
    one = decode_files([pcap], tmp_path / "one", EVERYTHING)
    expected = ordered_rows(tmp_path / "one")
    assert sum(one.counts.anomalies.values()) > 0
    assert [p.name for p in (tmp_path / "one" / "exchanges").glob("*.parquet")]
    for n in (2, 3):
        split = decode_files([pcap], tmp_path / f"r{n}", EVERYTHING, jobs=n, min_share_bytes=0, split="ranges")
        assert ordered_rows(tmp_path / f"r{n}") == expected
        assert split.counts == one.counts
    hashed = decode_files([pcap], tmp_path / "h", EVERYTHING, jobs=3, min_share_bytes=0, split="connections")
    assert hashed.counts == one.counts


# -- one connection of 100,000 small exchanges, recorded in the test session ----------------------------------

EXCHANGES = 100_000
_PRODUCE = """
import json, sys
from confluent_kafka import Producer
bootstrap, count = sys.argv[1], int(sys.argv[2])
done = {"delivered": 0, "errors": 0}
def cb(err, msg):
    done["errors" if err is not None else "delivered"] += 1
p = Producer({"bootstrap.servers": bootstrap, "client.id": "kd-one-connection", "linger.ms": 0,
              "batch.num.messages": 1, "acks": 1, "queue.buffering.max.messages": 50000})
for i in range(count):
    while True:
        try:
            p.produce("one-connection", b"v%06d" % i, partition=0, on_delivery=cb)
            break
        except BufferError:
            p.poll(0.05)
    p.poll(0)
done["undelivered"] = p.flush(120)
print(json.dumps(done))
"""


@pytest.fixture(scope="session")
def one_connection(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A real librdkafka producer (linger.ms=0, one record per request) sending 100,000 small records to
    tansu on one connection, captured with tcpdump in a network namespace; recorded once per session."""
    import json
    import os
    import subprocess
    import sys

    from tests.brokers import in_netns, netns, run_tansu, tcpdump

    if os.geteuid() != 0:
        pytest.skip("recording needs root (network namespace, tcpdump)")
    pcap = tmp_path_factory.mktemp("one-connection") / "one-connection.pcap"
    with netns(f"kd-ranges-{os.getpid() % 10000}") as ns, run_tansu(9092, ns=ns) as bootstrap, tcpdump(pcap, ns=ns):
        proc = subprocess.run(in_netns(ns, [sys.executable, "-c", _PRODUCE, bootstrap, str(EXCHANGES)]),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"delivered": EXCHANGES, "errors": 0, "undelivered": 0}
    return pcap, report


@pytest.mark.slow
def test_one_connection_of_100k_exchanges_split_by_ranges(one_connection: tuple[Path, dict], tmp_path: Path) -> None:
    """The shape ranges are for: every exchange on one connection. --jobs 2 chooses ranges by itself, the
    ranges balance, and the rows are one process's in its order, as are three ranges' and a split by connection."""
    pcap, _report = one_connection
    options = DecodeOptions()
    one = decode_files([pcap], tmp_path / "one", options)
    assert one.counts.per_api["Produce"] == EXCHANGES and one.counts.statuses["ok"] >= EXCHANGES
    produce = [c for c in one.counts.connections]
    assert len(produce) <= 2                                  # the bootstrap connection and the producer's
    surveyed = survey([pcap])
    assert surveyed is not None and surveyed.packets == sum(1 for _ in open_capture(pcap))
    assert split_kind(surveyed.loads, 2) == "ranges"
    expected = ordered_rows(tmp_path / "one")
    assert capture_shares([pcap], 2) == 2                    # split by default, though a few MB
    two = decode_files([pcap], tmp_path / "two", options, jobs=2)
    assert len(list((tmp_path / "two" / "exchanges").glob("*of2.parquet"))) == 2
    assert ordered_rows(tmp_path / "two") == expected
    assert two.counts == one.counts
    three = decode_files([pcap], tmp_path / "three", options, jobs=3, min_share_bytes=0, split="ranges")
    assert ordered_rows(tmp_path / "three") == expected and three.counts == one.counts
    hashed = decode_files([pcap], tmp_path / "hashed", options, jobs=2, min_share_bytes=0, split="connections")
    assert hashed.counts == one.counts
    # Every 997th packet lost: both sides resync, many times on responses to requests skimmed before a range.
    lossy = _dropped(pcap, tmp_path / "lossy.pcap", 997)
    one = decode_files([lossy], tmp_path / "lossy-one", options)
    assert one.counts.anomalies["resync"] > 50
    two = decode_files([lossy], tmp_path / "lossy-two", options, jobs=2, min_share_bytes=0, split="ranges")
    assert ordered_rows(tmp_path / "lossy-two") == ordered_rows(tmp_path / "lossy-one") and two.counts == one.counts


_SPLIT = """
import sys
from pathlib import Path
from kdissect.run.decode import decode_files
from kdissect.run.source import DecodeOptions
out, jobs, split, *pcaps = sys.argv[1:]
for pcap in pcaps:
    decode_files([Path(pcap)], Path(out) / Path(pcap).stem, DecodeOptions(records=True, record_bytes=True),
                 jobs=int(jobs), min_share_bytes=0, split=split or None)
"""


def test_compiled_ranges_give_the_rows_of_one_pure_process(tmp_path: Path) -> None:
    """Skimming is in the compiled connection too: its range shares write what pure Python writes alone."""
    import os
    import subprocess
    import sys

    from tests.kdissect.test_compiled import _require_compiled

    _require_compiled()
    pcaps = [str(REPO / "samples" / f"{n}.pcap") for n in ("mixed", "mock-transactions", "tansu-produce-codecs")]
    for name, pure, jobs, split in (("pure", True, "1", ""), ("compiled", False, "3", "ranges")):
        env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"}
        if pure:
            env["KDISSECT_PURE"] = "1"
        proc = subprocess.run([sys.executable, "-c", _SPLIT, str(tmp_path / name), jobs, split, *pcaps], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    for pcap in pcaps:
        stem = Path(pcap).stem
        assert ordered_rows(tmp_path / "compiled" / stem) == ordered_rows(tmp_path / "pure" / stem)
        assert len(list((tmp_path / "compiled" / stem / "exchanges").glob("*of3.parquet"))) == 3


def test_survey_counts_every_packet_and_estimates_past_its_walk() -> None:
    """Exact within the walk; past it, files of a rotated capture the walk never reached are estimated
    from the bytes per packet walked before (not counted as empty)."""
    pcap = REPO / "samples" / "group-rebalance.pcap"
    packets = sum(1 for _ in open_capture(pcap))
    assert survey([pcap]).packets == packets
    size = pcap.stat().st_size
    estimated = survey([pcap, pcap, pcap], walk=size // 2).packets
    assert 2.5 * packets < estimated < 3.5 * packets


def test_survey_walks_across_its_reads_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads of a few hundred bytes (records cut by them, records longer than one) count and sample what one
    read does."""
    pcap = REPO / "samples" / "group-rebalance.pcap"
    whole = survey([pcap], every=3)
    monkeypatch.setattr(ranges, "_CHUNK", 300)
    assert survey([pcap], every=3) == whole
    assert whole.packets == sum(1 for _ in open_capture(pcap)) and whole.loads
