"""HalfStream: ordering, retransmissions, holes, wraparound, bounds."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from capture.reassembly import CONFLICT, DATA, GAP, MASK, OUT_OF_WINDOW, HalfStream


def stream_of(ops: list[tuple]) -> bytes:
    """Bytes delivered, with each gap shown as that many '?' (unknown size: '*')."""
    out = bytearray()
    for op in ops:
        if op[0] == DATA:
            assert op[1] == len(out), "data delivered at the wrong offset"
            out += op[2]
        elif op[0] == GAP:
            if op[2] is None:
                out += b"*"
            else:
                assert op[1] == len(out)
                out += b"?" * op[2]
    return bytes(out)


def segments(data: bytes, isn: int, sizes: list[int]) -> list[tuple[int, bytes]]:
    segs, pos, i = [], 0, 0
    while pos < len(data):
        n = sizes[i % len(sizes)] if sizes else 100
        segs.append(((isn + 1 + pos) & MASK, data[pos:pos + n]))
        pos += n
        i += 1
    return segs


def feed(hs: HalfStream, segs: list[tuple[int, bytes]], ts: int = 0) -> list[tuple]:
    ops: list[tuple] = []
    for seq, payload in segs:
        ops += hs.add(seq, payload, 0, ts)
    return ops


def test_in_order() -> None:
    hs = HalfStream()
    hs.syn(1000)
    data = bytes(range(256)) * 10
    ops = feed(hs, segments(data, 1000, [100, 7, 300]))
    ops += hs.close(1)
    assert stream_of(ops) == data
    assert hs.gaps == 0 and hs.dup_segments == 0


def test_midstream_start_is_an_unknown_gap() -> None:
    hs = HalfStream()
    ops = hs.add(5000, b"abc", 0, 1) + hs.add(5003, b"def", 0, 2)
    assert ops[0][:3] == (GAP, 0, None) and ops[0][4] == "midstream"
    assert [o[2] for o in ops[1:]] == [b"abc", b"def"]


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=3000), isn=st.integers(0, MASK),
       sizes=st.lists(st.integers(1, 400), min_size=1, max_size=8), seed=st.integers(0, 2**32),
       dups=st.floats(0, 0.5))
def test_reorder_and_duplicates_give_the_same_stream(data: bytes, isn: int, sizes: list[int], seed: int,
                                                      dups: float) -> None:
    rng = random.Random(seed)
    segs = segments(data, isn, sizes)
    noisy = []
    for s in segs:
        noisy.append(s)
        if rng.random() < dups:
            noisy.append(s)
    # Overlapping retransmissions with identical bytes (a resegmented resend).
    for _ in range(int(len(segs) * dups)):
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randrange(1, 500))
        noisy.append(((isn + 1 + a) & MASK, data[a:b]))
    rng.shuffle(noisy)
    hs = HalfStream()
    hs.syn(isn)
    ops = feed(hs, noisy) + hs.close(0)
    assert stream_of(ops) == data
    assert hs.gaps == 0 and hs.conflicts == 0


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=50, max_size=3000), isn=st.integers(0, MASK),
       sizes=st.lists(st.integers(1, 300), min_size=1, max_size=5), seed=st.integers(0, 2**32))
def test_dropped_segments_become_gaps_of_exactly_their_size(data: bytes, isn: int, sizes: list[int],
                                                            seed: int) -> None:
    rng = random.Random(seed)
    segs = segments(data, isn, sizes)
    keep = [rng.random() > 0.2 for _ in segs]
    expected = b"".join(p if k else b"?" * len(p) for (_, p), k in zip(segs, keep))
    # Dropped segments at the very end leave no trace without a FIN: declare where the stream ended.
    hs = HalfStream()
    hs.syn(isn)
    ops = feed(hs, [s for s, k in zip(segs, keep) if k])
    hs.fin((isn + 1 + len(data)) & MASK, 0)
    ops += hs.close(0)
    assert stream_of(ops) == expected
    assert hs.gap_bytes == sum(len(p) for (_, p), k in zip(segs, keep) if not k)


def test_sequence_wraparound() -> None:
    isn = MASK - 10
    data = bytes(range(200))
    segs = segments(data, isn, [7])
    assert any(seq < 100 for seq, _ in segs) and any(seq > MASK - 20 for seq, _ in segs)
    random.Random(3).shuffle(segs)
    hs = HalfStream()
    hs.syn(isn)
    assert stream_of(feed(hs, segs) + hs.close(0)) == data


def test_first_copy_wins_and_a_different_copy_is_a_conflict() -> None:
    hs = HalfStream()
    hs.syn(0)
    ops = hs.add(11, b"WORLD", 0, 1)          # out of order, buffered
    ops += hs.add(11, b"w0rld", 0, 2)         # conflicting copy of the buffered segment
    ops += hs.add(1, b"helloHELLO", 0, 3)
    ops += hs.add(16, b"!", 0, 3)
    ops += hs.add(16, b"?", 0, 4)             # conflicting copy of the segment just delivered
    ops += hs.add(16, b"!", 0, 4)             # an identical copy is just a retransmission
    assert stream_of(ops) == b"helloHELLOWORLD!"
    conflicts = [o for o in ops if o[0] == CONFLICT]
    assert [(o[1], o[2]) for o in conflicts] == [(10, 5), (15, 1)]
    assert hs.conflicts == 2 and hs.dup_segments == 3


def test_overlapping_segment_fills_around_buffered_ones() -> None:
    hs = HalfStream()
    hs.syn(0)
    ops = hs.add(4, b"DD", 0, 1) + hs.add(8, b"HH", 0, 1)
    ops += hs.add(1, b"abcXXefgYYij", 0, 2)   # overlaps both buffered pieces; theirs are kept
    assert stream_of(ops) == b"abcDDefHHYij"
    assert hs.conflicts == 2


def test_window_overflow_declares_the_hole_lost() -> None:
    hs = HalfStream(max_bytes=1000, max_segments=5)
    hs.syn(0)
    ops = hs.add(1, b"a" * 10, 0, 0)
    for i in range(6):                        # segment at 11 never arrives
        ops += hs.add(21 + 10 * i, b"b" * 10, 0, 0)
    assert stream_of(ops) == b"a" * 10 + b"?" * 10 + b"b" * 60
    assert next(o for o in ops if o[0] == GAP)[4] == "reorder_limit"     # the cap bit, and says so


def test_peer_ack_past_a_hole_declares_it_lost_after_ack_wait_segments() -> None:
    hs = HalfStream(ack_wait=3)
    hs.syn(0)
    ops = hs.add(1, b"abc", 0, 0) + hs.add(10, b"xyz", 0, 0)
    assert stream_of(ops) == b"abc"
    hs.peer_ack = 13
    for ts in (1, 2, 3):                     # the ACK, then two more segments: still waited for
        ops += hs.acked(ts)
        assert stream_of(ops) == b"abc"
    ops += hs.acked(4)                       # the third segment after the ACK
    assert stream_of(ops) == b"abc??????xyz"
    assert [o[4] for o in ops if o[0] == GAP] == ["acked"]


def test_a_late_copy_after_the_peer_ack_fills_its_hole() -> None:
    """Taps that reorder: the peer's ACK of bytes is captured before the bytes themselves."""
    hs = HalfStream(ack_wait=8)
    hs.syn(0)
    ops = hs.add(1, b"abc", 0, 0, 500) + hs.add(10, b"xyz", 0, 0, 501)
    hs.peer_ack = 13
    for ts in range(1, 6):
        ops += hs.acked(ts)
    ops += hs.add(4, b"defghi", 0, 10_000_000_000, 502)     # five segments and ten seconds later
    assert stream_of(ops) == b"abcdefghixyz" and hs.gaps == 0
    assert [o[4] for o in ops if o[0] == DATA] == [500, 502, 501]    # each piece with its segment's ACK


