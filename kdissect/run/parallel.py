"""One capture decoded by several processes, each taking a share of its TCP connections.

:func:`decode_share` is the unit of work: it reads the whole capture, keeps the
connections whose 4-tuple hash falls in its share (:mod:`capture.shard`),
decodes them completely and writes that share's table files under hidden
temporary names. :func:`finish_capture` then makes the shares of one capture
visible together. Both are plain library functions, so a Spark task can decode
one share of a large capture and the driver can finish it; :func:`decode_parallel`
runs them in worker processes for ``kdissect decode --jobs N``.

Topic id -> name resolution. A Fetch by topic id is named from Metadata
responses that may travel on a connection of another share. The names are
resolved *after* decoding, not by a first pass over the capture: a first pass
would have to reassemble and frame every connection (most of a decode) only to
find a few Metadata responses, and it would name rows that a single process
leaves unnamed (a Fetch seen before the Metadata response that names its topic).
Instead each share records when it learnt each id (the count of packets read,
a clock every share agrees on) and which rows it wrote with an id it could not
name yet; :func:`finish_capture` gives those rows the name some other share had
learnt before that packet — what one process would have known at that point —
and rewrites only the files that have such rows. Kafka never gives one topic
id two names, so the first time a share learns an id is all that is kept.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from capture import CaptureRun
from capture.shard import Share
from dissector.skim import Skim
from dissector.topics import ZERO_UUID, TopicRegistry

from kdissect.dataset.writer import TABLES, CaptureWriter, Counts, file_stem, parquet_writer, remove_joined, remove_stale
from kdissect.run.collector import fewer_collections
from kdissect.errors import KdissectError
from kdissect.run.inputs import Capture
from kdissect.run.ranges import PacketRange, connection_loads, packet_ranges, split_kind, survey
from kdissect.run.shares import MIN_SHARE_BYTES, capture_shares, estimate_packets
from kdissect.run.source import DecodeOptions, open_capture_run

if TYPE_CHECKING:
    from multiprocessing.connection import Connection as Pipe

_TOPIC_COLUMN = {"partitions": "topic", "records": "topic", "anomalies": "detail"}


class _ClockedTopics(TopicRegistry):
    """The capture's topic registry, also noting when (in packets read) each id was first named."""

    def __init__(self) -> None:
        super().__init__()
        self.clock: Callable[[], int] = lambda: 0
        self.learned: list[tuple[int, str, str]] = []

    def learn(self, topic_id: str | None, name: str | None) -> None:
        if topic_id and name and topic_id != ZERO_UUID and self.name(topic_id) is None:
            self.learned.append((self.clock(), topic_id, name))
        super().learn(topic_id, name)


