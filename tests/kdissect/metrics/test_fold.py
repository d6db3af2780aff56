"""The metric fold on the real sample captures: the same figures live-style and from Parquet, the
dataset's own counts, and bounded cardinality."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from kdissect.metrics import catalog as C
from kdissect.metrics.fold import MetricsFold

from tests.kdissect.metrics.helpers import PCAPS, SHARE_PCAP, live_fold, parquet_fold, samples, share_truth, total


@pytest.fixture(scope="module")
def folded(tmp_path_factory: pytest.TempPathFactory) -> tuple[MetricsFold, list[Path], Path]:
    out = tmp_path_factory.mktemp("metrics") / "out"
    fold, files = live_fold(PCAPS, out)
    return fold, files, out


def _table(out: Path, name: str):
    return ds.dataset(out / name, format="parquet").to_table().to_pandas()


def test_live_and_parquet_folds_agree_on_every_sample(folded) -> None:
    fold, files, _ = folded
    live = samples(fold)
    assert live == samples(parquet_fold(files))
    assert {name for name, _ in live} >= {"kafka_requests", "kafka_request_duration_seconds", "kafka_produced_records",
                                          "kafka_fetched_records", "kafka_consumer_lag_records",
                                          "kafka_group_rebalances", "kafka_group_members", "kdissect_anomalies",
                                          "kafka_share_acquired_records", "kafka_share_redelivered_records",
                                          "kafka_share_acknowledged_records", "kafka_share_group_members"}


def test_requests_by_api_equal_the_dataset_rows(folded) -> None:
    fold, _, out = folded
    ex = _table(out, "exchanges")
    want = ex.api_name.fillna("unknown").value_counts().to_dict()
    got: dict[str, int] = {}
    for (api, *_), n in fold.requests.items():
        got[api] = got.get(api, 0) + n
    assert got == want
    errors = ex[ex.error_code.fillna(0) != 0]
    assert total(fold, "kafka_requests") - total(fold, "kafka_requests", error="NONE") == len(errors) > 0
    an = _table(out, "anomalies").kind.value_counts().to_dict()
    assert {k[0]: v for k, v in fold.anomalies.items()} == an


def test_produced_and_fetched_records_follow_the_partition_rows(folded) -> None:
    fold, _, out = folded
    ex, parts = _table(out, "exchanges"), _table(out, "partitions")
    keys = ["capture", "connection", "correlation_id"]
    parts["t"] = parts.topic.fillna(parts.topic_id)
    req = parts[(parts.api_key == 0) & (parts.direction == "request")]
    resp = parts[(parts.api_key == 0) & (parts.direction == "response")][keys + ["t", "partition", "error_code"]]
    joined = req.merge(resp, on=keys + ["t", "partition"], how="left", suffixes=("", "_resp")).merge(
        ex[keys + ["status"]], on=keys)
    accepted = joined[(joined.error_code_resp == 0) | (joined.status == "no_response_expected")]
    for topic, n in accepted.groupby("t").record_count.sum().items():
        assert total(fold, "kafka_produced_records", topic=topic) == n
    assert total(fold, "kafka_produced_records") == accepted.record_count.sum() > 0
    fetched = parts[(parts.api_key == 1) & (parts.direction == "response")]
    assert total(fold, "kafka_fetched_records") == fetched.record_count.fillna(0).sum() > 0
    assert total(fold, "kafka_fetched_bytes") == fetched.bytes.fillna(0).sum() > 0


def test_latency_leaves_out_idle_fetches_and_acks0(folded) -> None:
    fold, _, out = folded
    ex, parts = _table(out, "exchanges"), _table(out, "partitions")
    answered = ex[ex.latency_ms.notna() & (ex.status != "no_response_expected")]
    keys = ["capture", "connection", "correlation_id"]
    records = (parts[(parts.api_key == 1) & (parts.direction == "response")].groupby(keys).record_count
               .sum().rename("records").reset_index())
    fetch = answered[answered.api_key == 1].merge(records, on=keys, how="left")
    wait = fetch.request.map(lambda r: json.loads(r).get("max_wait_ms") if isinstance(r, str) else None)
    idle = (fetch.records.fillna(0) == 0) & (wait > 0) & (fetch.latency_ms >= wait * 0.9)
    assert idle.sum() > 0, "the samples hold no idle long-poll: the test proves less"
    assert (ex.status == "no_response_expected").sum() > 0
    counted = sum(sum(h[:-1]) for h in fold.durations.values())
    assert counted == len(answered) - idle.sum()
    seconds = sum(h[-1] for h in fold.durations.values())
    assert seconds == pytest.approx((answered.latency_ms.sum() - fetch[idle].latency_ms.sum()) / 1000)
    # Every bucket bound is an upper bound of its observations (Prometheus' le).
    for (api, _broker), h in fold.durations.items():
        lat = answered[answered.api_name.fillna("unknown") == api].latency_ms / 1000
        assert sum(h[:C.BUCKETS.index(0.001) + 1]) <= (lat <= 0.001).sum()


def test_cardinality_is_bounded_and_the_rest_is_folded_into_other(tmp_path: Path) -> None:
    fold, files = live_fold(PCAPS, tmp_path / "out", max_series=3)
    full = parquet_fold(files)
    for name in ("requests", "produced_records", "fetched_records", "durations"):
        small, big = getattr(fold, name), getattr(full, name)
        assert len(small) <= 4 and len(big) > 4, name
        other = next(k for k in small if set(k) == {C.OTHER})
        if name == "durations":
            assert sum(sum(h[:-1]) for h in small.values()) == sum(sum(h[:-1]) for h in big.values())
            assert sum(small[other][:-1]) > 0
        else:
            assert sum(small.values()) == sum(big.values()) and small[other] > 0
            kept = {k: v for k, v in small.items() if k != other}
            assert all(big[k] == v for k, v in kept.items())   # the first series seen stay exact
    assert fold.folded[("kafka_requests",)] > 0
    fams = {f.metric.name: f.samples for f in fold.families()}
    assert all(len(s) <= 4 for name, s in fams.items() if name != "kdissect_metric_series_folded")
    assert len(fams["kdissect_metric_series_folded"]) <= len(C.METRICS)     # one per metric at most
    assert sum(n for _, n in fams["kafka_requests"]) == sum(full.requests.values())


def test_share_counters_are_the_share_consumers_own_counts(folded) -> None:
    """Acquired, redelivered and acknowledged records per group, topic and client: what each
    ShareConsumer of the sample counted itself (its locks that expired were never acknowledged)."""
    fold, _, _ = folded
    truth = share_truth()
    groups = {k[0] for k in truth["acquired"]}
    mine = fold.shares
    assert {k: v for k, v in mine.acquired_records().items() if k[0] in groups} == truth["acquired"]
    assert {k: v for k, v in mine.redelivered_records().items() if k[0] in groups} == truth["redelivered"]
    assert {k: v for k, v in mine.acknowledged.items() if k[0] in groups} == truth["acknowledged"]
    assert {k[3] for k in truth["acknowledged"]} == {"accept", "release", "reject"}
    assert truth["acquired"][("kd-share", "share-jobs", "kd-share-stuck")] == 6     # named, not a topic id
    assert mine.group_members() == {("kd-share",): 0}       # every member left
    assert total(fold, "kafka_share_acknowledged_records", type="release") == 12


def test_share_members_gauge_follows_the_joins_and_leaves(tmp_path: Path) -> None:
    """Three ShareConsumers join the sample's group one after another and all leave by its end."""
    from kdissect.metrics.parquet import ParquetFold, fold_files
    seen: list[int] = []

    class Watching(ParquetFold):
        def exchange(self, *args) -> None:  # type: ignore[no-untyped-def]
            super().exchange(*args)
            n = self.shares.group_members().get(("kd-share",))
            if n is not None and (not seen or seen[-1] != n):
                seen.append(n)

    _, files = live_fold([SHARE_PCAP], tmp_path / "out")
    fold_files(files, Watching())
    assert seen[:3] == [1, 2, 3] and max(seen) == 3 and seen[-1] == 0


