"""Writing the Parquet dataset: one file per table per capture (or per live rotation).

Layout: ``OUTDIR/<table>/<name>.parquet``. A file is written under a hidden
temporary name (readers skip names starting with ``.``) and renamed into place
when the capture is done, so a reader never sees half a file and re-decoding a
capture replaces its files instead of adding rows.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capture.flows import ConnectionEnd
from dissector.events import Anomaly, Exchange
from dissector.topics import TopicRegistry

from hotpath.speedups import reserve_list
from kdissect.dataset.columns import TEXT_COLUMNS as _TEXT, TextColumn, new_buffers, take
from kdissect.errors import KdissectError
from kdissect.dataset.rows import ConnectionLike, RowBuilder, RowOptions, Tally, Unresolved
from kdissect.dataset.tables import COLUMNS

try:        # CPython's own SHA-1: hashlib would load OpenSSL, ~2 ms of a decode's start-up, for one name
    from _sha1 import sha1 as _sha1
except ImportError:
    from hashlib import sha1 as _sha1

if TYPE_CHECKING:
    import pyarrow as pa

TABLES = ("exchanges", "partitions", "anomalies", "records")
BATCH_ROWS = 20_000            # rows buffered per table before a row group is written
BATCH_BYTES = 16 << 20         # ... or this many bytes of JSON bodies (exchanges): peak RSS 357 -> 292 MB
                               # on a 200 MB capture of large Fetch responses (32 -> 16 MB)
_PAGE_BYTES = 4 << 20          # a Parquet data page, before compression (parquet_writer)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_ANOMALY_KIND = COLUMNS["anomalies"].index("kind")


def file_stem(path: str | os.PathLike[str]) -> str:
    """``<capture file name>-<hash of its absolute path>``: stable across runs, distinct per file."""
    p = Path(path).resolve()
    digest = _sha1(str(p).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{_UNSAFE.sub('_', p.name)}-{digest}"


def prepare_outdir(outdir: str | os.PathLike[str], tables: tuple[str, ...] = TABLES) -> Path:
    out = Path(outdir)
    if out.exists() and not out.is_dir():
        raise KdissectError(f"{out}: exists and is not a directory")
    try:
        for t in tables:
            (out / t).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KdissectError(f"{out}: cannot create the output directory: {exc.strerror or exc}") from None
    if not os.access(out / tables[0], os.W_OK | os.X_OK):
        raise KdissectError(f"{out}: output directory is not writable")
    return out


def remove_stale(name: str, keep: list[Path]) -> None:
    """Files of an earlier decode of the same capture that ``keep`` does not replace.

    A capture's files are ``<name>.parquet``, or ``<name>-<k>of<n>.parquet`` when it
    was decoded in ``n`` shares (``kdissect decode --jobs``), in each table directory.
    """
    if not keep:
        return
    kept = set(keep)
    outdir = keep[0].parent.parent
    for table in TABLES:
        d = outdir / table
        if not d.is_dir():
            continue
        for old in [d / f"{name}.parquet", *d.glob(f"{name}-*of*.parquet")]:
            if old not in kept and _is_share_file(old.name, name):
                old.unlink(missing_ok=True)


def remove_joined(later: Sequence[Path], keep: list[Path]) -> None:
    """Files an earlier file-by-file decode (``--separate-files``) wrote for ``later``, the files of a
    rotated capture after its first, whose rows the capture's own files ``keep`` now hold."""
    for path in later:
        remove_stale(file_stem(path), keep)


def _is_share_file(file_name: str, name: str) -> bool:
    if file_name == f"{name}.parquet":
        return True
    k, sep, n = file_name[len(name) + 1:-len(".parquet")].partition("of")
    return bool(sep) and k.isdigit() and n.isdigit()


