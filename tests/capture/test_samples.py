"""Transformation invariants on the recorded samples (samples/*.pcap).

Each sample is rewritten (reordered and duplicated, 1% dropped, cut to start
mid-stream, snapped to 200 bytes) and decoded again; what comes out must be
consistent with what the untouched capture gives.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from capture import read_capture
from dissector.events import Anomaly, Direction, Exchange
from tests.capture import pcaptools as pt

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples").glob("*.pcap"))
pytestmark = pytest.mark.skipif(not SAMPLES, reason="no samples recorded yet")
IDS = [p.stem for p in SAMPLES]


def decode(path: Path) -> tuple[list, list]:
    exchanges, anomalies = [], []
    for ev in read_capture(path):
        if isinstance(ev.event, Exchange):
            exchanges.append((ev.conn, ev.event))
        elif isinstance(ev.event, Anomaly):
            anomalies.append((ev.conn, ev.event))
    return exchanges, anomalies


def dissector_bugs(anomalies: list) -> None:
    """An exception inside the dissector is contained and reported by capture, and must never happen."""
    bugs = {a.detail for _, a in anomalies if a.kind == "dissector_error"}
    assert not bugs, "dissector raised: " + "; ".join(sorted(bugs))


def req_key(conn, x):  # type: ignore[no-untyped-def]
    r = x.request
    return None if r is None else (conn.client_port, r.api_key, r.api_version, r.correlation_id, r.client_id, r.size)


def resp_key(conn, x):  # type: ignore[no-untyped-def]
    r = x.response
    return None if r is None else (conn.client_port, r.correlation_id, r.size)


def full_key(conn, x):  # type: ignore[no-untyped-def]
    return (req_key(conn, x), resp_key(conn, x), x.status.value)


@pytest.fixture(scope="module", params=SAMPLES, ids=IDS)
def sample(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # Work on a snapshot: the recorder may rewrite samples while tests run.
    src: Path = request.param
    tmp = tmp_path_factory.mktemp(src.stem)
    snap = tmp / src.name
    snap.write_bytes(src.read_bytes())
    linktype, records = pt.read_records(snap)
    exchanges, anomalies = decode(snap)
    assert exchanges, f"{src.name} decodes to nothing"
    assert not [a for _, a in anomalies if a.kind == "dissector_error"]
    return tmp, linktype, records, exchanges


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_reordered_and_duplicated_gives_the_same_exchanges(sample, seed: int) -> None:  # type: ignore[no-untyped-def]
    tmp, lt, records, original = sample
    path = pt.write_pcap(tmp / f"reorder{seed}.pcap", lt, pt.reorder_and_duplicate(records, seed=seed, dup_rate=0.2))
    got, anomalies = decode(path)
    dissector_bugs(anomalies)
    assert sorted(map(repr, (full_key(c, x) for c, x in got))) == \
        sorted(map(repr, (full_key(c, x) for c, x in original)))
    assert not [a for _, a in anomalies if a.kind == "gap"]


def error_codes(x) -> tuple:  # type: ignore[no-untyped-def]
    """Top-level and per-partition error codes of a response, as the dataset rows have them."""
    from dissector.views import partition_rows
    r = x.response
    if r is None or r.body is None:
        return ()
    return (r.body.get("error_code"),
            tuple(p.error_code for p in partition_rows(r.api_key, "response", r.api_version, r.body)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replies_ahead_of_their_requests_give_the_same_exchanges(sample, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Skewed capture points: segments swapped against TCP's causality (see pcaptools.causal_shuffle)."""
    tmp, lt, records, original = sample
    shuffled = pt.causal_shuffle(records, seed=seed)
    path = pt.write_pcap(tmp / f"causal{seed}.pcap", lt, shuffled)
    got, anomalies = decode(path)
    dissector_bugs(anomalies)

    def keys(xs):  # type: ignore[no-untyped-def]
        return sorted(repr((full_key(c, x), error_codes(x))) for c, x in xs)
    assert keys(got) == keys(original)
    assert not [a for _, a in anomalies if a.kind in ("gap", "causal_order_limit")]


def everything(conn, x, times: bool = True):  # type: ignore[no-untyped-def]
    """An exchange as its rows have it: both messages, their sizes, bodies, failures (and ``times``)."""
    def msg(m):  # type: ignore[no-untyped-def]
        if m is None:
            return None
        return (m.correlation_id, m.api_key, m.api_version, m.size, repr(m.body), repr(m.failure),
                (m.first_ts, m.last_ts) if times else None)
    return repr((conn.id, msg(x.request), msg(x.response), x.status.value))