def test_share_series_past_the_limit_are_folded_into_other(tmp_path: Path) -> None:
    fold, files = live_fold([SHARE_PCAP], tmp_path / "out", max_series=1)
    full = parquet_fold(files)
    for small, big in ((fold.shares.acquired_records(), full.shares.acquired_records()),
                       (fold.shares.redelivered_records(), full.shares.redelivered_records()),
                       (fold.shares.acknowledged, full.shares.acknowledged)):
        assert len(small) == 2 and len(big) > 2 and sum(small.values()) == sum(big.values())
        other = next(k for k in small if set(k) == {C.OTHER})
        assert all(big[k] == v for k, v in small.items() if k != other)
    assert fold.folded[("kafka_share_acquired_records",)] == fold.folded[("kafka_share_redelivered_records",)] > 0
    assert fold.folded[("kafka_share_acknowledged_records",)] > 0


def test_share_bodies_no_peer_sends_count_nothing_and_state_stays_bounded() -> None:
    """Hand-built bodies (no real client sends these): wrong types count nothing and raise nothing; a
    batch of one type per offset counts each; members past the cap are not kept."""
    from kdissect.dataset.tables import COLUMNS
    from kdissect.metrics.shares import SHARE_ACKNOWLEDGE, SHARE_FETCH, SHARE_GROUP_HEARTBEAT, ShareFold
    shares = ShareFold(MetricsFold(), max_state=2)
    pa = [[] for _ in COLUMNS["partitions"]]
    odd = [None, 7, "x", [], [None, 3], {"topics": "x"}, {"topics": [{"partitions": [{"acknowledgement_batches": [
        {"first_offset": "1", "last_offset": 2, "acknowledge_types": [1]},
        {"first_offset": 5, "last_offset": 2, "acknowledge_types": [1]},
        {"first_offset": 1, "last_offset": 2, "acknowledge_types": [9]},
        {"first_offset": 1, "last_offset": 2, "acknowledge_types": "1"}, 3]}, None]}]}]
    for body in odd:
        for api in (SHARE_FETCH, SHARE_ACKNOWLEDGE, SHARE_GROUP_HEARTBEAT):
            shares.exchange(api, "c", body, body if api == SHARE_FETCH else {"responses": body}, pa, 0, 0)
    assert shares.acknowledged == {} and shares.acquired == {} and shares.members == {}
    per_offset = {"group_id": "g", "topics": [{"topic_id": "T", "partitions": [{"acknowledgement_batches": [
        {"first_offset": 10, "last_offset": 14, "acknowledge_types": [1, 0, 2, 2, 3]}]}]}]}
    shares.exchange(SHARE_ACKNOWLEDGE, "c", per_offset, None, pa, 0, 0)
    assert shares.acknowledged == {("g", "T", "c", "accept"): 1, ("g", "T", "c", "release"): 2,
                                   ("g", "T", "c", "reject"): 1}
    for member in ("m1", "m2", "m3"):
        shares.exchange(SHARE_GROUP_HEARTBEAT, "c", {"group_id": "g", "member_id": member, "member_epoch": 0},
                        None, pa, 0, 0)
    shares.exchange(SHARE_GROUP_HEARTBEAT, "c", {"group_id": "g", "member_id": "m1", "member_epoch": -1}, None,
                    pa, 0, 0)
    assert shares.members == {"g": {"m1": True, "m2": False}} and shares.group_members() == {("g",): 1}