class _Unnamed:
    """Rows written with a topic id and no name: per (table, id), flat (first row, rows, clock) triples."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.rows: dict[tuple[str, str], array] = {}

    def _add(self, table: str, first: int, count: int, topic_id: str) -> None:
        now = self.clock()
        runs = self.rows.get((table, topic_id))
        if runs is None:
            runs = self.rows[(table, topic_id)] = array("q")
        elif runs[-1] == now and runs[-3] + runs[-2] == first:
            runs[-2] += count                  # the next rows of the same message: extend the run
            return
        runs.extend((first, count, now))

    def partition(self, row: int, topic_id: str) -> None:
        self._add("partitions", row, 1, topic_id)

    def records(self, first: int, count: int, topic_id: str) -> None:
        self._add("records", first, count, topic_id)

    def anomaly(self, row: int, topic_id: str) -> None:
        self._add("anomalies", row, 1, topic_id)

    def forget(self, table: str, row: int) -> None:
        for (t, topic_id), runs in self.rows.items():
            if t != table:
                continue
            while runs and runs[-3] >= row:           # whole runs from ``row`` on
                del runs[-3:]
            if runs and runs[-3] + runs[-2] > row:    # a run reaching past it
                runs[-2] = row - runs[-3]


@dataclass(slots=True)
class ShareResult:
    """What one share of a capture wrote (under temporary names) and learnt; picklable."""

    capture: str
    stem: str                                          # file names: see share_name
    share: Share
    files: list[tuple[Path, Path]]                     # (temporary, final)
    counts: Counts
    packets: int
    bytes_read: int
    learned: list[tuple[int, str, str]]                # (clock, topic id, name)
    unnamed: dict[tuple[str, str], array] = field(default_factory=dict)
    # Record payloads: schemas this share learnt from _schemas records (clock, payloads.Schema), the
    # schema ids and GUIDs it met with no schema, and what it takes to decode the share again.
    schemas: list = field(default_factory=list)
    unknown_schemas: set = field(default_factory=set)
    source: tuple[str, ...] = ()
    outdir: str = ""
    options: DecodeOptions | None = None


def share_name(stem: str, share: Share) -> str:
    """File name (without ``.parquet``) of a share's tables: the capture's own name when it is not split."""
    return stem if share.whole else f"{stem}-{share.index + 1}of{share.count}"


def decode_share(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], outdir: str | os.PathLike[str],
                 share: Share, options: DecodeOptions, *, stem: str | None = None,
                 on_progress: Callable[[CaptureRun, Counts], None] | None = None,
                 schemas: tuple = (), on_connection: Callable[[str], None] | None = None) -> ShareResult:
    """Decode the connections of ``share`` of one capture into table files under temporary names.

    ``path``: the capture file, or the files of a rotated capture in order (named by the first).
    ``outdir`` must exist with one directory per table (:func:`kdissect.dataset.writer.prepare_outdir`).
    Nothing is visible until :func:`finish_capture`; on an exception the files are removed.
    Share 0 also reports the capture-level anomalies (damaged file, IP fragments). ``schemas``: what
    other shares learnt from ``_schemas`` records, (clock, schema) pairs (see :func:`finish_capture`).
    ``share``: a :class:`~capture.shard.Share` of its connections or a :class:`~kdissect.run.ranges.PacketRange`
    of its packets; ``on_connection``: see :func:`_decode_range`.
    """
    out = Path(outdir)
    first = Path(path if isinstance(path, (str, os.PathLike)) else path[0])
    ranged = isinstance(share, PacketRange)
    topics = _ClockedTopics()
    skim = Skim(share.start) if ranged and share.start > 0 else None
    run = open_capture_run(path, options, share=None if ranged else share, topics=topics, messages=False,
                           skim=skim)
    # The packet count runs on across a rotated capture's files: still one clock for all shares.
    topics.clock = lambda: run.pipeline.stats.packets
    if skim is not None:
        skim.counter = run.pipeline.stats
    # A range share sees every connection as one process does: its topic names need no resolution.
    unnamed = _Unnamed(topics.clock) if not share.whole and not ranged else None
    capture = first.name
    rows = options.row_options(out, topics.clock, schemas)
    try:
        writer = CaptureWriter(out, capture, share_name(stem or file_stem(first), share), rows, topics,
                               capture_level=ranged or share.index == 0, unresolved=unnamed)
    except BaseException:
        run.close()
        raise
    try:
        if on_progress is not None:
            run.pipeline.on_progress = lambda _stats: on_progress(run, writer.counts)
        event = writer.event
        with fewer_collections():
            if ranged:
                _decode_range(run, writer, share, on_connection)
            else:
                for ce in run:
                    event(ce.conn, ce.event)
        if not ranged or share.stop is None:      # of range shares, the last one read every packet
            writer.counts.flows.update(run.pipeline.stats.connections)
        files = writer.close()
    except BaseException:
        writer.abort()
        run.close()
        raise
    pay = rows.payloads
    paths = (os.fspath(path),) if isinstance(path, (str, os.PathLike)) else tuple(map(os.fspath, path))
    return ShareResult(capture, stem or file_stem(first), share, files, writer.counts, run.stats.packets,
                       run.source.bytes_read, [] if ranged else topics.learned,
                       unnamed.rows if unnamed is not None else {},
                       list(pay.learned.learned) if pay is not None else [],
                       set(pay.unknown) if pay is not None else set(), paths, os.fspath(out), options)


class _RangeEnd(Exception):
    """Raised from the pipeline's progress hook: a range share read past its range without an event."""


def _decode_range(run: CaptureRun, writer: CaptureWriter, share: PacketRange,
                  on_connection: Callable[[str], None] | None = None) -> None:
    """The events of a range share's packets into ``writer``; what comes before only as far as later
    rows depend on it; reading stops at the range's end (see :mod:`kdissect.run.ranges`).
    ``on_connection``: told each connection's id as its first event in the range comes."""
    stats = run.pipeline.stats
    named: set[str] = set()
    start = share.start
    stop = share.stop if share.stop is not None else 1 << 62
    event, unowned = writer.event, writer.unowned
    progress = run.pipeline.on_progress

    def past_the_end(st: object) -> None:
        if progress is not None:
            progress(st)
        if stats.packets >= stop:
            raise _RangeEnd

    run.pipeline.on_progress = past_the_end
    try:
        for ce in run:
            now = stats.packets
            if now < start:
                unowned(ce.conn, ce.event)
            elif now < stop:
                conn = ce.conn
                if on_connection is not None and conn is not None and conn.id not in named:
                    named.add(conn.id)
                    on_connection(conn.id)
                event(conn, ce.event)
            else:
                break
    except _RangeEnd:
        pass
    finally:
        run.close()


