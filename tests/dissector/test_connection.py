"""Behaviour of the sans-IO connection: pairing, timing, damage, SASL, secrets.

Frames here are hand-built with the project's encoder because each test needs
one precise situation (a lost segment at a given byte, a reused correlation
id); real-capture decoding is proven in tests/capture and tests/kdissect.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from dissector.connection import Connection, Options
from dissector.encoder import encode_data, request_frame, response_frame
from dissector.events import Anomaly, Direction, Exchange, Request, SaslToken, Status
from dissector.redact import REDACTED
from dissector.topics import TopicRegistry
from dissector.views import partition_rows

B = Direction.TO_BROKER
C = Direction.TO_CLIENT


def metadata_req(corr: int, topics=("orders",)) -> bytes:
    return request_frame(3, 1, corr, "app", {"topics": [{"name": t} for t in topics]})


def metadata_resp(corr: int) -> bytes:
    return response_frame(3, 1, corr, {
        "brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}],
        "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "is_internal": False, "partitions": []}],
    })


def heartbeat_req(corr: int) -> bytes:
    return request_frame(12, 0, corr, "app", {"group_id": "g", "generation_id": 1, "member_id": "m"})


def heartbeat_resp(corr: int, error: int = 0) -> bytes:
    return response_frame(12, 0, corr, {"error_code": error})


def exchanges(events) -> list[Exchange]:
    return [e for e in events if isinstance(e, Exchange)]


def test_pipelined_requests_pair_by_correlation_id_and_time_from_last_request_byte():
    conn = Connection()
    events = []
    req = metadata_req(7)
    events += conn.feed(B, req[:10], 1_000)
    events += conn.feed(B, req[10:], 2_000)          # request's last byte at 2 µs
    events += conn.feed(B, heartbeat_req(8), 3_000)
    events += conn.feed(C, metadata_resp(7), 10_000)  # response's first byte at 10 µs
    events += conn.feed(C, heartbeat_resp(8, error=27), 12_000)
    ex = exchanges(events)
    assert [(e.api_key, e.correlation_id, e.status) for e in ex] == [(3, 7, Status.OK), (12, 8, Status.OK)]
    assert ex[0].latency_ns == 8_000
    assert ex[0].request.first_ts == 1_000 and ex[0].request.last_ts == 2_000
    assert ex[0].response.body["topics"][0]["name"] == "orders"
    assert ex[1].response.body["error_code"] == 27
    assert ex[0].request.client_id == "app"


def test_whole_byte_by_byte_and_coalesced_feeds_agree():
    frames_b = metadata_req(1) + heartbeat_req(2)
    frames_c = metadata_resp(1) + heartbeat_resp(2)

    def run(chunk: int):
        conn = Connection()
        out = []
        for i in range(0, len(frames_b), chunk):
            out += conn.feed(B, frames_b[i:i + chunk], 0)
        for i in range(0, len(frames_c), chunk):
            out += conn.feed(C, frames_c[i:i + chunk], 0)
        return [(e.api_key, e.correlation_id, e.status, e.request.body, e.response.body) for e in exchanges(out)]

    whole = run(len(frames_b) + len(frames_c))
    assert len(whole) == 2
    assert run(1) == whole
    assert run(7) == whole


def test_unanswered_request_before_an_answered_one_is_no_response():
    conn = Connection()
    events = conn.feed(B, heartbeat_req(1) + heartbeat_req(2), 0)
    events += conn.feed(C, heartbeat_resp(2), 5)
    ex = exchanges(events)
    assert [(e.correlation_id, e.status) for e in ex] == [(1, Status.NO_RESPONSE), (2, Status.OK)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=4))
def test_every_request_a_later_response_passes_over_is_reported_then(rounds: list[list[bool]]):
    # Rounds of pipelined requests, each followed by the responses to some of them, in order.
    # A request is reported unanswered as soon as a later one's response arrives (the
    # connection skips that search while nothing older can be waiting), the rest at the end.
    conn = Connection()
    events: list = []
    expected: list[tuple[int, Status]] = []
    waiting: list[int] = []
    corr = 0
    for answered in rounds:
        first = corr + 1
        corr += len(answered)
        events += conn.feed(B, b"".join(heartbeat_req(c) for c in range(first, corr + 1)), 0)
        waiting += range(first, corr + 1)
        for c, answer in zip(range(first, corr + 1), answered):
            if answer:
                events += conn.feed(C, heartbeat_resp(c), 1)
                expected += [(w, Status.NO_RESPONSE) for w in waiting[:waiting.index(c)]] + [(c, Status.OK)]
                waiting = waiting[waiting.index(c) + 1:]
    events += conn.close(2)
    expected += [(w, Status.NO_RESPONSE) for w in waiting]
    assert [(e.correlation_id, e.status) for e in exchanges(events)] == expected


def test_reused_correlation_id_pairs_with_latest_request():
    conn = Connection()
    events = conn.feed(B, heartbeat_req(5), 0)
    events += conn.feed(B, metadata_req(5), 1)
    events += conn.feed(C, metadata_resp(5), 2)
    ex = exchanges(events)
    assert [(e.api_key, e.status) for e in ex] == [(12, Status.NO_RESPONSE), (3, Status.OK)]


def produce_req(corr: int, acks: int, version: int = 3) -> bytes:
    return request_frame(0, version, corr, "p", {
        "transactional_id": None, "acks": acks, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}],
    })


def test_acks_zero_produce_expects_no_response():
    conn = Connection()
    ex = exchanges(conn.feed(B, produce_req(1, acks=0), 0))
    assert [(e.api_key, e.status, e.response) for e in ex] == [(0, Status.NO_RESPONSE_EXPECTED, None)]
    assert conn.in_flight == 0


def test_close_reports_requests_never_answered():
    conn = Connection()
    conn.feed(B, heartbeat_req(3), 0)
    ex = exchanges(conn.close(10))
    assert [(e.correlation_id, e.status) for e in ex] == [(3, Status.NO_RESPONSE)]


def test_gap_inside_a_frame_reports_it_truncated_and_keeps_sync():
    big = request_frame(3, 1, 1, "app", {"topics": [{"name": "x" * 200}]})
    conn = Connection()
    events = conn.feed(B, big[:60], 0)
    events += conn.gap(B, 1, 100)                 # bytes 60..159 lost, frame continues to its end
    events += conn.feed(B, big[160:], 2)
    events += conn.feed(B, heartbeat_req(2), 3)   # next frame starts exactly after: still in sync
    events += conn.feed(C, metadata_resp(1) + heartbeat_resp(2), 4)
    reqs = [e for e in events if isinstance(e, Request)]
    assert [(r.api_key, r.correlation_id) for r in reqs] == [(3, 1), (12, 2)]
    assert reqs[0].failure is not None and reqs[0].failure.error == "Truncated"
    assert reqs[0].size == len(big)
    assert reqs[1].failure is None
    assert [(e.correlation_id, e.status) for e in exchanges(events)] == [(1, Status.OK), (2, Status.OK)]
    assert any(isinstance(e, Anomaly) and e.kind == "gap" for e in events)
    assert not any(isinstance(e, Anomaly) and e.kind == "resync" for e in events)


def test_gap_across_frames_resyncs_on_a_provable_request_and_invents_nothing():
    stream = heartbeat_req(1) + metadata_req(2) + heartbeat_req(3) + heartbeat_req(4)
    cut = len(heartbeat_req(1)) + 5
    lost = 40  # past the end of the Metadata frame and into heartbeat 3: sync is lost
    conn = Connection()
    events = conn.feed(B, stream[:cut], 0)
    events += conn.gap(B, 1, lost)
    events += conn.feed(B, stream[cut + lost:], 2)
    reqs = [(e.api_key, e.correlation_id) for e in events if isinstance(e, Request) and e.failure is None]
    assert reqs == [(12, 1), (12, 4)]
    resync = [e for e in events if isinstance(e, Anomaly) and e.kind == "resync"]
    assert len(resync) == 1 and resync[0].extra["skipped"] > 0


def test_capture_starting_mid_stream_skips_to_the_first_whole_frame():
    stream = metadata_req(1, topics=("a" * 50,)) + heartbeat_req(2)
    conn = Connection(mid_stream=True)
    events = conn.feed(B, stream[17:], 0)
    events += conn.feed(C, heartbeat_resp(2), 1)
    assert [(e.api_key, e.correlation_id, e.status) for e in exchanges(events)] == [(12, 2, Status.OK)]
    # Joining mid-stream is no error, and the anomaly reads so (a loss of sync later reads otherwise).
    assert [e.detail for e in events if isinstance(e, Anomaly)] == [
        f"the capture joined this connection mid-stream: requests read from the first frame, after "
        f"{len(metadata_req(1, topics=('a' * 50,))) - 17} bytes of an earlier one",
        "the capture joined this connection mid-stream: responses read from the first frame"]


def test_a_resync_after_lost_bytes_is_not_called_a_mid_stream_join():
    stream = heartbeat_req(1) + metadata_req(2) + heartbeat_req(3) + heartbeat_req(4)
    cut = len(heartbeat_req(1)) + 5
    conn = Connection(mid_stream=True)
    events = conn.feed(B, stream[:cut], 0)          # joined on a frame boundary
    events += conn.gap(B, 1, 40)
    events += conn.feed(B, stream[cut + 40:], 2)
    details = [e.detail for e in events if isinstance(e, Anomaly) and e.kind == "resync"]
    assert details[0] == "the capture joined this connection mid-stream: requests read from the first frame"
    assert details[1].startswith("skipped ") and details[1].endswith(" bytes to the next provable frame")


def test_trailing_bytes_name_the_api():
    frame = metadata_req(1)
    padded = struct.pack(">i", len(frame) - 4 + 3) + frame[4:] + b"\0\0\0"   # librdkafka's stray bytes
    events = Connection().feed(B, padded, 0)
    assert [e.detail for e in events if isinstance(e, Anomaly)] == ["3 bytes after the Metadata v1 request body"]


def test_orphan_response_of_a_unique_api_is_inferred():
    resp = response_frame(18, 3, 99, {
        "error_code": 0,
        "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11},
                     {"api_key": 1, "min_version": 0, "max_version": 17}],
        "throttle_time_ms": 0, "supported_features": [], "finalized_features_epoch": -1,
        "finalized_features": [], "zk_migration_ready": False,
    })
    conn = Connection()
    ex = exchanges(conn.feed(C, resp, 0))
    assert len(ex) == 1 and ex[0].status == Status.ORPHAN_RESPONSE
    assert ex[0].response.inferred and ex[0].response.api_key == 18
    assert ex[0].response.body["api_keys"][1]["max_version"] == 17


def test_orphan_response_that_many_apis_parse_stays_undecoded():
    conn = Connection()
    ex = exchanges(conn.feed(C, heartbeat_resp(4), 0))  # a lone int16: fits dozens of apis
    assert ex[0].status == Status.ORPHAN_RESPONSE
    assert ex[0].response.api_key is None and ex[0].response.body is None
    assert ex[0].response.correlation_id == 4 and ex[0].response.size == len(heartbeat_resp(4))


def test_absurd_frame_size_is_an_anomaly_not_an_exception():
    conn = Connection()
    events = conn.feed(B, struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 64, 0)
    events += conn.feed(B, heartbeat_req(1), 1)
    assert any(isinstance(e, Anomaly) and e.kind == "bad_frame_size" for e in events)
    assert [(e.api_key, e.correlation_id) for e in events if isinstance(e, Request)] == [(12, 1)]


def test_unknown_version_keeps_header_and_raw_body():
    # Heartbeat is flexible from v4, so a future v500 carries request header v2 (tags after the client id).
    frame = struct.pack(">ihhihb", 13, 12, 500, 1, 0, 0) + b"\x01\x02"
    conn = Connection()
    events = conn.feed(B, frame, 0)
    events += conn.feed(C, struct.pack(">ii", 6, 1) + b"\x00\x00", 1)
    req = next(e for e in events if isinstance(e, Request))
    assert (req.api_key, req.api_version, req.correlation_id, req.body, req.raw) == (12, 500, 1, None, b"\x01\x02")
    ex = exchanges(events)
    assert ex[0].status == Status.OK and ex[0].response.raw == b"\x00\x00"
    assert any(isinstance(e, Anomaly) and e.kind == "unknown_api" for e in events)


def sasl_session(keep_secrets: bool):
    conn = Connection(Options(keep_secrets=keep_secrets))
    events = conn.feed(B, request_frame(17, 0, 1, "c", {"mechanism": "PLAIN"}), 0)
    events += conn.feed(C, response_frame(17, 0, 1, {"error_code": 0, "mechanisms": ["PLAIN"]}), 1)
    token = b"\x00alice\x00s3cret"
    events += conn.feed(B, struct.pack(">i", len(token)) + token, 2)
    events += conn.feed(C, struct.pack(">i", 0), 3)
    events += conn.feed(B, heartbeat_req(2), 4)
    events += conn.feed(C, heartbeat_resp(2), 5)
    return events


def test_raw_sasl_tokens_after_handshake_v0_are_tokens_and_redacted():
    events = sasl_session(keep_secrets=False)
    tokens = [e for e in events if isinstance(e, SaslToken)]
    assert [(t.direction, t.size, t.mechanism, t.token) for t in tokens] == [(B, 17, "PLAIN", None), (C, 4, "PLAIN", None)]
    assert [(e.api_key, e.status) for e in exchanges(events)] == [(17, Status.OK), (12, Status.OK)]
    assert not any(isinstance(e, Anomaly) for e in events)


def test_raw_sasl_tokens_kept_when_asked():
    tokens = [e for e in sasl_session(keep_secrets=True) if isinstance(e, SaslToken)]
    assert tokens[0].token == b"\x00alice\x00s3cret"


def test_sasl_authenticate_plain_password_redacted_user_kept():
    conn = Connection()
    conn.feed(B, request_frame(17, 1, 1, "c", {"mechanism": "PLAIN"}), 0)
    conn.feed(C, response_frame(17, 1, 1, {"error_code": 0, "mechanisms": ["PLAIN"]}), 1)
    events = conn.feed(B, request_frame(36, 2, 2, "c", {"auth_bytes": b"\x00alice\x00s3cret"}), 2)
    req = next(e for e in events if isinstance(e, Request))
    assert req.body["auth_bytes"] == REDACTED
    assert req.body["sasl_plain_username"] == "alice"
    assert "s3cret" not in repr(req.body)


def test_sensitive_config_values_redacted():
    conn = Connection()
    events = conn.feed(B, request_frame(44, 0, 1, "admin", {
        "resources": [{"resource_type": 4, "resource_name": "1", "configs": [
            {"name": "ssl.keystore.password", "config_operation": 0, "value": "hunter2"},
            {"name": "log.retention.ms", "config_operation": 0, "value": "1000"}]}],
        "validate_only": False}), 0)
    configs = next(e for e in events if isinstance(e, Request)).body["resources"][0]["configs"]
    assert [c["value"] for c in configs] == [REDACTED, "1000"]


def test_consumer_protocol_inside_join_group_is_decoded():
    subscription = encode_data("ConsumerProtocolSubscription", 1,
                               {"topics": ["orders", "payments"], "user_data": None,
                                "owned_partitions": [{"topic": "orders", "partitions": [0, 1]}]},
                               version_prefix=True)
    conn = Connection()
    events = conn.feed(B, request_frame(11, 5, 1, "c", {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription}]}), 0)
    meta = next(e for e in events if isinstance(e, Request)).body["protocols"][0]["metadata"]
    assert meta["version"] == 1
    assert meta["topics"] == ["orders", "payments"]
    assert meta["owned_partitions"] == [{"topic": "orders", "partitions": [0, 1]}]


def test_topic_ids_resolved_through_metadata_seen_on_another_connection():
    registry = TopicRegistry()
    meta_conn = Connection(topics=registry)
    meta_conn.feed(B, request_frame(3, 12, 1, "c", {"topics": None, "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}), 0)
    tid = "xKTA33FfQbecpJXGJ0TVbA"
    meta_conn.feed(C, response_frame(3, 12, 1, {
        "throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "topic_id": tid, "is_internal": False, "partitions": [],
                    "topic_authorized_operations": 0}]}), 1)
    fetch_conn = Connection(topics=registry)
    events = fetch_conn.feed(B, request_frame(1, 13, 2, "c", {
        "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": tid, "partitions": [{"partition": 3, "current_leader_epoch": 0, "fetch_offset": 42,
                                                    "last_fetched_epoch": -1, "log_start_offset": -1,
                                                    "partition_max_bytes": 100}]}],
        "forgotten_topics_data": [], "rack_id": ""}), 2)
    req = next(e for e in events if isinstance(e, Request))
    rows = list(partition_rows(1, "request", 13, req.body, registry))
    assert [(r.topic, r.topic_id, r.partition, r.offset) for r in rows] == [("orders", tid, 3, 42)]


def test_controlled_shutdown_v0_has_no_client_id():
    frame = request_frame(7, 0, 9, None, {"broker_id": 3})
    assert frame == struct.pack(">ihhii", 12, 7, 0, 9, 3)
    conn = Connection()
    req = next(e for e in conn.feed(B, frame, 0) if isinstance(e, Request))
    assert (req.header_version, req.client_id, req.body) == (0, None, {"broker_id": 3})


def test_malformed_body_keeps_what_decoded_and_where_it_failed():
    good = metadata_req(4, topics=("alpha", "beta"))
    # Claim 3 topics but carry 2: the decoder runs out of bytes inside the third.
    bad = good[:14 + 3] + struct.pack(">i", 3) + good[14 + 3 + 4:]
    conn = Connection()
    events = conn.feed(B, bad, 0)
    req = next(e for e in events if isinstance(e, Request))
    assert req.body["topics"][:2] == [{"name": "alpha"}, {"name": "beta"}]
    assert req.failure is not None and req.failure.offset == len(bad) - 4
    assert any(isinstance(e, Anomaly) and e.kind == "malformed" for e in events)


def test_api_versions_unsupported_version_reply_is_read_as_v0():
    conn = Connection()
    conn.feed(B, request_frame(18, 3, 1, "c", {"client_software_name": "x", "client_software_version": "1"}), 0)
    events = conn.feed(C, response_frame(18, 0, 1, {
        "error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}), 1)
    ex = exchanges(events)[0]
    assert ex.status == Status.OK and ex.response.failure is None
    assert ex.response.body == {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    assert not any(isinstance(e, Anomaly) for e in events)


def test_exchange_with_a_malformed_request_is_malformed():
    good = metadata_req(4, topics=("alpha",))
    bad = good[:14 + 3] + struct.pack(">i", 2) + good[14 + 3 + 4:]  # two topics claimed, one carried
    conn = Connection()
    events = conn.feed(B, bad, 0) + conn.feed(C, metadata_resp(4), 1)
    assert [e.status for e in exchanges(events)] == [Status.MALFORMED]


def produce_resp(corr: int, offset: int) -> bytes:
    return response_frame(0, 9, corr, {
        "responses": [{"name": "t", "partition_responses": [{
            "index": 0, "error_code": 0, "base_offset": offset, "log_append_time_ms": -1,
            "log_start_offset": 0, "record_errors": [], "error_message": None}]}],
        "throttle_time_ms": 0})


def test_one_sided_flow_infers_every_orphan_and_still_notices_a_new_api():
    conn = Connection()
    events = []
    for i in range(200):  # past the full searches: later orphans take the shortcut
        events += conn.feed(C, produce_resp(i, i), i)
    events += conn.feed(C, response_frame(18, 3, 999, {
        "error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 11},
                                      {"api_key": 1, "min_version": 0, "max_version": 17}],
        "throttle_time_ms": 0, "supported_features": [], "finalized_features_epoch": -1,
        "finalized_features": [], "zk_migration_ready": False}), 1000)
    ex = exchanges(events)
    assert len(ex) == 201 and all(e.status == Status.ORPHAN_RESPONSE and e.response.inferred for e in ex)
    assert {e.response.api_key for e in ex[:200]} == {0}
    assert [r["base_offset"] for e in ex[:200] for r in e.response.body["responses"][0]["partition_responses"]] \
        == list(range(200))
    assert ex[200].response.api_key == 18


def test_in_flight_bound_is_memory_and_says_when_it_bites():
    # 15,000 small requests in flight (above the old 10,000 count cap) stay paired under the default bound.
    conn = Connection()
    events = []
    for corr in range(15_000):
        events += conn.feed(B, heartbeat_req(corr), corr)
    assert conn.in_flight == 15_000 and not exchanges(events)
    for corr in range(15_000):
        events += conn.feed(C, heartbeat_resp(corr), 20_000 + corr)
    assert [e.status for e in exchanges(events)] == [Status.OK] * 15_000
    # A small bound: the oldest are given up, once with an anomaly, and the bytes are accounted on every path.
    size = len(heartbeat_req(0))
    conn = Connection(Options(max_in_flight_bytes=10 * (size + 1024)))
    events = []
    for corr in range(25):
        events += conn.feed(B, heartbeat_req(corr), corr)
    assert conn.in_flight == 10
    limits = [e for e in events if isinstance(e, Anomaly) and e.kind == "in_flight_limit"]
    assert len(limits) == 1 and "correlation id 0" in limits[0].detail
    assert [e.correlation_id for e in exchanges(events)] == list(range(15))
    for corr in range(15, 25):
        events += conn.feed(C, heartbeat_resp(corr), 100 + corr)
    assert conn.in_flight == 0 and conn._pending_bytes == 0


def _frame_of(size: int, corr: int) -> bytes:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": bytes(size)}]}]}
    return request_frame(0, 3, corr, "c", body)


def test_frames_still_arriving_share_one_capture_wide_budget():
    """Two connections each trickle a 3 MiB request in; the capture allows 4 MiB held in all."""
    from dissector.held import HeldBytes

    held = HeldBytes(limit=4 << 20)
    opts = Options(held=held)
    a, b = Connection(opts), Connection(opts)
    big = _frame_of(3 << 20, corr=1)
    after = _frame_of(100, corr=2)
    events = []
    for i in range(0, len(big), 64 << 10):
        events += a.feed(Direction.TO_BROKER, big[i:i + (64 << 10)], i)
        events += b.feed(Direction.TO_BROKER, big[i:i + (64 << 10)], i)
    events += b.feed(Direction.TO_BROKER, after, 10**9)
    events += a.feed(Direction.TO_BROKER, after, 10**9)
    cut = [e for e in events if isinstance(e, Anomaly) and e.kind == "frame_held_limit"]
    assert len(cut) == 1 and held.cuts == 1
    reqs = [e for e in events if isinstance(e, Request)]
    # One whole, one truncated (decoded as far as held), and both next requests in sync.
    assert sorted((r.correlation_id, r.failure is not None) for r in reqs) == [(1, False), (1, True), (2, False), (2, False)]
    assert held.used == 0


def test_orphans_no_schema_fits_cost_a_full_search_only_now_and_then(monkeypatch):
    """A one-sided stream of frames that are no response (damage, or hostile): after the first misses,
    a full search over every schema runs only for one orphan in 64; each is still reported."""
    import dissector.connection as connection

    searches = []
    real = connection.infer_response

    def counting(decoders, frame, seen, candidates=None):  # type: ignore[no-untyped-def]
        searches.append(candidates is None)
        return real(decoders, frame, seen, candidates)

    monkeypatch.setattr(connection, "infer_response", counting)
    conn = Connection()
    junk = b"".join(struct.pack(">ii", 6, i) + b"\xfe\xfe" for i in range(64 * 40))
    events = conn.feed(C, junk, 0)
    ex = exchanges(events)
    assert len(ex) == 64 * 40 and all(e.status == Status.ORPHAN_RESPONSE and not e.response.inferred for e in ex)
    assert sum(searches) == 64 + 39
    assert [a.kind for a in events if isinstance(a, Anomaly)] == ["inference_limit"]


def test_the_capture_wide_inference_budget_limits_connections_that_each_miss_a_little():
    from dissector.infer import InferenceBudget

    budget = InferenceBudget(limit=100)
    conns = [Connection(Options(inference=budget)) for _ in range(20)]
    junk = b"".join(struct.pack(">ii", 6, i) + b"\xfe\xfe" for i in range(30))
    limited = 0
    for conn in conns:
        events = conn.feed(C, junk, 0)
        limited += sum(1 for a in events if isinstance(a, Anomaly) and a.kind == "inference_limit")
        assert len(exchanges(events)) == 30
    # Three connections miss 30 times each, the fourth 10 more: the budget is spent. From then on a
    # connection searches fully only at its orphans 64, 128, 256...: none of these 30 orphans.
    assert limited == 17 and budget.misses == 100
