"""The fold in Prometheus' text format: a ``prometheus-client`` collector, its HTTP server, a file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kdissect.errors import KdissectError, UsageError
from kdissect.metrics import catalog as C
from kdissect.metrics.fold import MetricsFold
from kdissect.metrics.libs import need


def require(option: str) -> None:
    """Fail now, in one line, when ``prometheus-client`` is not installed."""
    need("prometheus_client", "prometheus-client", option)


def parse_listen(spec: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:9464`` for IPv6) -> (host, port); no host: every interface."""
    host, sep, port = spec.rpartition(":")
    if not sep:
        host = ""
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--metrics: expected [HOST:]PORT, got {spec!r}")
    return host or "0.0.0.0", int(port)


def _families(fold: MetricsFold) -> Iterator[Any]:
    core = need("prometheus_client.core", "prometheus-client", "metrics")
    for fam in fold.families():
        m = fam.metric
        if m.kind == C.COUNTER:
            f = core.CounterMetricFamily(m.name, m.help, labels=m.labels)
            for labels, value in fam.samples:
                f.add_metric(labels, value)
        elif m.kind == C.GAUGE:
            f = core.GaugeMetricFamily(m.name, m.help, labels=m.labels)
            for labels, value in fam.samples:
                f.add_metric(labels, value)
        else:
            f = core.HistogramMetricFamily(m.name, m.help, labels=m.labels)
            for labels, h in fam.samples:
                cumulative, running = [], 0
                for bound, n in zip(C.BUCKETS, h):
                    running += n
                    cumulative.append((repr(bound), running))
                running += h[len(C.BUCKETS)]
                cumulative.append(("+Inf", running))
                f.add_metric(labels, cumulative, h[-1])
        yield f


class FoldCollector:
    """A collector (``prometheus_client``'s protocol: ``collect``) reading the fold at every scrape."""

    def __init__(self, fold: MetricsFold) -> None:
        self.fold = fold

    def collect(self) -> Iterator[Any]:
        return _families(self.fold)

    def describe(self) -> list:
        return []       # registered without a first collect: names are the catalog's, fixed


def registry(fold: MetricsFold) -> Any:
    reg = need("prometheus_client", "prometheus-client", "metrics").CollectorRegistry(auto_describe=False)
    reg.register(FoldCollector(fold))
    return reg


def text(fold: MetricsFold) -> bytes:
    """The fold in Prometheus' text exposition format."""
    return need("prometheus_client", "prometheus-client", "--metrics-out").generate_latest(registry(fold))


def write_text(fold: MetricsFold, path: str | os.PathLike[str]) -> None:
    """``path`` holds the text format afterwards (written beside it, then renamed: never half a file)."""
    data = text(fold)
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise KdissectError(f"{path}: cannot write the metrics: {exc.strerror or exc}") from None


class Server:
    """``/metrics`` over HTTP on its own thread, bound at construction (so a busy port fails at once)."""

    def __init__(self, fold: MetricsFold, host: str, port: int) -> None:
        client = need("prometheus_client", "prometheus-client", "--metrics")
        try:
            started = client.start_http_server(port, addr=host, registry=registry(fold))
        except OSError as exc:
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise KdissectError(f"--metrics {where}: cannot listen: {exc.strerror or exc}") from None
        self._server, self._thread = started if isinstance(started, tuple) else (None, None)
        sock = self._server.socket if self._server is not None else None
        self.host = host
        self.port = sock.getsockname()[1] if sock is not None else port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