def test_forged_share_ranges_count_nothing_as_in_the_share_tables() -> None:
    """Offsets no broker hands out (negative, past 2^62, a range of 2^40 offsets) are left out by the
    fold as by analysis.derived (tests/analysis/jobs/test_shares.py holds the tables to the same)."""
    from kdissect.dataset.tables import COLUMNS
    from kdissect.metrics.shares import SHARE_ACKNOWLEDGE, SHARE_FETCH, ShareFold
    shares = ShareFold(MetricsFold(), max_state=100)
    pa = [[] for _ in COLUMNS["partitions"]]
    top = (1 << 63) - 1
    acquired = [(-5, 3), (0, top), (1 << 40, 1 << 41), (top - 1, top), (10, 199_999)]
    response = {"responses": [{"topic_id": "T", "partitions": [{"partition_index": 0, "acquired_records": [
        {"first_offset": f, "last_offset": last, "delivery_count": 1} for f, last in acquired]}]}]}
    shares.exchange(SHARE_FETCH, "c", {"group_id": "g", "topics": []}, response, pa, 0, 0)
    acks = {"group_id": "g", "topics": [{"topic_id": "T", "partitions": [{"acknowledgement_batches": [
        {"first_offset": -1, "last_offset": top, "acknowledge_types": [1]},
        {"first_offset": top - 2, "last_offset": top, "acknowledge_types": [1, 2, 3]},
        {"first_offset": 10, "last_offset": 11, "acknowledge_types": [3]}]}]}]}
    shares.exchange(SHARE_ACKNOWLEDGE, "c", acks, None, pa, 0, 0)
    assert shares.acquired_records() == {("g", "T", "c"): 199_990}
    assert shares.acknowledged == {("g", "T", "c", "reject"): 2}

def test_lag_follows_the_consumer_lag_rule(folded) -> None:
    """Group lag = high watermark - committed offset (else fetch position), never below 0."""
    fold, _, _ = folded
    lag = fold.lag()
    assert lag, "no consumer group lag in the samples"
    for (group, topic, partition), value in lag.items():
        hw = fold.watermarks[(topic, partition)][0]
        basis = fold.commits.get((group, topic, partition))
        assert basis is not None or any((c, topic, partition) in fold.positions
                                        for c, gs in fold.client_groups.items() if group in gs)
        if basis is not None:
            assert value == max(hw - basis[0], 0)
    assert all(v >= 0 for v in lag.values())
    assert fold.rebalances and all(v >= 1 for v in fold.rebalances.values())
    members = fold.members()
    assert members[("kd-rb-tansu",)] == 1 and members[("kd-lag-mock",)] == 1
    assert members[("kd-848-mock",)] == 0 and fold.generations["kd-848-mock"]   # KIP-848: every member left


def _by(d: dict, *idx: int) -> dict:
    out: dict = {}
    for k, v in d.items():
        key = tuple(k[i] for i in idx)
        out[key] = out.get(key, 0) + v
    return out


def test_tls_with_its_key_log_counts_as_its_plaintext_hop(tmp_path: Path) -> None:
    from kdissect.run.source import DecodeOptions
    from tests.kdissect.conftest import SAMPLES
    tls = SAMPLES / "tls" / "tls13-aes128.pcap"
    fold, _ = live_fold([tls], tmp_path / "tls", options=DecodeOptions(tls_keylog=(str(tls.with_suffix(".keys")),)))
    plain, _ = live_fold([tls.with_name("tls13-aes128.plain.pcap")], tmp_path / "plain")
    assert _by(fold.requests, 0, 1, 2, 4) == _by(plain.requests, 0, 1, 2, 4)
    assert fold.produced_records == plain.produced_records and sum(fold.produced_records.values()) > 0
    assert fold.fetched_records == plain.fetched_records
