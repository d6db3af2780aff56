"""Writing the Parquet dataset: one file per table per capture (or per live rotation).

Layout: ``OUTDIR/<table>/<name>.parquet``. A file is written under a hidden
temporary name (readers skip names starting with ``.``) and renamed into place
when the capture is done, so a reader never sees half a file and re-decoding a
capture replaces its files instead of adding rows.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dissector.events import Anomaly, Exchange
from dissector.topics import TopicRegistry

from kdissect.errors import KdissectError
from kdissect.rows import (
    ConnectionLike,
    Row,
    RowOptions,
    anomaly_row,
    exchange_row,
    partition_table_rows,
    record_rows,
    records_anomalies,
    records_base,
    records_problem_row,
)
from kdissect.tables import SCHEMAS

TABLES = ("exchanges", "partitions", "anomalies", "records")
BATCH_ROWS = 20_000            # rows buffered per table before a row group is written
BATCH_BYTES = 32 << 20         # ... or this many bytes of JSON bodies (exchanges)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(path: str | os.PathLike[str]) -> str:
    """``<capture file name>-<hash of its absolute path>``: stable across runs, distinct per file."""
    p = Path(path).resolve()
    digest = hashlib.sha1(str(p).encode("utf-8", "surrogateescape")).hexdigest()[:12]
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


class TableWriter:
    """Rows of one table into one Parquet file, a row group every ``batch_rows`` rows."""

    def __init__(self, path: Path, schema: pa.Schema, batch_rows: int = BATCH_ROWS,
                 batch_bytes: int = BATCH_BYTES) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        self.schema = schema
        self.rows = 0
        # Rows are kept whole and turned into columns at flush: one list comprehension
        # per column costs less than a Python-level append per cell as rows arrive.
        self._rows: list[Row] = []
        self._n = 0
        self._buf_bytes = 0
        self._batch_rows = batch_rows
        self._batch_bytes = batch_bytes
        try:
            self._writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        except OSError as exc:
            raise KdissectError(f"{path.parent}: cannot write: {exc.strerror or exc}") from None

    @property
    def pending(self) -> int:
        return self._n

    def add(self, row: Row, size: int = 0) -> None:
        self._rows.append(row)
        self._n += 1
        self._buf_bytes += size
        if self._n >= self._batch_rows or self._buf_bytes >= self._batch_bytes:
            self.flush()

    def flush(self) -> None:
        if not self._n:
            return
        rows = self._rows
        arrays = [pa.array([row[name] for row in rows], type=f.type)
                  for name, f in zip(self.schema.names, self.schema)]
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        try:
            self._writer.write_table(table)
        except OSError as exc:
            raise KdissectError(f"{self.path.parent}: write failed: {exc.strerror or exc}") from None
        self.rows += self._n
        self._rows = []
        self._n = 0
        self._buf_bytes = 0

    def commit(self) -> None:
        self.flush()
        self._writer.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - already failing; the temp file goes either way
            pass
        self.tmp.unlink(missing_ok=True)


@dataclass(slots=True)
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

    def add(self, other: Counts) -> None:
        self.captures += other.captures
        self.connections |= other.connections
        self.exchanges += other.exchanges
        self.per_api.update(other.per_api)
        self.statuses.update(other.statuses)
        self.errors.update(other.errors)
        self.anomalies.update(other.anomalies)
        self.partitions += other.partitions
        self.records += other.records


class CaptureWriter:
    """The tables of one capture (or one live rotation), committed together."""

    def __init__(self, outdir: Path, capture: str, name: str, options: RowOptions,
                 topics: TopicRegistry | None = None) -> None:
        self.capture = capture
        self.options = options
        self.topics = topics if topics is not None else TopicRegistry()
        self.counts = Counts(captures=1)
        self._outdir = outdir
        self._name = name
        tables = TABLES if options.records else TABLES[:3]
        self._writers: dict[str, TableWriter] = {}
        try:
            for t in tables:
                self._writers[t] = TableWriter(outdir / t / f"{name}.parquet", SCHEMAS[t])
        except BaseException:
            self.abort()
            raise

    def event(self, conn: ConnectionLike | None, ev: object) -> None:
        """One capture event: exchanges and anomalies become rows; the rest only counts the connection."""
        if isinstance(ev, Exchange):
            self.exchange(conn, ev)  # type: ignore[arg-type]
        elif isinstance(ev, Anomaly):
            self.anomaly(conn, ev)
        elif conn is not None:
            self.counts.connections.add(conn.id)

    def exchange(self, conn: ConnectionLike, ex: Exchange) -> None:
        c = self.counts
        c.connections.add(conn.id)
        c.exchanges += 1
        row = exchange_row(self.capture, conn, ex)
        c.per_api[row["api_name"] or "unknown"] += 1
        c.statuses[row["status"]] += 1
        if row["error_code"]:
            c.errors[row["error_name"]] += 1
        size = len(row["request"] or "") + len(row["response"] or "")
        self._writers["exchanges"].add(row, size)
        records = self._writers.get("records")
        for prow, p in partition_table_rows(self.capture, conn, ex, self.topics):
            self._writers["partitions"].add(prow)
            c.partitions += 1
            for arow in records_anomalies(self.capture, conn, prow, p):
                self._anomaly_row(arow)
            if records is not None and p.records is not None:
                rows, problems = record_rows(records_base(prow), p, self.options)
                weigh = self.options.record_bytes  # only stored bytes count towards a flush
                for r in rows:
                    records.add(r, (r["key_size"] or 0) + (r["value_size"] or 0) if weigh else 0)
                c.records += len(rows)
                for problem in problems:
                    self._anomaly_row(records_problem_row(self.capture, conn, prow, problem))

    def anomaly(self, conn: ConnectionLike | None, a: Anomaly) -> None:
        if conn is not None:
            self.counts.connections.add(conn.id)
        self._anomaly_row(anomaly_row(self.capture, conn, a))

    def _anomaly_row(self, row: Row) -> None:
        self.counts.anomalies[row["kind"]] += 1
        self._writers["anomalies"].add(row)

    @property
    def empty(self) -> bool:
        return not any(w.rows or w.pending for w in self._writers.values())

    def commit(self) -> list[Path]:
        """Make the files visible (replacing an earlier decode of the same capture)."""
        for w in self._writers.values():
            w.flush()
        paths = []
        for w in self._writers.values():
            w.commit()
            paths.append(w.path)
        if "records" not in self._writers:
            # Decoded before with --records, now without: that old file no longer matches.
            (self._outdir / "records" / f"{self._name}.parquet").unlink(missing_ok=True)
        return paths

    def abort(self) -> None:
        for w in self._writers.values():
            w.abort()