def finish_capture(results: list[ShareResult]) -> list[Path]:
    """Make all shares of one capture visible: names resolved across shares, files renamed into place.

    Files of an earlier decode of the same capture (with any number of shares)
    are replaced. On an exception nothing of this capture is made visible.
    """
    try:
        _resolve_schemas(results)
        _resolve_topics(results)
        paths = []
        for r in results:
            for tmp, final in r.files:
                os.replace(tmp, final)
                paths.append(final)
    except BaseException:
        discard(results)
        raise
    if results:
        remove_stale(results[0].stem, paths)
    return paths


def discard(results: list[ShareResult]) -> None:
    for r in results:
        for tmp, _ in r.files:
            tmp.unlink(missing_ok=True)


# -- schemas across shares -----------------------------------------------------------------------

def _resolve_schemas(results: list[ShareResult]) -> None:
    """A share that met schema ids another share learnt from ``_schemas`` records is decoded again, knowing
    each of those schemas from the packet (clock) it was learnt at on: the rows one process would write.
    Rare (a registry's traffic and the values it explains on connections of different shares), and only
    then does a share cost two decodes."""
    if len(results) < 2 or not any(r.schemas for r in results):
        return
    for i, r in enumerate(results):
        others = [(when, s) for o in results if o is not r for when, s in o.schemas]
        # Not only the ids others learnt: knowing any schema is what makes an unknown id an anomaly.
        if not r.unknown_schemas or not others or r.options is None:
            continue
        for tmp, _final in r.files:
            tmp.unlink(missing_ok=True)
        again = decode_share(r.source, r.outdir, r.share, r.options, stem=r.stem, schemas=tuple(sorted(
            others, key=lambda e: e[0])))
        again.counts.captures = r.counts.captures
        results[i] = again


# -- topic names across shares -------------------------------------------------------------------

def _resolve_topics(results: list[ShareResult]) -> None:
    if len(results) < 2 or not any(r.unnamed for r in results):
        return
    # For each id, the first time each share learnt it: (clock, share index, name), in clock order.
    learnt: dict[str, list[tuple[int, int, str]]] = {}
    for r in results:
        for clock, topic_id, name in r.learned:
            learnt.setdefault(topic_id, []).append((clock, r.share.index, name))
    if not learnt:
        return
    for entries in learnt.values():
        entries.sort()
    for r in results:
        patches: dict[str, list[tuple[int, int, str, str]]] = {}   # table -> (first row, rows, id, name)
        for (table, topic_id), runs in r.unnamed.items():
            entries = learnt.get(topic_id)
            if not entries:
                continue
            for i in range(0, len(runs), 3):
                first, count, clock = runs[i], runs[i + 1], runs[i + 2]
                name = None
                for when, share, n in entries:
                    if when >= clock:
                        break
                    if share != r.share.index:
                        name = n
                if name is not None:
                    patches.setdefault(table, []).append((first, count, topic_id, name))
        for table, rows in patches.items():
            tmp = next(t for t, final in r.files if final.parent.name == table)
            _patch(tmp, table, sorted(rows))


def _patch(path: Path, table_name: str, rows: list[tuple[int, int, str, str]]) -> None:
    """Rewrite the topic column of the given rows, row group by row group (memory stays one row group)."""
    from kdissect.dataset.arrow import import_pyarrow
    from kdissect.dataset.columns import to_arrow

    import_pyarrow()
    import pyarrow.parquet as pq

    src = pq.ParquetFile(path)
    schema = src.schema_arrow
    column = _TOPIC_COLUMN[table_name]
    index = schema.get_field_index(column)
    out = path.with_name(path.name + ".patch")
    writer = parquet_writer(out, table_name, schema)
    try:
        start = 0
        k = 0
        for g in range(src.num_row_groups):
            table = src.read_row_group(g)
            end = start + table.num_rows
            values = None
            while k < len(rows) and rows[k][0] < end:
                first, count, topic_id, name = rows[k]
                if values is None:
                    values = table.column(index).to_pylist()
                lo, hi = max(first, start), min(first + count, end)
                for i in range(lo - start, hi - start):
                    if column == "detail":
                        values[i] = values[i].replace(f" {topic_id}[", f" {name}[", 1)
                    else:
                        values[i] = name
                if first + count > end:
                    break                          # the run goes on in the next row group
                k += 1
            if values is not None:
                table = table.set_column(index, schema.field(index), to_arrow(values, schema.field(index).type))
            writer.write_table(table)
            start = end
    except BaseException:
        writer.close()
        out.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(out, path)


