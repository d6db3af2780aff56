"""What ``kdissect live --metrics/--otlp`` starts before the capture and stops after the last rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from kdissect.errors import UsageError
from kdissect.metrics.fold import DEFAULT_MAX_SERIES, MetricsFold


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    listen: str | None = None          # --metrics [HOST:]PORT
    otlp: str | None = None            # --otlp URL
    otlp_interval: float = 10.0        # seconds between OTLP exports
    max_series: int = DEFAULT_MAX_SERIES

    @property
    def wanted(self) -> bool:
        return self.listen is not None or self.otlp is not None

    def validate(self) -> None:
        if self.max_series < 1:
            raise UsageError("--metrics-max-series must be at least 1")
        if not self.otlp_interval > 0 or self.otlp_interval == float("inf"):
            raise UsageError("--otlp-interval must be a finite number of seconds greater than 0")
        if self.listen is not None:
            from kdissect.metrics.prometheus import parse_listen
            parse_listen(self.listen)
        if self.otlp is not None:
            from kdissect.metrics.otlp import endpoint
            endpoint(self.otlp)


class MetricsRun:
    """The fold and its exporters; the HTTP port is bound (or the error raised) at construction."""

    def __init__(self, options: MetricsOptions) -> None:
        options.validate()
        self.fold = MetricsFold(options.max_series)
        self.server = self.otlp = None
        if options.listen is not None:
            from kdissect.metrics.prometheus import Server, parse_listen
            self.server = Server(self.fold, *parse_listen(options.listen))
        if options.otlp is not None:
            try:
                from kdissect.metrics.otlp import OtlpExport
                self.otlp = OtlpExport(self.fold, options.otlp, options.otlp_interval)
            except BaseException:
                self.close()
                raise

    def describe(self, out: TextIO) -> None:
        if self.server is not None:
            out.write(f"serving metrics at {self.server.url}\n")
        if self.otlp is not None:
            out.write("exporting metrics over OTLP\n")

    def close(self) -> None:
        """Send the last OTLP export and stop serving."""
        try:
            if self.otlp is not None:
                self.otlp.close()
                self.otlp = None
        finally:
            if self.server is not None:
                self.server.close()
                self.server = None