class TableWriter:
    """One table's column buffers, written to one Parquet file a row group at a time.

    ``cols`` holds one buffer per column (:func:`kdissect.dataset.columns.new_buffers`); row builders append to
    them directly and
    the writer turns them into Arrow arrays when ``batch_rows`` rows (or
    ``batch_bytes`` of weighed cells) are waiting. pyarrow is imported, and the
    file opened, at the first flush, so a decode reaches its first packet without it.
    """

    def __init__(self, path: Path, table: str, batch_rows: int = BATCH_ROWS,
                 batch_bytes: int = BATCH_BYTES) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        self.table = table
        self.rows = 0                          # written so far
        self.cols = new_buffers(table)
        for col in self.cols:
            if isinstance(col, TextColumn):
                reserve_list(col.ends, batch_rows)
            elif type(col) is list:
                reserve_list(col, batch_rows)
        self.weight = 0                        # weighed bytes waiting (JSON bodies, record bytes)
        self.out_of_range: dict[str, int] = {}   # column -> cells its type could not hold (see take_table)
        self._batch_rows = batch_rows
        self._batch_bytes = batch_bytes
        self._writer = None

    @property
    def pending(self) -> int:
        return len(self.cols[0])

    def full(self) -> bool:
        return len(self.cols[0]) >= self._batch_rows or self.weight >= self._batch_bytes

    def flush(self, final: bool = False) -> None:
        """Write what waits as row groups of at most ``batch_rows`` rows.

        Unless ``final`` or over the byte budget, a remainder short of a whole row
        group keeps waiting, so row groups come out ``batch_rows`` long.
        """
        n = len(self.cols[0])
        if not n and self._writer is not None:
            return
        take_n = n
        if not final and self.weight < self._batch_bytes:
            take_n = n - n % self._batch_rows
            if not take_n:
                return
        table = self.take_table(take_n)
        writer = self._open(table.schema)
        try:
            for start in range(0, take_n, self._batch_rows):
                writer.write_table(table.slice(start, self._batch_rows))
        except OSError as exc:
            raise KdissectError(f"{self.path.parent}: write failed: {exc.strerror or exc}") from None
        self.rows += take_n
        self.weight = 0

    def take_table(self, n: int) -> pa.Table:
        """The first ``n`` waiting rows as an Arrow table with the table's schema, taken from the buffers."""
        from kdissect.dataset.arrow import import_pyarrow
        from kdissect.dataset.columns import to_arrow
        import_pyarrow()
        import pyarrow as pa
        schema = _schema(self.table)
        # In place: row builders hold these buffers' append methods.
        arrays = []
        for col, f in zip(self.cols, schema):
            values = take(col, n)
            try:
                arrays.append(to_arrow(values, f.type))
            except pa.ArrowInvalid:
                if not isinstance(values, list):      # typed cells (hotpath.cells)
                    values = values.tolist()
                # A value the column's type cannot hold, which row building should have caught: the
                # cell is nulled (clamped in a column that takes no null), counted, and reported as an
                # ``out_of_range`` anomaly when the capture's files close, rather than the files lost.
                values, changed = fit_integers(values, f.type, f.nullable)
                self.out_of_range[f.name] = self.out_of_range.get(f.name, 0) + changed
                arrays.append(to_arrow(values, f.type))
        return pa.Table.from_arrays(arrays, schema=schema)

    def _open(self, schema: pa.Schema):  # type: ignore[no-untyped-def]
        if self._writer is None:
            try:
                self._writer = parquet_writer(self.tmp, self.table, schema)
            except OSError as exc:
                raise KdissectError(f"{self.path.parent}: cannot write: {exc.strerror or exc}") from None
        return self._writer

    def close(self) -> None:
        """Write everything (a typed empty file if there are no rows); the file stays under ``tmp``."""
        self.flush(final=True)
        try:
            self._writer.close()            # the footer: a full disk can refuse it too
        except OSError as exc:
            raise KdissectError(f"{self.path.parent}: write failed: {exc.strerror or exc}") from None

    def commit(self) -> None:
        self.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        except Exception:  # noqa: BLE001 - already failing; the temp file goes either way
            pass
        self.tmp.unlink(missing_ok=True)


