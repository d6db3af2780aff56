"""``kdissect decode``: capture files -> the Parquet dataset."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from capture import CaptureRun

from kdissect.dataset.writer import TABLES, CaptureWriter, Counts, file_stem, prepare_outdir, remove_joined
from kdissect.run.collector import fewer_collections
from kdissect.run.inputs import Capture, captures, describe
from kdissect.run.shares import MIN_SHARE_BYTES, capture_shares, capture_size
from kdissect.run.source import DecodeOptions, open_capture_run

@dataclass
class Progress:
    """Where a decode is, for a progress display."""

    capture: str
    index: int                 # 1-based position of this capture among the inputs
    total: int
    bytes_read: int
    size: int | None
    packets: int
    exchanges: int             # over all captures so far
    elapsed: float


ProgressFn = Callable[[Progress], None]


@dataclass
class DecodeResult:
    """What a decode wrote: the end-of-run summary comes from this."""

    outdir: Path
    counts: Counts = field(default_factory=Counts)
    files: list[Path] = field(default_factory=list)
    rotated: list[tuple[Path, ...]] = field(default_factory=list)   # captures of several files, read as one
    packets: int = 0
    bytes_read: int = 0
    elapsed: float = 0.0


def run_into(run: CaptureRun, writer: CaptureWriter, on_progress: Callable[[], None] | None = None) -> None:
    """Route every event of a capture run into ``writer``."""
    if on_progress is not None:
        run.pipeline.on_progress = lambda _stats: on_progress()
    _route(run, writer)


def _route(run: CaptureRun, writer: CaptureWriter) -> None:
    # Apart from run_into: compiled, decode.pxd types this loop's event, and Cython cannot make a
    # function with a closure (run_into's lambda) a cpdef one.
    for ce in run:
        writer.event(ce.conn, ce.event)


def write_dataset(inputs: list[str | os.PathLike[str]] | str | os.PathLike[str], outdir: str | os.PathLike[str],
                  *, ports: str | frozenset[int] | None = None, records: bool = False, record_bytes: bool = False,
                  keep_secrets: bool = False, progress: ProgressFn | None = None,
                  tls_keylog: str | os.PathLike[str] | list[str | os.PathLike[str]] = (),
                  jobs: int = 1, schemas: str | os.PathLike[str] | None = None,
                  schema_registry: str | None = None, validate_json: bool = False) -> DecodeResult:
    """Decode capture files (or directories of them) into the dataset under ``outdir``.

    ``ports``: Kafka ports (``"9092,9093"``), default: detect Kafka on any port.
    ``records``: also write the records table; ``record_bytes``: with key/value bytes
    (implies ``records``); ``tls_keylog``: NSS key log file(s) for TLS connections;
    ``jobs``: worker processes (see :func:`decode_files`); ``schemas``: a folder of schemas by id,
    ``schema_registry``: a registry URL, ``validate_json``: check JSON Schema values (each implies
    ``records``: record keys and values decoded, see the README's "Record payloads"). Each capture's files replace
    those of an earlier decode of the same file. Raises :class:`KdissectError` for a missing or unreadable
    input or an unwritable ``outdir``, before anything is written.
    """
    options = DecodeOptions.from_mapping({
        "ports": ports, "keep_secrets": keep_secrets, "records": records, "record_bytes": record_bytes,
        "tls_keylog": tls_keylog, "schemas": schemas, "schema_registry": schema_registry,
        "validate_json": validate_json})
    return decode_files(inputs, outdir, options, progress, jobs=jobs)


def decode_files(inputs: list[str | os.PathLike[str]] | str | os.PathLike[str], outdir: str | os.PathLike[str],
                 options: DecodeOptions, progress: ProgressFn | None = None, *, jobs: int = 1,
                 min_share_bytes: int | None = None, split: str | None = None) -> DecodeResult:
    """Decode captures into the dataset. ``jobs`` > 1: that many worker processes, each decoding a share
    of a capture's connections (:mod:`kdissect.run.parallel`); the rows are the same as with one process.
    ``min_share_bytes``: capture bytes per worker below which a capture whose packets cannot be estimated is
    not split (0: always split; see :func:`~kdissect.run.shares.capture_shares`);
    ``split``: ``"connections"`` or ``"ranges"`` (packet ranges, :mod:`kdissect.run.ranges`), None: chosen per
    capture."""
    sets = captures([inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs), options.rotated)
    for c in sets:  # fail on a bad input before writing anything
        open_capture_run(c, options).close()
    if options.records:
        from kdissect.dataset.payload_columns import check_options
        check_options(options)
    out = prepare_outdir(outdir, TABLES if options.records else TABLES[:3])
    result = DecodeResult(out, rotated=[c for c in sets if len(c) > 1])
    start = time.monotonic()
    # Worked out once: how many shares each capture is split into (1 everywhere: decoded in this process).
    shares = [capture_shares(c, jobs, MIN_SHARE_BYTES if min_share_bytes is None else min_share_bytes)
              for c in (sets if len(sets) > 1 else sets[:1])] if jobs > 1 else [1]
    if jobs > 1 and (len(sets) > 1 or shares[0] > 1):
        _decode_parallel(sets, out, options, progress, jobs, shares, result, start, split)
        result.elapsed = time.monotonic() - start
        return result
    for i, capture in enumerate(sets, 1):
        run = open_capture_run(capture, options, messages=False)
        try:
            writer = CaptureWriter(out, capture[0].name, file_stem(capture[0]),
                                   options.row_options(out, lambda run=run: run.pipeline.stats.packets),
                                   run.pipeline.topics)
        except BaseException:
            run.close()
            raise
        tick = None
        if progress is not None:
            def tick(capture: Capture = capture, i: int = i, run: CaptureRun = run,
                     writer: CaptureWriter = writer) -> None:
                progress(Progress(describe(capture), i, len(sets), run.source.bytes_read, run.stats.size,
                                  run.stats.packets, result.counts.exchanges + writer.counts.exchanges,
                                  time.monotonic() - start))
        try:
            with fewer_collections():
                run_into(run, writer, tick)
            writer.counts.flows.update(run.stats.connections)
            files = writer.commit()
            remove_joined(capture[1:], files)
            result.files += files
        except BaseException:
            writer.abort()
            run.close()
            raise
        result.counts.add(writer.counts, capture=capture[0].name)
        result.packets += run.stats.packets
        result.bytes_read += run.source.bytes_read
        if tick is not None:
            tick()
    result.elapsed = time.monotonic() - start
    return result


def _decode_parallel(sets: list[Capture], out: Path, options: DecodeOptions, progress: ProgressFn | None, jobs: int,
                     shares: list[int], result: DecodeResult, start: float, split: str | None = None) -> None:
    from kdissect.run.parallel import ShareResult, decode_parallel

    def on_capture(i: int, results: list[ShareResult], files: list[Path]) -> None:
        counts = Counts(captures=1)
        for r in results:
            r.counts.captures = 0
            counts.add(r.counts)
        result.counts.add(counts, capture=sets[i][0].name)
        result.files += files
        # Every share by connection reads the whole file; of range shares, the last.
        result.packets += max((r.packets for r in results), default=0)
        result.bytes_read += max((r.bytes_read for r in results), default=0)
        if progress is not None:
            progress(Progress(describe(sets[i]), i + 1, len(sets), max((r.bytes_read for r in results), default=0),
                              capture_size(sets[i]), max((r.packets for r in results), default=0),
                              result.counts.exchanges,
                              time.monotonic() - start))

    def on_progress(i: int, _done: int, bytes_read: int, packets: int, exchanges: int) -> None:
        progress(Progress(describe(sets[i]), i + 1, len(sets), bytes_read,  # type: ignore[misc]
                          capture_size(sets[i]), packets,
                          result.counts.exchanges + exchanges, time.monotonic() - start))

    decode_parallel(sets, out, options, jobs, shares=shares, on_capture=on_capture,
                    on_progress=on_progress if progress is not None else None, split=split)