def test_truncated_payload_is_a_truncation_gap() -> None:
    hs = HalfStream()
    hs.syn(0)
    ops = hs.add(1, b"head", 96, 0) + hs.add(101, b"next", 0, 0)
    assert stream_of(ops) == b"head" + b"?" * 96 + b"next"
    assert [o[4] for o in ops if o[0] == GAP] == ["truncated"]


def test_close_reports_hole_before_buffered_data_and_missing_tail() -> None:
    hs = HalfStream()
    hs.syn(0)
    ops = hs.add(1, b"abc", 0, 0) + hs.add(8, b"hij", 0, 0)
    hs.fin(20, 0)
    ops += hs.close(5)
    assert stream_of(ops) == b"abc????hij" + b"?" * 9
    assert hs.finished


def test_far_away_segment_is_out_of_window() -> None:
    hs = HalfStream()
    hs.syn(0)
    ops = hs.add(1 + (1 << 31) - 5, b"x", 0, 0)
    assert ops[0][0] == OUT_OF_WINDOW
    assert not hs.has_pending()


def test_old_retransmission_is_dropped() -> None:
    hs = HalfStream()
    hs.syn(0)
    ops = hs.add(1, b"abcdef", 0, 0) + hs.add(1, b"abc", 0, 0) + hs.add(4, b"defgh", 0, 0)
    assert stream_of(ops) == b"abcdefgh"
    assert hs.dup_segments == 1


def test_syn_with_another_isn_is_refused() -> None:
    hs = HalfStream()
    assert hs.syn(100)
    assert hs.syn(100)          # retransmitted SYN
    assert not hs.syn(5000)     # another connection


def test_a_hole_is_not_waited_for_forever() -> None:
    hs = HalfStream(max_hole_age=1000)
    hs.syn(0)
    ops = hs.add(1, b"ab", 0, 0) + hs.add(5, b"ef", 0, 10)
    assert stream_of(ops) == b"ab"
    assert hs.expire(500) == []
    ops += hs.expire(2000)
    assert stream_of(ops) == b"ab??ef"
    ops += hs.add(9, b"ij", 0, 3000) + hs.add(20, b"late", 0, 5000)   # a new hole, aged on arrival
    assert stream_of(ops).startswith(b"ab??ef??ij")
