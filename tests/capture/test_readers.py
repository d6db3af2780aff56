"""pcap / pcapng / gzip readers on hand-built files: every variant, every kind of damage."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture import CaptureError, open_capture
from capture.pcapfile import skip_records
from tests.capture import pcaptools as pt

PKT = pt.ether(pt.ipv4("10.0.0.1", "10.0.0.2", pt.tcp(1234, 9092, 1, payload=b"hello")))
TS = 1_700_000_000_123_456_789


def read(path: Path) -> tuple[list[tuple], list]:
    src = open_capture(path)
    recs = list(src)
    src.close()
    return recs, src.problems


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
@pytest.mark.parametrize("gz", [False, True])
def test_pcap_variants(tmp_path: Path, order: str, nanos: bool, gz: bool) -> None:
    recs = [(TS + i * 1000, 1, PKT, len(PKT)) for i in range(3)]
    p = pt.write(tmp_path / "a.pcap", pt.pcap_bytes(recs, 1, order, nanos), gz)
    got, problems = read(p)
    want_ts = [r[0] if nanos else r[0] // 1000 * 1000 for r in recs]
    assert [g[0] for g in got] == want_ts
    assert [g[1:] for g in got] == [(1, PKT, len(PKT))] * 3
    assert problems == []


def test_modified_pcap_records(tmp_path: Path) -> None:
    recs = [(TS, 1, PKT, len(PKT))] * 2
    got, problems = read(pt.write(tmp_path / "m.pcap", pt.pcap_bytes(recs, 1, modified=True)))
    assert [g[2] for g in got] == [PKT, PKT] and not problems


def test_pcap_linktype_fcs_bits_are_masked(tmp_path: Path) -> None:
    raw = bytearray(pt.pcap_bytes([(TS, 1, PKT, len(PKT))], 1))
    raw[20:24] = struct.pack("<I", 1 | 0x10000000 | (4 << 29))
    got, _ = read(pt.write(tmp_path / "f.pcap", bytes(raw)))
    assert got[0][1] == 1


def test_pcap_cut_inside_a_record_delivers_the_part_and_reports(tmp_path: Path) -> None:
    recs = [(TS + i, 1, PKT, len(PKT)) for i in range(3)]
    data = pt.pcap_bytes(recs, 1)
    got, problems = read(pt.write(tmp_path / "cut.pcap", data[:-10]))
    assert len(got) == 3 and got[2][2] == PKT[:-10] and got[2][3] == len(PKT)
    assert [p.kind for p in problems] == ["capture_truncated"]
    assert "record 3" in problems[0].detail


def test_pcap_cut_inside_a_record_header(tmp_path: Path) -> None:
    data = pt.pcap_bytes([(TS, 1, PKT, len(PKT))] * 2, 1)
    got, problems = read(pt.write(tmp_path / "cut.pcap", data[:24 + 16 + len(PKT) + 7]))
    assert len(got) == 1
    assert problems[0].kind == "capture_truncated" and "7 bytes into the header" in problems[0].detail


def test_pcap_header_only_and_cut_header(tmp_path: Path) -> None:
    got, problems = read(pt.write(tmp_path / "h.pcap", pt.pcap_bytes([], 1)))
    assert got == [] and problems == []
    got, problems = read(pt.write(tmp_path / "h2.pcap", pt.pcap_bytes([], 1)[:10]))
    assert got == [] and problems[0].kind == "capture_truncated"


def test_pcap_absurd_caplen_resyncs_to_the_next_record(tmp_path: Path) -> None:
    recs = [(TS + i * 1000, 1, PKT, len(PKT)) for i in range(4)]
    data = bytearray(pt.pcap_bytes(recs, 1))
    second = 24 + 16 + len(PKT)
    struct.pack_into("<I", data, second + 8, 0x7FFFFFF0)     # record 2 claims ~2 GB
    got, problems = read(pt.write(tmp_path / "bad.pcap", bytes(data)))
    assert [p.kind for p in problems] == ["capture_corrupt"]
    assert "skipped" in problems[0].detail
    assert [g[0] for g in got] == [recs[i][0] // 1000 * 1000 for i in (0, 2, 3)]


def test_pcap_garbage_tail_stops_with_a_report(tmp_path: Path) -> None:
    data = pt.pcap_bytes([(TS, 1, PKT, len(PKT))], 1) + b"\xff" * 40
    got, problems = read(pt.write(tmp_path / "g.pcap", data))
    assert len(got) == 1 and problems[0].kind == "capture_corrupt" and "stopped" in problems[0].detail


def test_caplen_larger_than_wirelen_is_reported_once(tmp_path: Path) -> None:
    recs = [(TS + i, 1, PKT + b"\0" * 16, len(PKT)) for i in range(5)]
    src = open_capture(pt.write(tmp_path / "b.pcap", pt.pcap_bytes(recs, 1)))
    got = list(src)
    assert len(got) == 5 and all(len(g[2]) == len(PKT) + 16 for g in got)
    assert [p.kind for p in src.problems] == ["caplen_exceeds_wirelen"]
    assert src.caplen_over_wirelen == 5


def test_pcapng_sections_interfaces_and_resolutions(tmp_path: Path) -> None:
    raw4 = pt.ipv4("10.0.0.1", "10.0.0.2", pt.tcp(1, 2, 3))
    data = (
        pt.shb() + pt.idb(1) + pt.idb(101, tsresol=9, name="raw0")
        + pt.epb(0, TS // 1000, PKT)                    # default µs
        + pt.epb(1, TS, raw4)                           # ns
        + pt.custom_block()
        + pt.shb(">") + pt.idb(113, ">", tsresol=0x80 | 20) + pt.idb(1, ">", tsresol=3, tsoffset=10)
        + pt.epb(0, (5 << 20) + (1 << 19), pt.sll(raw4), order=">")   # 5.5 s in 2^-20 units
        + pt.epb(1, 1234, PKT, order=">")                             # 1.234 s + 10 s offset
        + pt.old_pb(0, 1 << 20, pt.sll(raw4), order=">")
    )
    got, problems = read(pt.write(tmp_path / "a.pcapng", data))
    assert problems == []
    assert [(g[0], g[1]) for g in got] == [
        (TS // 1000 * 1000, 1), (TS, 101), (5_500_000_000, 113), (11_234_000_000, 1), (1_000_000_000, 113)]
    assert got[1][2] == raw4


def test_pcapng_simple_packet_blocks(tmp_path: Path) -> None:
    data = pt.shb() + pt.idb(1, snaplen=40) + pt.epb(0, 7, PKT) + pt.spb(PKT[:40], wirelen=len(PKT))
    src = open_capture(pt.write(tmp_path / "s.pcapng", data))
    got = list(src)
    assert got[1] == (7000, 1, PKT[:40], len(PKT))
    assert [p.kind for p in src.problems] == ["no_timestamps"]


def test_pcapng_statistics_and_dropcount_are_reported(tmp_path: Path) -> None:
    data = (pt.shb() + pt.idb(1, name="eth0")
            + pt.epb(0, 1, PKT, opts=[(4, struct.pack("<Q", 3))]) + pt.isb(0, 17))
    got, problems = read(pt.write(tmp_path / "d.pcapng", data))
    assert len(got) == 1
    assert [p.kind for p in problems] == ["capture_drops", "capture_drops"]
    assert problems[1].extra["dropped"] == 17 and "eth0" in problems[1].detail


def test_pcapng_cut_block(tmp_path: Path) -> None:
    data = pt.shb() + pt.idb(1) + pt.epb(0, 1, PKT) + pt.epb(0, 2, PKT)
    got, problems = read(pt.write(tmp_path / "c.pcapng", data[:-9]))
    assert len(got) == 1 and problems[0].kind == "capture_truncated"


def test_pcapng_corrupt_block_resyncs(tmp_path: Path) -> None:
    good = pt.epb(0, 1, PKT)
    bad = bytearray(pt.epb(0, 2, PKT))
    struct.pack_into("<I", bad, len(bad) - 4, 12345)     # trailing length disagrees
    data = pt.shb() + pt.idb(1) + good + bytes(bad) + pt.epb(0, 3, PKT)
    got, problems = read(pt.write(tmp_path / "r.pcapng", data))
    assert [g[0] for g in got] == [1000, 3000]
    assert [p.kind for p in problems] == ["capture_corrupt"]


def test_pcapng_packet_for_an_undeclared_interface(tmp_path: Path) -> None:
    data = pt.shb() + pt.idb(1) + pt.epb(3, 1, PKT) + pt.epb(0, 2, PKT)
    got, problems = read(pt.write(tmp_path / "i.pcapng", data))
    assert len(got) == 1 and "interface 3" in problems[0].detail


def test_gzip_cut_short(tmp_path: Path) -> None:
    import gzip
    recs = [(TS + i, 1, PKT, len(PKT)) for i in range(200)]
    z = gzip.compress(pt.pcap_bytes(recs, 1))
    got, problems = read(pt.write(tmp_path / "z.pcap.gz", z[: len(z) // 2]))
    assert 0 < len(got) < 200
    assert problems[-1].kind == "capture_truncated" and "gzip" in problems[-1].detail


@pytest.mark.parametrize("content,words", [
    (b"", "empty"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "text"),
    (b"\x00\x01\x02\x03\x04\x05\x06\x07\x08", "not a pcap"),
    (b"\x28\xb5\x2f\xfd\x00\x00\x00\x00", "zstd"),
])
def test_not_a_capture_is_one_clear_error(tmp_path: Path, content: bytes, words: str) -> None:
    p = tmp_path / "x.bin"
    p.write_bytes(content)
    with pytest.raises(CaptureError) as err:
        open_capture(p)
    msg = str(err.value)
    assert words in msg and "\n" not in msg and str(p) in msg


def test_gzip_of_something_else_and_missing_file(tmp_path: Path) -> None:
    import gzip
    p = tmp_path / "t.gz"
    p.write_bytes(gzip.compress(b"hello world, not a capture"))
    with pytest.raises(CaptureError, match="gzip"):
        open_capture(p)
    with pytest.raises(CaptureError, match="cannot open"):
        open_capture(tmp_path / "nope.pcap")
    with pytest.raises(CaptureError, match="directory"):
        open_capture(tmp_path)


def test_caplen_above_snaplen_is_an_inconsistency_not_damage(tmp_path: Path) -> None:
    recs = [(TS + i, 1, PKT, len(PKT)) for i in range(3)]
    got, problems = read(pt.write(tmp_path / "s.pcap", pt.pcap_bytes(recs, 1, snaplen=40)))
    assert len(got) == 3 and got[0][2] == PKT
    assert [p.kind for p in problems] == ["caplen_exceeds_snaplen"]


def test_multi_member_gzip(tmp_path: Path) -> None:
    import gzip
    data = pt.pcap_bytes([(TS + i, 1, PKT, len(PKT)) for i in range(10)], 1)
    z = gzip.compress(data[:100]) + gzip.compress(data[100:])
    got, problems = read(pt.write(tmp_path / "mm.pcap.gz", z))
    assert len(got) == 10 and problems == []


@pytest.mark.parametrize("linktype,v6", [(1, False), (1, True), (113, False), (276, True), (0, False), (0, True),
                                         (108, False), (108, True), (12, False), (14, True), (101, False),
                                         (101, True), (228, False), (229, True)])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng", "pcap.gz"])
def test_every_link_type_in_every_format_through_the_pipeline(tmp_path: Path, linktype: int, v6: bool,
                                                              fmt: str) -> None:
    from capture import CaptureOptions, read_capture
    from dissector.events import Direction
    from tests.capture.fakes import Recorder
    ends = (("2001:db8::1", 50312), ("2001:db8::2", 9092)) if v6 else (("10.0.0.1", 50312), ("10.0.0.2", 9092))
    c = pt.Conversation(*ends, linktype=linktype, mss=30).handshake()
    req, resp = pt.api_versions_request(1), pt.api_versions_response(1)
    c.send(True, req).send(False, resp).close()
    if fmt == "pcapng":
        data = pt.shb() + pt.idb(linktype, tsresol=9) + b"".join(pt.epb(0, ts, d) for ts, _, d, _ in c.records)
    else:
        data = pt.pcap_bytes(c.records, linktype, nanos=True)
    path = pt.write(tmp_path / f"x.{fmt}", data, gz=fmt.endswith(".gz"))
    rec = Recorder()
    events = list(read_capture(path, CaptureOptions(), connection_factory=rec))
    assert rec.made[0].data(Direction.TO_BROKER) == req and rec.made[0].data(Direction.TO_CLIENT) == resp
    assert events[-1].conn.client_port == 50312 and events[-1].event.reason == "fin"


_SIZES = st.one_of(st.integers(0, 64), st.integers(1400, 70_000), st.just(200_000))


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.tuples(_SIZES, st.sampled_from([0, 0, 0, 1, 9])), min_size=1, max_size=12),
       order=st.sampled_from(["<", ">"]), nanos=st.booleans(), modified=st.booleans(),
       snaplen=st.sampled_from([262144, 65535]), cut=st.integers(0, 40))
def test_pcap_records_come_out_as_written_across_chunks(tmp_path_factory: pytest.TempPathFactory,
                                                         sizes: list[tuple[int, int]], order: str, nanos: bool,
                                                         modified: bool, snaplen: int, cut: int) -> None:
    # Records read in bulk (capture.pcapfile._plain_records) and one by one (over the snaplen, longer
    # than their packet, across the 1 MiB read chunks, the cut tail) come out alike, in order.
    recs = [(TS + i * 1_001_001, 1, bytes([i % 251]) * n, n + extra if extra != 1 else max(n - 1, 0))
            for i, (n, extra) in enumerate(sizes)]
    if modified:
        nanos = False
    data = pt.pcap_bytes(recs, 1, order, nanos, snaplen=snaplen, modified=modified)
    data = data[:len(data) - cut] if cut and len(data) - cut > 24 else data
    got, problems = read(pt.write(tmp_path_factory.mktemp("r") / "p.pcap", data))
    hlen = 24 if modified else 16
    want, at = [], 24
    for ts, lt, payload, wirelen in recs:
        if at + hlen > len(data):
            break
        body = data[at + hlen:at + hlen + len(payload)]
        if not body and len(payload):
            break
        want.append((ts if nanos else ts // 1000 * 1000, lt, body,
                     wirelen if len(body) == len(payload) else max(wirelen, len(payload))))
        at += hlen + len(payload)
    assert got == want
    if not cut:
        kinds = {p.kind for p in problems}
        assert ("caplen_exceeds_wirelen" in kinds) == any(len(r[2]) > r[3] for r in recs)
        assert ("caplen_exceeds_snaplen" in kinds) == any(len(r[2]) > snaplen for r in recs)
        assert kinds <= {"caplen_exceeds_wirelen", "caplen_exceeds_snaplen"}


@pytest.mark.parametrize("order", ["<", ">"])
def test_records_are_stepped_over_by_their_captured_lengths(order: str) -> None:
    """The survey's walk (kdissect.run.ranges): it stops at a record whose index is a multiple of ``every``
    and at one whose header does not end within ``stop``."""
    payloads = [b"", b"x" * 5, b"y" * 70, b"z" * 3]
    buf = b"".join(struct.pack(order + "IIII", 1, 2, len(p), len(p)) + p for p in payloads)
    starts = [sum(16 + len(p) for p in payloads[:i]) for i in range(len(payloads) + 1)]
    little = order == "<"
    assert skip_records(buf, 0, len(buf), 16, little, 1, 100) == (5, len(buf))
    assert skip_records(buf, 0, len(buf), 16, little, 1, 3) == (3, starts[2])
    assert skip_records(buf, starts[1], len(buf), 16, little, 3, 3) == (3, starts[1])
    assert skip_records(buf, 0, starts[3] + 15, 16, little, 1, 100) == (4, starts[3])
    assert skip_records(buf, 0, 10 ** 6, 16, little, 1, 100) == (5, len(buf))     # stop past the buffer
