"""Opening a capture through ``capture`` with kdissect's options; its errors become ours."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from capture import CaptureError, CaptureOptions, CaptureRun, parse_ports, read_capture
from capture.shard import Share
from capture.tls.keylog import check_readable
from dissector.connection import Options
from dissector.protocols import ProtocolChoice, parse_protocol
from dissector.records import DEFAULT_MAX_DECOMPRESSED
from dissector.topics import TopicRegistry

from kdissect.codecache import use_default_code_cache
from kdissect.errors import DamagedInput, UsageError


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    """What ``decode``, ``show``, ``live`` and the Python API share."""

    ports: frozenset[int] | None = None   # Kafka ports; None: detect Kafka on any port
    keep_secrets: bool = False            # keep SASL/credential fields instead of redacting them
    records: bool = False                 # fill the records table (one row per record)
    record_bytes: bool = False            # ... with key and value bytes
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED  # cap per records field, against decompression bombs
    tls_keylog: tuple[str, ...] = ()      # NSS key log files for TLS connections
    protocol: ProtocolChoice | None = None  # force Kafka 0.7 / 0.8+ (all, or per broker port); None: detect
    rotated: bool = True                  # files that continue one another are decoded as one capture
    schemas: str | None = None            # a folder of schemas by id: record keys and values decoded
    schema_registry: str | None = None    # a Schema Registry URL: the schemas of the ids seen, cached
    validate_json: bool = False           # check JSON Schema values against their schema (jsonschema)

    def capture_options(self, live: bool = False, share: Share | None = None,
                        messages: bool = True) -> CaptureOptions:
        """``messages``: Request and Response events besides the Exchanges that carry them."""
        return CaptureOptions(ports=self.ports,
                              dissector=Options(keep_secrets=self.keep_secrets, message_events=messages),
                              tls_keylog=self.tls_keylog, tls_keylog_live=live, protocol=self.protocol,
                              share=share)


def ports_option(spec: str | None) -> frozenset[int] | None:
    """``"9092,9093,30000-30010"`` -> ports; a bad spec is a user error."""
    if spec is None:
        return None
    try:
        return parse_ports(spec)
    except ValueError as exc:
        raise UsageError(f"--ports: {exc}") from None


def keylog_files(tls_keylog: str | os.PathLike[str] | list[str | os.PathLike[str]] | tuple) -> tuple[str, ...]:
    """One key log path or several, as the tuple of paths the options hold."""
    if isinstance(tls_keylog, (str, os.PathLike)):
        return (os.fspath(tls_keylog),)
    return tuple(os.fspath(p) for p in tls_keylog)


def check_keylogs(paths: tuple[str, ...]) -> None:
    """Fail early, in one line, on a key log that cannot be read (before any output is written)."""
    for path in paths:
        try:
            check_readable(path)
        except CaptureError as exc:
            raise UsageError(str(exc)) from None


def protocol_option(specs: list[str] | None) -> ProtocolChoice | None:
    """``--protocol`` values (``0.7``, ``0.7=9092,9093``) -> the choice; a bad spec is a user error."""
    if not specs:
        return None
    try:
        return parse_protocol(specs)
    except ValueError as exc:
        raise UsageError(f"--protocol: {exc}") from None


def open_capture_run(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], options: DecodeOptions, *,
                     share: Share | None = None, topics: TopicRegistry | None = None,
                     messages: bool = True) -> CaptureRun:
    """``path``: a file, or a rotated capture's files in order; ``share``: only that share of the
    capture's connections; ``topics``: the registry to fill; ``messages``: see
    :meth:`DecodeOptions.capture_options` (the dataset needs only exchanges)."""
    use_default_code_cache()
    check_keylogs(options.tls_keylog)   # a key log that cannot be read is bad use, not a damaged capture
    try:
        return read_capture(path, options.capture_options(share=share, messages=messages), topics=topics)
    except CaptureError as exc:   # not a capture at all, or unreadable
        raise DamagedInput(str(exc)) from None