@pytest.mark.parametrize("restamp", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_segments_swapped_with_neighbours_and_retransmitted_keep_every_exchange(sample, seed: int,  # type: ignore[no-untyped-def]
                                                                                 restamp: bool) -> None:
    """Half the data segments swapped with one of the next seven packets of their direction (past the ACK
    that covers them), 3 % of the packets captured twice: Wireshark reassembles each direction by sequence
    number and keeps every exchange; so must we, with the same rows. Each packet keeps its time, or the
    times are given back in order (then a late copy may come seconds after the ACK of its bytes, and only
    the times differ)."""
    tmp, lt, records, original = sample
    path = pt.write_pcap(tmp / f"swap{seed}{restamp}.pcap", lt, pt.swap_neighbours(records, seed=seed,
                                                                                    restamp=restamp))
    got, anomalies = decode(path)
    dissector_bugs(anomalies)
    times = not restamp
    assert sorted(everything(c, x, times) for c, x in got) == sorted(everything(c, x, times) for c, x in original)
    assert not [a for _, a in anomalies if a.kind in ("gap", "resync", "causal_order_limit")]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_percent_dropped(sample, seed: int) -> None:  # type: ignore[no-untyped-def]
    tmp, lt, records, original = sample
    path = pt.write_pcap(tmp / f"drop{seed}.pcap", lt, pt.drop(records, 0.01, seed=seed))
    got, anomalies = decode(path)
    reqs = {req_key(c, x) for c, x in original}
    resps = {resp_key(c, x): x.response.api_key for c, x in original if x.response}
    for c, x in got:
        if x.request is not None:
            assert req_key(c, x) in reqs, f"invented request {req_key(c, x)}"
        if x.response is not None:
            k = resp_key(c, x)
            assert k in resps, f"invented response {k}"
            assert x.response.api_key in (None, resps[k])
    whole = {full_key(c, x) for c, x in original}
    if sum(1 for c, x in got if full_key(c, x) in whole) < 0.85 * len(original):
        dissector_bugs(anomalies)
    recovered = sum(1 for c, x in got if full_key(c, x) in whole)
    assert recovered >= 0.85 * len(original), f"{recovered} of {len(original)}"


@pytest.mark.parametrize("fraction", [0.2, 0.5])
def test_cut_to_start_mid_stream(sample, fraction: float) -> None:  # type: ignore[no-untyped-def]
    tmp, lt, records, original = sample
    cut = pt.cut_start(records, fraction)
    if not cut:
        pytest.skip("nothing left")
    t0 = cut[0][0]
    path = pt.write_pcap(tmp / f"cut{fraction}.pcap", lt, cut)
    got, anomalies = decode(path)
    got_keys = {full_key(c, x) for c, x in got}
    inside = [(c, x) for c, x in original
              if (x.request is None or x.request.first_ts >= t0) and (x.response is None or x.response.first_ts >= t0)
              and (x.request is not None or x.response is not None)]
    missing = [(c, x) for c, x in inside if full_key(c, x) not in got_keys]
    if missing:
        dissector_bugs(anomalies)
    assert not missing, (f"{len(missing)} of {len(inside)} exchanges wholly after the cut were lost: "
                         f"{[full_key(c, x) for c, x in missing][:3]}")


def test_snaplen_200(sample) -> None:  # type: ignore[no-untyped-def]
    tmp, lt, records, original = sample
    snapped = pt.snap(records, 200)
    path = pt.write_pcap(tmp / "snap.pcap", lt, snapped, snaplen=200)
    got, anomalies = decode(path)
    dissector_bugs(anomalies)
    # Where the capture cut each stream, from the gaps it reported.
    cuts: dict[tuple[str, Direction], list[tuple[int, int]]] = defaultdict(list)
    for c, a in anomalies:
        if a.kind == "gap" and a.extra.get("reason") == "truncated":
            cuts[(c.id, a.direction)].append((a.extra["tcp_offset"], a.extra["tcp_offset"] + a.extra["bytes"]))
    cut_packets = sum(1 for r in snapped if len(r[2]) < r[3])
    if cut_packets:
        assert cuts, "truncation not reported"

    def visible(conn_id: str, direction: Direction, lo: int, hi: int) -> bool:
        return not any(a < hi and lo < b for a, b in cuts[(conn_id, direction)])

    requests = {(c.id, x.request.correlation_id): x.request for c, x in got if x.request}
    responses = {(c.id, x.response.correlation_id) for c, x in got if x.response}
    checked = 0
    for c, x in original:
        r = x.request
        if r is not None:
            head = 14 + len((r.client_id or "").encode())
            if visible(c.id, Direction.TO_BROKER, r.stream_offset, r.stream_offset + head):
                checked += 1
                d = requests.get((c.id, r.correlation_id))
                assert d is not None, f"request header of {c.id} corr {r.correlation_id} was captured, not decoded"
                assert (d.api_key, d.api_version, d.client_id) == (r.api_key, r.api_version, r.client_id)
        s = x.response
        if s is not None and visible(c.id, Direction.TO_CLIENT, s.stream_offset, s.stream_offset + 8):
            checked += 1
            assert (c.id, s.correlation_id) in responses
    assert checked >= len(original) // 2