def fit_integers(values: list[Any], type_: pa.DataType, nullable: bool) -> tuple[list[Any], int]:
    """An integer column's cells with those ``type_`` cannot hold nulled (or, where the column takes no
    null, clamped to the type's range), and how many changed."""
    import pyarrow as pa
    if not pa.types.is_integer(type_):
        raise pa.ArrowInvalid(f"values do not fit {type_}")
    lo, hi = -(1 << (type_.bit_width - 1)), (1 << (type_.bit_width - 1)) - 1
    out = []
    changed = 0
    for v in values:
        if isinstance(v, int) and not lo <= v <= hi:
            changed += 1
            v = None if nullable else min(max(v, lo), hi)
        out.append(v)
    return out, changed


def parquet_writer(path: Path, table: str, schema: pa.Schema):  # type: ignore[no-untyped-def]
    """A Parquet writer for one of the dataset's tables, as every file of the dataset is written.

    No dictionary encoding but for the flags: zstd over the plain values makes files as small or
    smaller (ports, versions and error codes repeat, and zstd finds the repeats; correlation ids,
    timestamps and offsets do not, and a dictionary as large as the column only cost time), and
    writing costs a fifth less: 17.7k → 14.0k instructions per exchange on the small-Produce
    capture, its files 6.7 → 5.4 MB, the samples' 427 → 416 KB. The flags keep theirs (0.2k
    cheaper there). The JSON bodies get no statistics: a body's min/max is of no use to a reader's
    filters.

    Data pages of 4 MB, not Parquet's 1 MB: only the JSON bodies fill more than one, and each
    page is compressed and framed on its own; 0.7k of the ~19k instructions per exchange that
    writing cost on the small-Produce capture. Values are encoded a row group's worth at a time,
    not 1,024: another 1.2k. A page of bodies can then reach the row group's bodies (BATCH_BYTES).
    """
    from kdissect.dataset.arrow import import_pyarrow
    import_pyarrow()
    import pyarrow as pa
    plain = [name for name in schema.names if (table, name) not in _TEXT]
    repeating = [f.name for f in schema if pa.types.is_boolean(f.type)]
    options = {"compression": "zstd", "use_dictionary": repeating, "write_statistics": plain,
               "data_page_size": _PAGE_BYTES, "write_batch_size": BATCH_ROWS}
    try:
        return LocalParquetFile(path, schema, options)
    except (ImportError, TypeError):     # a pyarrow whose inner writer moved or takes other options
        import pyarrow.parquet as pq
        return pq.ParquetWriter(path, schema, **options)


class LocalParquetFile:
    """The writer inside ``pyarrow.parquet.ParquetWriter``, on a local file, given the options
    that class passes it by default: the same bytes, without ``pyarrow.parquet`` itself.

    That module imports pyarrow's filesystems (S3, GCS, HDFS) and, through them, ``ssl``:
    ~50 M instructions, ~8 ms, of every decode's start-up, for files that are always local.
    """

    __slots__ = ("_sink", "_writer")

    def __init__(self, path: Path, schema: pa.Schema, options: dict[str, Any]) -> None:
        import pyarrow as pa
        from pyarrow._parquet import ParquetWriter
        self._sink = pa.OSFile(str(path), "wb")
        try:
            self._writer = ParquetWriter(
                self._sink, schema, version="2.6", data_page_version="1.0", writer_engine_version="V2",
                use_compliant_nested_type=True, store_schema=True, use_deprecated_int96_timestamps=False,
                **options)
        except BaseException:
            self._sink.close()
            os.unlink(path)
            raise

    def write_table(self, table: pa.Table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self._sink.close()


def _schema(table: str) -> pa.Schema:
    from kdissect.dataset.tables import SCHEMAS
    return SCHEMAS[table]


@dataclass
class Counts:
    """What went into the tables; summed over captures for the end-of-run summary."""

    captures: int = 0
    connections: set[str] = field(default_factory=set)
    exchanges: int = 0
    per_api: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)       # error names of responses
    anomalies: Counter[str] = field(default_factory=Counter)    # by kind
    partitions: int = 0
    records: int = 0
    # TCP connections that carried data, by what detection made of them (kafka, tls, not_kafka):
    # capture's CaptureStats.connections, so that a connection not decoded is still counted.
    flows: Counter[str] = field(default_factory=Counter)

    def add(self, other: Counts, capture: str | None = None) -> None:
        """Add ``other``'s counts; ``capture`` names the capture they are of when this sums several: a
        connection id (``client-broker#n``) repeats from one capture to the next, and each is its own."""
        self.captures += other.captures
        self.connections |= other.connections if capture is None else {(capture, c) for c in other.connections}
        self.exchanges += other.exchanges
        self.per_api.update(other.per_api)
        self.statuses.update(other.statuses)
        self.errors.update(other.errors)
        self.anomalies.update(other.anomalies)
        self.partitions += other.partitions
        self.records += other.records
        self.flows.update(other.flows)