# -- worker processes ----------------------------------------------------------------------------

@dataclass(slots=True)
class _Task:
    capture_index: int
    capture: Capture
    share: Share
    stem: str


def _worker(task: _Task, outdir: Path, options: DecodeOptions, pipe: Pipe) -> None:
    """Body of a worker process: one share, its result (or its error) sent back through ``pipe``."""
    last = [0.0]

    def progress(run: CaptureRun, counts: Counts) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.2:
            last[0] = now
            pipe.send(("progress", run.source.bytes_read, run.stats.packets, counts.exchanges))

    def connection(cid: str) -> None:
        # A range share says which connections it writes as it meets them: named if it dies.
        pipe.send(("connection", cid))

    try:
        result = decode_share(task.capture, outdir, task.share, options, stem=task.stem, on_progress=progress,
                              on_connection=connection)
    except KdissectError as exc:
        pipe.send(("error", str(exc)))
        os._exit(1)
    except BaseException as exc:  # noqa: BLE001 - reported by the parent as this share's failure
        pipe.send(("error", f"{type(exc).__name__}: {exc} ({traceback.format_exc(limit=-1).strip()})"))
        os._exit(1)
    pipe.send(("done", result))
    pipe.close()
    os._exit(0)


@dataclass(slots=True)
class _Running:
    task: _Task
    process: object
    pipe: Pipe
    bytes_read: int = 0
    packets: int = 0
    exchanges: int = 0
    result: ShareResult | None = None
    error: str | None = None
    connections: list[str] = field(default_factory=list)     # a range share's, as it met them


ProgressFn = Callable[[int, int, int, int, int], None]   # capture index, shares done, bytes, packets, exchanges
_NAMED = 5          # connections a dead range worker's report names


def _lost(r: _Running) -> str:
    """What a range share's dead worker took with it."""
    share = r.task.share
    held, n = r.connections[:_NAMED], len(r.connections)
    more = f" and {n - _NAMED} more" if n > _NAMED else ""
    conns = f"connection{'s' if n != 1 else ''} {', '.join(held)}{more}" if n else "no rows written yet"
    return (f"{r.task.capture[0]}: the worker decoding share {share.index + 1} of {share.count} "
            f"({share.describe()}; {conns}) {r.error}: the exchanges ending in those packets are missing, "
            "the rest of the capture is written")


def _tasks(i: int, c: Capture, n: int, split: str | None) -> list[_Task]:
    """Capture ``c``'s ``n`` shares: by connection or by packet ranges (``split``; None: as fits ``c``)."""
    stem = file_stem(c[0])
    if n > 1 and split != "connections":
        surveyed = survey(c)
        kind = split or split_kind(surveyed.loads if surveyed else connection_loads(os.fspath(c[0])), n)
        packets = (surveyed.packets if surveyed else estimate_packets(c)) if kind == "ranges" else None
        if packets:
            return [_Task(i, c, r, stem) for r in packet_ranges(packets, n)]
    return [_Task(i, c, Share(k, n), stem) for k in range(n)]


