"""The 0.7 connection: pairing by order, gaps, resync, mid-stream starts; never a wrong pair."""

from __future__ import annotations

from dissector.events import Anomaly, Direction, Exchange, Status
from dissector.v07.connection import V07Connection
from dissector.v07.events import V07Request, V07Response
from tests.dissector.v07.build import (
    fetch,
    fetch_response,
    gzip_wrapper,
    message,
    multifetch,
    multifetch_response,
    multiproduce,
    offsets,
    offsets_response,
    produce,
)

B, C = Direction.TO_BROKER, Direction.TO_CLIENT
SET = message(b"one") + message(b"two")


def run(conn, script, chunk=None):
    out = []
    for step in script:
        if step[0] == "gap":
            _, d, n, ts = step
            out += conn.gap(d, ts, n)
            continue
        d, data, ts = step
        if chunk:
            for i in range(0, len(data), chunk):
                out += conn.feed(d, data[i:i + chunk], ts)
        else:
            out += conn.feed(d, data, ts)
    out += conn.close(10**9)
    return out


def pairs(events):
    return [(ex.request.correlation_id if ex.request else None,
             ex.response.correlation_id if ex.response else None,
             ex.status.value) for ex in events if isinstance(ex, Exchange)]


CONVERSATION = [
    (B, produce("t", 0, SET), 1),
    (B, offsets("t", 0, -1, 1), 2), (C, offsets_response([29]), 3),
    (B, fetch("t", 0, 0), 4), (C, fetch_response(SET + gzip_wrapper(message(b"z"))), 5),
    (B, multifetch([("t", 0, 0, 99), ("u", 1, 3, 99)]), 6), (C, multifetch_response([(0, SET), (1, b"")]), 7),
    (B, multiproduce([("t", 0, SET), ("u", 1, SET)]), 8),
]


def test_requests_pair_by_order_and_produce_expects_nothing():
    ev = run(V07Connection(), CONVERSATION)
    assert pairs(ev) == [(1, None, "no_response_expected"), (2, 2, "ok"), (3, 3, "ok"), (4, 4, "ok"),
                         (5, None, "no_response_expected")]
    assert not [e for e in ev if isinstance(e, Anomaly)]
    resp = [e for e in ev if isinstance(e, V07Response)]
    assert [r.api_name for r in resp] == ["ListOffsets", "Fetch", "MultiFetch"]
    assert resp[2].body["fetches"][1] == {**resp[2].body["fetches"][1], "topic": "u", "error_code": 1}
    req = [e for e in ev if isinstance(e, V07Request)]
    assert [(r.api_key, r.api_version, r.client_id) for r in req] == [
        (0, None, None), (2, None, None), (1, None, None), (1, None, None), (0, None, None)]


def test_byte_at_a_time_gives_the_same_events():
    whole = run(V07Connection(), CONVERSATION)
    bytewise = run(V07Connection(), CONVERSATION, chunk=1)
    assert [type(e) for e in whole] == [type(e) for e in bytewise]
    assert pairs(whole) == pairs(bytewise)


def test_lost_response_bytes_resync_and_pair_only_when_provable():
    ev = run(V07Connection(), [
        (B, fetch("t", 0, 0), 1), (C, fetch_response(SET), 2),
        (B, fetch("t", 0, 29), 3),
        ("gap", C, 50, 4),                    # that answer is lost, and part of the next one
        (C, fetch_response(SET)[10:], 4),
        (B, fetch("t", 0, 58), 5), (C, fetch_response(SET), 6),
    ])
    kinds = [e.kind for e in ev if isinstance(e, Anomaly)]
    assert "gap" in kinds and "resync" in kinds
    # the second request's answer was lost; the third pairs, proven: it was the only request waiting
    assert pairs(ev) == [(1, 1, "ok"), (2, None, "no_response"), (3, 3, "ok")] or \
        pairs(ev) == [(1, 1, "ok"), (3, 3, "ok"), (2, None, "no_response")]


def test_two_requests_waiting_after_lost_responses_give_an_orphan_not_a_guess():
    ev = run(V07Connection(), [
        (B, fetch("t", 0, 0), 1), (B, offsets("t", 0), 2),   # pipelined
        (C, fetch_response(SET)[:3], 3), ("gap", C, 40, 3),  # how many answers the loss held: unknown
        (C, offsets_response([7]), 4),
    ])
    assert pairs(ev) == [(1, None, "no_response"), (None, -1, "orphan_response"), (2, None, "no_response")]


def test_a_loss_from_a_frame_boundary_holds_at_least_one_answer():
    ev = run(V07Connection(), [
        (B, fetch("t", 0, 0), 1), (B, offsets("t", 0), 2),   # pipelined
        ("gap", C, 40, 3),                                   # the fetch's answer, at least
        (C, offsets_response([7]), 4),
    ])
    assert pairs(ev) == [(1, None, "no_response"), (2, 2, "ok")]


