"""``--otlp``: the fold through the OpenTelemetry SDK, named by the messaging conventions.

No OpenTelemetry Collector ships in Debian or on PyPI: each export is checked twice, in the SDK's own
``InMemoryMetricReader`` and as the real OTLP/HTTP protobuf request the SDK's exporter sends to a small
receiver in the test (``otlp_receiver.py``, decoded with ``opentelemetry-proto``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kdissect.errors import UsageError
from kdissect.metrics.otlp import OtlpExport, endpoint

from tests.kdissect.metrics.helpers import PCAPS, live_fold, total
from tests.kdissect.metrics.otlp_receiver import otlp_receiver

pytest.importorskip("opentelemetry.sdk.metrics")


def test_endpoint() -> None:
    assert endpoint("http://c:4318") == "http://c:4318/v1/metrics"
    assert endpoint("https://c/otlp/v1/metrics") == "https://c/otlp/v1/metrics"
    for bad in ("c:4318", "ftp://c/x", "http://"):
        with pytest.raises(UsageError):
            endpoint(bad)


def test_export_over_http_and_in_memory_carry_the_folds_figures(tmp_path: Path) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    fold, _ = live_fold(PCAPS, tmp_path / "out")
    memory = InMemoryMetricReader()
    with otlp_receiver() as rec:
        exp = OtlpExport(fold, rec.url, interval=60, readers=[memory])
        try:
            # The histogram is fed from the latencies observed while the exporter runs: replay the fold's.
            for key, h in fold.durations.items():
                for _ in range(sum(h[:-1])):
                    fold.latencies.append((key, h[-1] / sum(h[:-1])))
            exp.collect()
        finally:
            exp.close()
        assert rec.paths and set(rec.paths) == {"/v1/metrics"}
        got = rec.points()
        assert rec.resource()["service.name"] == "kdissect"
    sent = got["messaging.client.sent.messages"]
    assert all(a["messaging.system"] == "kafka" and "messaging.destination.name" in a for a, _ in sent)
    for topic in {a["messaging.destination.name"] for a, _ in sent}:
        assert sum(p.as_int for a, p in sent if a["messaging.destination.name"] == topic) == \
            total(fold, "kafka_produced_records", topic=topic)
    consumed = got["messaging.client.consumed.messages"]
    assert sum(p.as_int for _, p in consumed) == total(fold, "kafka_fetched_records") > 0
    durations = got["messaging.client.operation.duration"]
    assert sum(p.count for _, p in durations) == sum(sum(h[:-1]) for h in fold.durations.values())
    produce = [a for a, _ in durations if a["messaging.operation.name"] == "Produce"]
    assert produce and all(a["messaging.operation.type"] == "send" and "server.address" in a
                           and isinstance(a["server.port"], int) for a in produce)
    assert list(durations[0][1].explicit_bounds)[:2] == [0.0001, 0.00025]
    lag = got["kafka.consumer.lag"]
    assert {(a["messaging.consumer.group.name"], a["messaging.destination.name"],
             a["messaging.destination.partition.id"]) for a, _ in lag} == \
        {tuple(map(str, k)) for k in fold.lag()}
    acked = got["kafka.share_group.acknowledged.messages"]
    assert {(a["messaging.consumer.group.name"], a["messaging.destination.name"], a["messaging.client.id"],
             a["kafka.share_group.acknowledge.type"]): p.as_int for a, p in acked} == fold.shares.acknowledged
    acquired = got["kafka.share_group.acquired.messages"]
    assert sum(p.as_int for _, p in acquired) == total(fold, "kafka_share_acquired_records") > 0
    assert {a.get("messaging.operation.type") for a, _ in got["kafka.client.requests"]
            if a["messaging.operation.name"] in ("ShareFetch", "ShareAcknowledge")} == {"receive", "settle"}
    errors = [a for a, _ in got["kafka.client.requests"] if "error.type" in a]
    assert errors and all(a["error.type"] != "NONE" for a in errors)
    # The SDK's own reader saw the same instruments.
    data = memory.get_metrics_data()
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert names >= set(got) - {"kdissect.metrics.folded"}
