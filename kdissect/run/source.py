"""Opening a capture through ``capture`` with kdissect's options; its errors become ours."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from capture import CaptureError, CaptureOptions, CaptureRun, parse_ports, read_capture
from capture.shard import Share
from capture.tls.keylog import check_readable
from dissector.connection import Options
from dissector.protocols import AUTO, PROTOCOLS, ProtocolChoice
from dissector.events import KAFKA_PROTOCOL
from dissector.records import DEFAULT_MAX_DECOMPRESSED
from dissector.topics import TopicRegistry

from kdissect.dataset.rows import RowOptions
from kdissect.run.codecache import use_default_code_cache
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
                        messages: bool = True, skim: Any = None) -> CaptureOptions:
        """``messages``: Request and Response events besides the Exchanges that carry them; ``skim``: a
        :class:`dissector.skim.Skim` (a worker's packet range, see :mod:`kdissect.run.ranges`)."""
        return CaptureOptions(ports=self.ports,
                              dissector=Options(keep_secrets=self.keep_secrets, message_events=messages, skim=skim),
                              tls_keylog=self.tls_keylog, tls_keylog_live=live, protocol=self.protocol,
                              share=share)

    @classmethod
    def from_mapping(cls, given: Mapping[str, Any]) -> DecodeOptions:
        """The options named in ``given`` as a user gives them, whoever read them (the command line, the Spark
        reader, the Python API): the one place each becomes a field and one implies another.

        Names (absent or None: the default): ``ports`` (a spec such as ``"9092,9093"``, or ports),
        ``keep_secrets``, ``records``, ``record_bytes``, ``max_decompressed`` (MiB), ``tls_keylog`` (a path or
        paths), ``protocol`` (``--protocol`` values), ``rotated``, ``schemas`` (a folder), ``schema_registry``
        (a URL), ``validate_json``. Another name is a caller's mistake (TypeError)."""
        unknown = set(given) - set(OPTION_NAMES)
        if unknown:
            raise TypeError(f"not decode options: {', '.join(sorted(unknown))}")
        ports = given.get("ports")
        schemas = given.get("schemas")
        schemas = os.fspath(schemas) if schemas else None
        schema_registry = given.get("schema_registry") or None
        validate_json = bool(given.get("validate_json"))
        record_bytes = bool(given.get("record_bytes"))
        # Record bytes and decoded keys and values are columns of the records table, so each asks for it.
        records = bool(given.get("records")) or record_bytes or bool(schemas or schema_registry or validate_json)
        max_mib = given.get("max_decompressed")
        rotated = given.get("rotated")
        return cls(ports=ports_option(ports) if isinstance(ports, str) or ports is None else frozenset(ports),
                   keep_secrets=bool(given.get("keep_secrets")), records=records, record_bytes=record_bytes,
                   max_decompressed=DEFAULT_MAX_DECOMPRESSED if max_mib is None else int(max_mib) << 20,
                   tls_keylog=keylog_files(given.get("tls_keylog") or ()),
                   protocol=protocol_option(given.get("protocol")), rotated=True if rotated is None else bool(rotated),
                   schemas=schemas, schema_registry=schema_registry, validate_json=validate_json)

    @classmethod
    def from_args(cls, args: Any) -> DecodeOptions:
        """The options a command's parsed arguments ask for, whichever of them that command has
        (``--separate-files`` is ``rotated`` turned off)."""
        given = {name: getattr(args, name) for name in OPTION_NAMES if hasattr(args, name)}
        return cls.from_mapping({**given, "rotated": not getattr(args, "separate_files", False)})

    def row_options(self, outdir: str | os.PathLike[str] | None = None, clock: Callable[[], int] | None = None,
                    preload: tuple = ()) -> RowOptions:
        """What the dataset's rows are built with. ``outdir``: where schemas learned or fetched go
        (``OUTDIR/schemas/``); ``clock``: packets read, dating what the capture's ``_schemas`` records teach
        (see :mod:`kdissect.run.parallel`); ``preload``: what other shares learnt, (clock, schema) pairs."""
        pay = None
        if self.records:
            from kdissect.dataset.payload_columns import payload_decoder   # here: loads the payloads package
            pay = payload_decoder(self.schemas, self.schema_registry, self.validate_json, outdir, clock, preload)
        return RowOptions(records=self.records, record_bytes=self.record_bytes,
                          max_decompressed=self.max_decompressed, payloads=pay)


# What DecodeOptions.from_mapping reads: the options by their fields' names, which users give them too.
OPTION_NAMES = tuple(f.name for f in fields(DecodeOptions))


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


def protocol_option(specs: list[str] | str | None) -> ProtocolChoice | None:
    """``--protocol`` values (``0.7``, ``0.7=9092,9093``, ``0.8+=9094``) -> the choice; a bad spec is a user
    error. Each value names a protocol for every connection, or for the broker ports after ``=``."""
    if not specs:
        return None
    if isinstance(specs, str):
        specs = [specs]
    default = AUTO
    ports: dict[int, str] = {}
    for spec in specs:
        proto, sep, plist = spec.strip().partition("=")
        proto = KAFKA_PROTOCOL if proto.strip() == "0.8" else proto.strip()
        if proto not in PROTOCOLS:
            raise UsageError(f"--protocol: unknown protocol {proto!r} in {spec!r} (one of {', '.join(PROTOCOLS)})")
        if not sep:
            default = proto
            continue
        try:
            for port in parse_ports(plist):
                ports[port] = proto
        except ValueError as exc:
            raise UsageError(f"--protocol: {str(exc).replace(f' in {plist!r}', f' in {spec!r}')}") from None
    return ProtocolChoice(default, tuple(sorted(ports.items())))


def open_capture_run(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], options: DecodeOptions, *,
                     share: Share | None = None, topics: TopicRegistry | None = None,
                     messages: bool = True, skim: Any = None) -> CaptureRun:
    """``path``: a file, or a rotated capture's files in order; ``share``: only that share of the
    capture's connections; ``topics``: the registry to fill; ``messages``: see
    :meth:`DecodeOptions.capture_options` (the dataset needs only exchanges)."""
    use_default_code_cache()
    check_keylogs(options.tls_keylog)   # a key log that cannot be read is bad use, not a damaged capture
    try:
        return read_capture(path, options.capture_options(share=share, messages=messages, skim=skim), topics=topics)
    except CaptureError as exc:   # not a capture at all, or unreadable
        raise DamagedInput(str(exc)) from None