def decode_parallel(captures: list[Capture], outdir: Path, options: DecodeOptions, jobs: int,
                    *, min_share_bytes: int = MIN_SHARE_BYTES, shares: list[int] | None = None,
                    on_capture: Callable[[int, list[ShareResult], list[Path]], None] | None = None,
                    on_progress: ProgressFn | None = None, split: str | None = None) -> None:
    """Decode ``captures`` into ``outdir`` with up to ``jobs`` worker processes.

    Each capture is split into ``shares[i]`` shares, or :func:`~kdissect.run.shares.capture_shares`'s when that is
    not given, by connection or by packet ranges (``split``: ``"connections"``, ``"ranges"``, None: the split
    :func:`~kdissect.run.ranges.split_kind` chooses); a capture's files appear
    when all its shares are done (``on_capture(index, results, files)``, in input
    order). If a worker fails, the others are stopped, nothing more is made
    visible, and :class:`KdissectError` says which capture and share failed. A range share's worker
    that dies (a signal, or an exit without a word) costs its range alone: the rest is written, then
    :class:`KdissectError` names the capture, the packets and the connections lost.
    """
    # Here, not at the top: multiprocessing takes ~10 ms to import, and Spark's tasks import
    # this module without running workers.
    from multiprocessing import get_context
    from multiprocessing.connection import wait

    ctx = get_context("fork")
    # Imported once here, not in each worker: forked, they share it (~0.1 s of each worker's start).
    from kdissect.dataset.arrow import import_pyarrow
    import_pyarrow()
    tasks: list[_Task] = []
    for i, c in enumerate(captures):
        tasks += _tasks(i, c, shares[i] if shares is not None else capture_shares(c, jobs, min_share_bytes), split)
    shares_per = [sum(1 for t in tasks if t.capture_index == i) for i in range(len(captures))]
    done: dict[int, list[ShareResult]] = {}
    lost: list[str] = []
    dead = [0] * len(captures)            # range shares of each capture whose worker died
    running: list[_Running] = []
    ending: list[object] = []             # workers that sent their result, not yet reaped
    pending = list(reversed(tasks))
    next_commit = 0
    try:
        while pending or running:
            while pending and len(running) < jobs:
                task = pending.pop()
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_worker, args=(task, outdir, options, send), daemon=True)
                proc.start()
                send.close()
                running.append(_Running(task, proc, recv))
            wait([r.pipe for r in running] + [r.process.sentinel for r in running], timeout=1.0)  # type: ignore[attr-defined]
            for r in list(running):
                _drain(r)
                if r.error is None and r.result is None and not r.process.is_alive():  # type: ignore[attr-defined]
                    _drain(r)                  # what it sent just before it ended
                    if r.error is None and r.result is None:
                        r.error = _died(r.process.exitcode)  # type: ignore[attr-defined]
                        if isinstance(r.task.share, PacketRange):
                            r.process.join()  # type: ignore[attr-defined]
                            _remove_worker_files(r, outdir)
                            running.remove(r)
                            lost.append(_lost(r))
                            dead[r.task.capture_index] += 1
                            continue
                if r.error is not None:
                    raise KdissectError(f"{r.task.capture[0]}: the worker decoding share {r.task.share.index + 1} of "
                                        f"{r.task.share.count} failed: {r.error}")
                if r.result is not None:
                    # Reaped at the end, not now: a worker that sent its result still tears down its
                    # memory (~10-20 ms for a capture of 20,000 exchanges), which the files need not wait for.
                    ending.append(r.process)
                    running.remove(r)
                    done.setdefault(r.task.capture_index, []).append(r.result)
            if on_progress is not None:
                for i in {r.task.capture_index for r in running}:
                    mine = [r for r in running if r.task.capture_index == i]
                    on_progress(i, len(done.get(i, [])), max(r.bytes_read for r in mine),
                                max(r.packets for r in mine), sum(r.exchanges for r in mine))
            while (next_commit < len(captures)
                   and len(done.get(next_commit, [])) + dead[next_commit] == shares_per[next_commit]):
                results = sorted(done.pop(next_commit, []), key=lambda r: r.share.index)
                files = finish_capture(results)
                remove_joined(captures[next_commit][1:], files)
                if on_capture is not None:
                    on_capture(next_commit, results, files)
                next_commit += 1
    except BaseException:
        for r in running:
            r.process.kill()  # type: ignore[attr-defined]
        for r in running:
            r.process.join()  # type: ignore[attr-defined]
            _drain(r)
            if r.result is not None:
                discard([r.result])
            _remove_worker_files(r, outdir)
        for results in done.values():
            discard(results)
        raise
    finally:
        for proc in ending:
            proc.join()  # type: ignore[attr-defined]
    if lost:
        raise KdissectError("\n".join(lost))


def _drain(r: _Running) -> None:
    try:
        while r.pipe.poll():
            msg = r.pipe.recv()
            if msg[0] == "progress":
                _, r.bytes_read, r.packets, r.exchanges = msg
            elif msg[0] == "connection":
                r.connections.append(msg[1])
            elif msg[0] == "done":
                r.result = msg[1]
            else:
                r.error = msg[1]
    except (EOFError, OSError):
        pass


def _remove_worker_files(r: _Running, outdir: Path) -> None:
    """A killed worker's temporary files (their names carry its pid)."""
    pid = r.process.pid  # type: ignore[attr-defined]
    name = share_name(r.task.stem, r.task.share)
    for table in TABLES:
        (outdir / table / f".{name}.parquet.tmp{pid}").unlink(missing_ok=True)


def _died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode} without a result"
