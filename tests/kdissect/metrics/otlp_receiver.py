"""A small OTLP/HTTP metrics receiver for the tests: protobuf requests decoded with opentelemetry-proto.

No OpenTelemetry Collector ships in Debian or on PyPI, so the tests receive the SDK exporter's real
HTTP requests here. Not a test module.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Any] = []       # ExportMetricsServiceRequest messages, in arrival order
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self.url = ""

    def latest(self) -> Any:
        """The request collected last (exports can overlap: the last to arrive may be an older one)."""
        with self.lock:
            requests = list(self.requests)
        return max(requests, key=_collected) if requests else None

    def points(self) -> dict[str, list[tuple[dict, Any]]]:
        """The latest request's data points by metric name: (attributes, point)."""
        last = self.latest()
        if last is None:
            return {}
        out: dict[str, list[tuple[dict, Any]]] = {}
        for rm in last.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    for p in getattr(m, kind).data_points:
                        attrs = {a.key: _value(a.value) for a in p.attributes}
                        out.setdefault(m.name, []).append((attrs, p))
        return out

    def resource(self) -> dict[str, Any]:
        rm = self.latest().resource_metrics[0]
        return {a.key: _value(a.value) for a in rm.resource.attributes}


def _collected(request: Any) -> int:
    return max((p.time_unix_nano for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                for p in getattr(m, m.WhichOneof("data")).data_points), default=0)


def _value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("value"))


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as svc

    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            msg = svc.ExportMetricsServiceRequest()
            msg.ParseFromString(body)
            with rec.lock:
                rec.requests.append(msg)
                rec.paths.append(self.path)
            reply = svc.ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
