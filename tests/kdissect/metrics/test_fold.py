"""The metric fold on the real sample captures: the same figures live-style and from Parquet, the
dataset's own counts, and bounded cardinality."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from kdissect.metrics import catalog as C
from kdissect.metrics.fold import MetricsFold

from tests.kdissect.metrics.helpers import PCAPS, live_fold, parquet_fold, samples, total


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
                                          "kafka_group_rebalances", "kafka_group_members", "kdissect_anomalies"}


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
