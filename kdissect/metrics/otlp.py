"""The fold through the OpenTelemetry SDK: an OTLP/HTTP exporter, names by the messaging conventions.

Counters and gauges are the SDK's observable instruments, read from the fold at every export
(cumulative). The request duration is a real SDK histogram (``messaging.client.operation.duration``,
the buckets of :data:`kdissect.metrics.catalog.BUCKETS`): the fold queues each latency it
observes and a thread of this module records them, so the decoding thread never waits for the
SDK. Every export sends what was decoded up to then; :meth:`OtlpExport.close` sends the last.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kdissect.errors import UsageError
from kdissect.metrics import catalog as C
from kdissect.metrics.fold import MetricsFold
from kdissect.metrics.libs import need

_SYSTEM = {"messaging.system": "kafka"}
_OPERATION_TYPE = {"Produce": "send", "Fetch": "receive", "OffsetCommit": "settle", "TxnOffsetCommit": "settle",
                   "ShareFetch": "receive", "ShareAcknowledge": "settle"}
EXPORT_TIMEOUT = 5          # seconds an export may take: a stop never waits longer for a collector
# One collection calls every instrument's callback in turn: they share one snapshot of the fold taken at
# most this long ago (seconds), rather than folding the state fifteen times.
SNAPSHOT_AGE = 0.1
MAX_QUEUED = 1 << 20        # latencies waiting for the recording thread; past it the oldest go


def endpoint(url: str) -> str:
    """``--otlp URL``: an http(s) URL; without a path, the OTLP/HTTP metrics path ``/v1/metrics``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--otlp: expected an http:// or https:// URL, got {url!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/v1/metrics")
    return urlunsplit(parts)


def attributes(metric: C.Metric, labels: Sequence[str]) -> dict[str, Any]:
    """A sample's labels as OpenTelemetry attributes (the broker as ``server.address``/``server.port``)."""
    out: dict[str, Any] = {} if metric.name.startswith("kdissect_") else dict(_SYSTEM)
    for label, attr, value in zip(metric.labels, metric.attrs, labels):
        if label == "broker":
            host, _, port = value.rpartition(":")
            out["server.address"] = host or value
            if port.isdigit():
                out["server.port"] = int(port)
        elif label == "error":
            if value != "NONE":
                out[attr] = value
        else:
            out[attr] = value
        if label == "api" and value in _OPERATION_TYPE:
            out["messaging.operation.type"] = _OPERATION_TYPE[value]
    return out


class OtlpExport:
    """Exports ``fold`` to ``url`` every ``interval`` seconds; ``readers``: more SDK readers (tests)."""

    def __init__(self, fold: MetricsFold, url: str | None, interval: float = 10.0,
                 readers: Sequence[Any] = ()) -> None:
        sdk = need("opentelemetry.sdk.metrics", "opentelemetry-sdk", "--otlp")
        export = need("opentelemetry.sdk.metrics.export", "opentelemetry-sdk", "--otlp")
        view = need("opentelemetry.sdk.metrics.view", "opentelemetry-sdk", "--otlp")
        resources = need("opentelemetry.sdk.resources", "opentelemetry-sdk", "--otlp")
        self.fold = fold
        all_readers = list(readers)
        if url is not None:
            http = need("opentelemetry.exporter.otlp.proto.http.metric_exporter",
                        "opentelemetry-exporter-otlp-proto-http", "--otlp")
            all_readers.append(export.PeriodicExportingMetricReader(
                http.OTLPMetricExporter(endpoint=endpoint(url), timeout=EXPORT_TIMEOUT),
                export_interval_millis=interval * 1000))
        self.provider = sdk.MeterProvider(
            metric_readers=all_readers,
            resource=resources.Resource.create({"service.name": "kdissect"}),
            views=[view.View(instrument_name=C.DURATION.otel,
                             aggregation=view.ExplicitBucketHistogramAggregation(C.BUCKETS))])
        meter = self.provider.get_meter("kdissect")
        self._families: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._taken: tuple[float, dict[str, list]] | None = None
        for m in C.METRICS:
            if m.kind == C.HISTOGRAM:
                continue
            make = meter.create_observable_counter if m.kind == C.COUNTER else meter.create_observable_gauge
            make(m.otel, callbacks=[self._observe(m)], unit=m.unit, description=m.help)
        self._histogram = meter.create_histogram(C.DURATION.otel, unit=C.DURATION.unit, description=C.DURATION.help)
        fold.latencies = deque(maxlen=MAX_QUEUED)
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._record_loop, name="kdissect-otlp", daemon=True)
        self._thread.start()

    def _observe(self, metric: C.Metric) -> Callable[[Any], list]:
        obs = need("opentelemetry.metrics", "opentelemetry-api", "--otlp").Observation

        def callback(_options: Any) -> list:
            fams = self._snapshot()
            return [obs(v, attributes(metric, k)) for k, v in fams.get(metric.name, ())]
        return callback

    def _snapshot(self) -> dict[str, list]:
        """One snapshot of the fold per collection, shared by the callbacks (each would take its own)."""
        with self._lock:
            now = time.monotonic()
            if self._taken is None or now - self._taken[0] > SNAPSHOT_AGE:
                self._taken = (now, {f.metric.name: f.samples for f in self.fold.families()
                                     if f.metric.kind != C.HISTOGRAM})
            return self._taken[1]

    def record(self) -> None:
        """Record the latencies the fold queued into the SDK's histogram."""
        q = self.fold.latencies
        if q is None:
            return
        record, attrs = self._histogram.record, {}
        while True:
            try:
                key, seconds = q.popleft()
            except IndexError:
                return
            a = attrs.get(key)
            if a is None:
                a = attrs[key] = attributes(C.DURATION, key)
            record(seconds, a)

    def _record_loop(self) -> None:
        while not self._stop.wait(min(1.0, self._interval / 2)):
            self.record()

    def collect(self) -> None:
        """Export now (what every reader sees)."""
        self.record()
        self._forget()
        self.provider.force_flush()

    def _forget(self) -> None:
        """The next collection takes a new snapshot (an export asked for now must see the state now)."""
        with self._lock:
            self._taken = None

    def close(self) -> None:
        """Record what is queued, export once more, stop."""
        self._stop.set()
        self._thread.join(5)
        self.record()
        self._forget()
        try:
            self.provider.force_flush(EXPORT_TIMEOUT * 1000)
        finally:
            self.provider.shutdown(EXPORT_TIMEOUT * 1000)