class CaptureWriter:
    """The tables of one capture (or one live rotation, or one share of a capture), committed together.

    ``capture_level``: whether anomalies that belong to no connection (a damaged
    file, fragments) go in; when a capture is split into shares, only one share
    reports them. ``unresolved`` is told about rows whose topic id had no name
    yet, for a later resolution across shares (see :mod:`kdissect.run.parallel`). ``metrics``: a
    :class:`kdissect.metrics.fold.MetricsFold` told about every row as it is built (``live --metrics``).
    """

    def __init__(self, outdir: Path, capture: str, name: str, options: RowOptions,
                 topics: TopicRegistry | None = None, *, capture_level: bool = True,
                 unresolved: Unresolved | None = None, metrics: Any = None) -> None:
        self.capture = capture
        self._metrics = metrics
        self.options = options
        self.topics = topics if topics is not None else TopicRegistry()
        self._counts = Counts(captures=1)
        # Per exchange, plain dicts: a Counter's += is a Python-level subclass call, ~1,300
        # instructions each. Added into the Counters when ``counts`` is read.
        self._per_api: dict[str, int] = {}
        self._statuses: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._outdir = outdir
        self._name = name
        self._capture_level = capture_level
        tables = TABLES if options.records else TABLES[:3]
        self._writers = {t: TableWriter(outdir / t / f"{name}.parquet", t) for t in tables}
        w = self._writers
        self._ex, self._pa, self._an = w["exchanges"], w["partitions"], w["anomalies"]
        self._rec = w.get("records")
        self._rows = RowBuilder(capture, options, self.topics, {t: tw.cols for t, tw in w.items()},
                                self._counts.anomalies, lambda t: w[t].rows, unresolved)
        self._tally = Tally()

    def event(self, conn: ConnectionLike | None, ev: object) -> None:
        """One capture event: exchanges and anomalies become rows (and count their connection, so the
        summary counts the connections the dataset holds, as ``analyze`` does); the rest is not written."""
        if ev.__class__ is Exchange:
            self.exchange(conn, ev)  # type: ignore[arg-type]
        elif isinstance(ev, Anomaly):
            self.anomaly(conn, ev)
        elif isinstance(ev, Exchange):
            self.exchange(conn, ev)  # type: ignore[arg-type]
        elif self._metrics is not None and conn is not None and isinstance(ev, ConnectionEnd):
            self._metrics.connection_end(conn.id)

    def unowned(self, conn: ConnectionLike | None, ev: object) -> None:
        """An event another share of the capture writes (:mod:`kdissect.run.ranges`): no row, only what
        later rows depend on (a broker's quirk, named by an anomaly)."""
        if conn is not None and isinstance(ev, Anomaly) and ev.extra:
            self._rows.note(conn, ev)

    @property
    def counts(self) -> Counts:
        """What went into the tables so far."""
        c = self._counts
        for total, pending in ((c.per_api, self._per_api), (c.statuses, self._statuses), (c.errors, self._errors)):
            if pending:
                total.update(pending)
                pending.clear()
        return c

    def exchange(self, conn: ConnectionLike, ex: Exchange) -> None:
        c = self._counts
        c.connections.add(conn.id)
        tally = self._tally
        tally.partitions = tally.records = tally.record_bytes = 0
        metrics = self._metrics
        if metrics is not None:
            p0 = len(self._pa.cols[0])
            a0 = len(self._an.cols[_ANOMALY_KIND])
        built = self._rows.exchange(conn, ex, tally)
        if metrics is not None:     # before any flush: the rows just built are still in the buffers
            if built is not None:
                cols = self._ex.cols
                metrics.exchange(cols, len(cols[0]) - 1, self._pa.cols, p0, p0 + tally.partitions, ex)
            kinds = self._an.cols[_ANOMALY_KIND]
            if len(kinds) != a0:
                for kind in kinds[a0:]:
                    metrics.anomaly(kind)
        if built is None:               # its rows raised: left out, a dissector_error anomaly says so
            if self._an.full():
                self._an.flush()
            return
        c.exchanges += 1
        api, status, code, error, size = built
        name = api or "unknown"
        per_api = self._per_api
        per_api[name] = per_api.get(name, 0) + 1
        statuses = self._statuses
        statuses[status] = statuses.get(status, 0) + 1
        if code:
            errors = self._errors
            errors[error] = errors.get(error, 0) + 1
        ex_writer = self._ex
        ex_writer.weight += size
        if ex_writer.full():
            ex_writer.flush()
        if tally.partitions:
            c.partitions += tally.partitions
            if self._pa.full():
                self._pa.flush()
            if tally.records:
                c.records += tally.records
                rec = self._rec
                rec.weight += tally.record_bytes  # type: ignore[union-attr]
                if rec.full():  # type: ignore[union-attr]
                    rec.flush()  # type: ignore[union-attr]
            if self._an.full():
                self._an.flush()

    def anomaly(self, conn: ConnectionLike | None, a: Anomaly) -> None:
        if conn is not None:
            self._counts.connections.add(conn.id)
        elif not self._capture_level:
            return
        self._rows.anomaly(conn, a)
        if self._metrics is not None:
            self._metrics.anomaly(a.kind)
        if self._an.full():
            self._an.flush()

    @property
    def empty(self) -> bool:
        return not any(w.rows or w.pending for w in self._writers.values())

    def take_tables(self) -> dict[str, tuple[int, pa.Table]]:
        """Per table: rows already written, and the rows still waiting as an Arrow table (taken, not
        written). Checks of row building use it without paying for a Parquet file each time."""
        return {t: (w.rows, w.take_table(w.pending)) for t, w in self._writers.items()}

    def close(self) -> list[tuple[Path, Path]]:
        """Write every table's file under its temporary name: (temporary, final) paths; the schemas the
        capture's ``_schemas`` records taught go to ``OUTDIR/schemas/`` (the same files every time)."""
        for t, w in self._writers.items():
            if t != "anomalies":
                w.close()
        # The anomalies last, so that they hold what the others' last row groups had to change.
        for t, w in self._writers.items():
            for column, n in w.out_of_range.items():
                self._rows.anomaly(None, Anomaly(
                    "out_of_range", None, 0,
                    f"{n} value{'s' if n != 1 else ''} of the {t} table's {column} column beyond its type: "
                    "null (clamped where the column takes no null)"))
            w.out_of_range.clear()
        self._an.close()
        pay = self.options.payloads
        if pay is not None and pay.learned.learned:
            from kdissect.dataset.payload_columns import write_learned
            write_learned(self._outdir, pay.learned.learned)
        return [(w.tmp, w.path) for w in self._writers.values()]

    def commit(self) -> list[Path]:
        """Make the files visible (replacing an earlier decode of the same capture)."""
        paths = []
        for tmp, path in self.close():
            os.replace(tmp, path)
            paths.append(path)
        # Decoded before with --records and now without, or split into shares (--jobs):
        # those old files no longer match.
        remove_stale(self._name, paths)
        return paths

    def abort(self) -> None:
        for w in self._writers.values():
            w.abort()