def test_mid_stream_start_pairs_from_the_first_request_seen():
    first = fetch_response(SET)
    ev = run(V07Connection(mid_stream=True), [
        (B, fetch("t", 0, 0)[7:], 1),            # the tail of a request sent before the capture
        (C, first[:3], 2), (C, first[3:], 2),  # its answer: an orphan (its request is not in the capture)
        (B, offsets("t", 0), 3), (C, offsets_response([1]), 4),
        (B, fetch("t", 0, 10), 5), (C, fetch_response(SET), 6),
    ])
    assert pairs(ev) == [(None, -1, "orphan_response"), (1, 1, "ok"), (2, 2, "ok")]
    orphan = [e for e in ev if isinstance(e, V07Response) and e.correlation_id == -1][0]
    assert orphan.inferred and orphan.api_name == "Fetch"
    joined = [e.detail for e in ev if isinstance(e, Anomaly) and e.kind == "resync"]
    assert joined and all(d.startswith("the capture joined this connection mid-stream: ") and "0.7 frame" in d
                          for d in joined), joined


def test_lost_request_bytes_never_pair_a_response_with_a_later_request():
    ev = run(V07Connection(), [
        (B, fetch("t", 0, 0), 1), (C, fetch_response(SET), 2),
        ("gap", B, len(fetch("t", 0, 29)), 3),   # a whole request lost ...
        (C, fetch_response(message(b"lost")), 4),  # ... its answer arrives before the next request
        (B, offsets("t", 0), 5), (C, offsets_response([3]), 6),
    ])
    assert pairs(ev) == [(1, 1, "ok"), (None, -1, "orphan_response"), (2, 2, "ok")]


def test_a_gap_inside_a_request_keeps_sync_and_the_request():
    req = produce("t", 0, SET * 20)
    ev = run(V07Connection(), [
        (B, req[:30], 1), ("gap", B, 100, 2), (B, req[130:], 3),
        (B, offsets("t", 0), 4), (C, offsets_response([1]), 5),
    ])
    reqs = [e for e in ev if isinstance(e, V07Request)]
    assert reqs[0].failure.error == "Truncated" and reqs[0].body["topic"] == "t"
    assert pairs(ev)[-1] == (2, 2, "ok")
    assert "resync" not in [e.kind for e in ev if isinstance(e, Anomaly)]


def test_a_malformed_response_is_reported_not_raised():
    ev = run(V07Connection(), [(B, multifetch([("t", 0, 0, 9), ("t", 1, 0, 9)]), 1),
                               (C, multifetch_response([(0, SET)]), 2)])
    assert pairs(ev) == [(1, 1, "malformed")]
    assert any(isinstance(e, Anomaly) and e.kind == "malformed" for e in ev)


def test_a_cut_stream_reports_truncation():
    ev = run(V07Connection(), [(B, fetch("t", 0, 0), 1), (C, fetch_response(SET)[:-4], 2)])
    assert pairs(ev) == [(1, 1, "ok")]
    resp = [e for e in ev if isinstance(e, V07Response)][0]
    assert resp.failure.error == "Truncated"
    assert any(isinstance(e, Anomaly) and e.kind == "truncated" for e in ev)


def test_garbage_never_raises_and_memory_stays_bounded():
    import random
    rng = random.Random(3)
    for _ in range(300):
        conn = V07Connection(mid_stream=rng.random() < 0.5)
        for _ in range(20):
            d = B if rng.random() < 0.5 else C
            if rng.random() < 0.1:
                conn.gap(d, 1, rng.choice([None, 0, 5, 1000]))
            else:
                blob = rng.choice([fetch("t", 0, 0), fetch_response(SET), offsets_response([1]), b""])
                conn.feed(d, bytes(rng.randrange(256) for _ in range(rng.randrange(40))) + blob, 1)
            assert all(len(s.buf) <= (1 << 20) + 70_000 for s in conn._sides)
        conn.close(2)


def test_the_in_flight_bound_gives_up_the_oldest_but_keeps_the_order():
    from dissector.connection import Options
    conn = V07Connection(Options(max_in_flight_bytes=3 * 1100))
    script = [(B, fetch("t", 0, i), i) for i in range(1, 6)]           # pipelined: 5 waiting
    script += [(C, fetch_response(message(bytes([i]))), 10 + i) for i in range(1, 6)]
    ev = run(conn, script)
    assert pairs(ev) == [(1, None, "no_response"), (2, None, "no_response"),
                         (None, -1, "orphan_response"), (None, -2, "orphan_response"),
                         (3, 3, "ok"), (4, 4, "ok"), (5, 5, "ok")]
    assert [e.kind for e in ev if isinstance(e, Anomaly)] == ["in_flight_limit"]


