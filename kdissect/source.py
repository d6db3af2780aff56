"""Opening a capture through ``capture`` with kdissect's options; its errors become ours."""

from __future__ import annotations

import os
from dataclasses import dataclass

from capture import CaptureError, CaptureOptions, CaptureRun, parse_ports, read_capture
from dissector.connection import Options
from dissector.records import DEFAULT_MAX_DECOMPRESSED

from kdissect.errors import KdissectError


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    """What ``decode``, ``show``, ``live`` and the Python API share."""

    ports: frozenset[int] | None = None   # Kafka ports; None: detect Kafka on any port
    keep_secrets: bool = False            # keep SASL/credential fields instead of redacting them
    records: bool = False                 # fill the records table (one row per record)
    record_bytes: bool = False            # ... with key and value bytes
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED  # cap per records field, against decompression bombs

    def capture_options(self) -> CaptureOptions:
        return CaptureOptions(ports=self.ports, dissector=Options(keep_secrets=self.keep_secrets))


def ports_option(spec: str | None) -> frozenset[int] | None:
    """``"9092,9093,30000-30010"`` -> ports; a bad spec is a user error."""
    if spec is None:
        return None
    try:
        return parse_ports(spec)
    except ValueError as exc:
        raise KdissectError(f"--ports: {exc}") from None


def open_capture_run(path: str | os.PathLike[str], options: DecodeOptions) -> CaptureRun:
    try:
        return read_capture(path, options.capture_options())
    except CaptureError as exc:
        raise KdissectError(str(exc)) from None