def _conversation(rng, pipelined: bool) -> list:
    """A long client/broker conversation as (direction, bytes, ts) steps, one request at a time or not."""
    steps, ts, waiting = [], 0, []
    for i in range(60):
        ts += 10
        kind = rng.choice(["fetch", "offsets", "produce", "multifetch"])
        if kind == "produce":
            steps.append((B, produce("t", 0, SET), ts))
            continue
        if kind == "fetch":
            req, resp = fetch("t", 0, i), fetch_response(message(bytes([i])) * rng.randrange(1, 4))
        elif kind == "offsets":
            req, resp = offsets("t", 0), offsets_response([i] * rng.randrange(0, 3))
        else:
            req, resp = multifetch([("t", 0, i, 99), ("u", 1, i, 99)]), multifetch_response([(0, SET), (1, b"")])
        steps.append((B, req, ts))
        waiting.append(resp)
        if not pipelined or (len(waiting) > 2 and rng.random() < 0.4):
            for r in waiting:
                ts += 10
                steps.append((C, r, ts))
            waiting = []
    return steps


def _pairs_by_time(events):
    return {(e.request.first_ts, e.response.first_ts) for e in events
            if isinstance(e, Exchange) and e.request is not None and e.response is not None}


def test_random_losses_never_pair_wrongly():
    """Sync clients (as every 0.7 client is) lose bytes anywhere, also before the capture starts;
    pipelining clients lose bytes after showing that they pipeline (from their first requests):
    pairs found are always pairs of the undamaged conversation."""
    import random
    for seed in range(300):
        rng = random.Random(seed)
        steps = _conversation(rng, pipelined=seed % 2 == 1)
        clean = _pairs_by_time(run(V07Connection(), steps))
        damaged = []
        for i, (d, data, ts) in enumerate(steps):
            r = rng.random() if seed % 2 == 0 or i >= 8 else 1.0
            if r < 0.08:                       # lose it whole
                damaged.append(("gap", d, len(data), ts))
            elif r < 0.14:                     # lose a part of it
                cut = rng.randrange(1, len(data))
                damaged += [(d, data[:cut], ts), ("gap", d, len(data) - cut, ts)] if rng.random() < 0.5 else \
                    [("gap", d, cut, ts), (d, data[cut:], ts)]
            else:
                damaged.append((d, data, ts))
        start = rng.randrange(0, 5) if seed % 2 == 0 else 0
        got = _pairs_by_time(run(V07Connection(mid_stream=start > 0), damaged[start:]))
        assert got <= clean, f"seed {seed}: {sorted(got - clean)}"


def test_frames_still_arriving_count_in_the_capture_wide_budget():
    """Two 0.7 connections trickle a 3 MiB produce in; the capture allows 4 MiB held in all (as 0.8+ does)."""
    from dissector.connection import Options
    from dissector.held import HeldBytes

    held = HeldBytes(limit=4 << 20)
    a, b = V07Connection(Options(held=held)), V07Connection(Options(held=held))
    big = produce("t", 0, message(bytes(3 << 20)))
    after = offsets("t", 0, -1, 1)
    events = []
    for i in range(0, len(big), 64 << 10):
        events += a.feed(B, big[i:i + (64 << 10)], i)
        events += b.feed(B, big[i:i + (64 << 10)], i)
    for conn in (b, a):
        events += conn.feed(B, after, 10**6)
        events += conn.feed(C, offsets_response([7]), 10**6 + 1)
    cut = [e for e in events if isinstance(e, Anomaly) and e.kind == "frame_held_limit"]
    assert len(cut) == 1 and held.cuts == 1 and cut[0].extra["frame"] == len(big)
    produces = [e for e in events if isinstance(e, V07Request) and e.request_type == 0]
    assert sorted(r.failure is not None for r in produces) == [False, True]   # one whole, one truncated
    assert pairs(events).count((2, 2, "ok")) == 2                             # both stay in sync after it
    assert held.used == 0


def test_an_unsynced_side_counts_what_it_waits_on():
    """Joined mid-stream, each side waits for a candidate 900 KiB produce to complete: that waiting counts too."""
    from dissector.connection import Options
    from dissector.held import HeldBytes

    held = HeldBytes(limit=1 << 20)
    conns = [V07Connection(Options(held=held), mid_stream=True) for _ in range(8)]
    big = produce("t", 0, message(bytes(900 << 10)))
    events = []
    for i in range(0, len(big) - (64 << 10), 64 << 10):
        for conn in conns:
            events += conn.feed(B, big[i:i + (64 << 10)], i)
        assert held.used <= held.limit + (256 << 10)
    dropped = [e for e in events if isinstance(e, Anomaly) and e.kind == "frame_held_limit"]
    assert dropped
    for conn in conns:
        conn.close(10**9)
    assert held.used == 0
