"""The kdissect dataset's tables as the jobs read them, checked before Spark touches them.

``kdissect decode`` writes ``OUTDIR/{exchanges,partitions,anomalies,records}`` as
Parquet directories (timestamps UTC, microseconds). The schemas below are the
columns the jobs rely on and the types they read them as (integers at least
as wide as the writer's, which Spark's Parquet reader widens to); the writer's
own schema stays in ``kdissect/dataset/tables.py``. Before reading, every local file's
footer is checked for those columns, so a dataset from an older kdissect, an
empty one, or a directory that is not a dataset is one clear message
(:class:`~analysis.exceptions.DatasetError`) instead of a Spark stack trace or
a silently null column.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow.parquet as pq
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from analysis.exceptions import DatasetError, NoSuchDataset


def _schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, typ, True) for name, typ in fields])  # type: ignore[arg-type]


EXCHANGES = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("client_ip", StringType()),
    ("client_port", IntegerType()),
    ("broker_ip", StringType()),
    ("broker_port", IntegerType()),
    ("api_key", IntegerType()),
    ("api_name", StringType()),
    ("api_version", IntegerType()),
    ("protocol", StringType()),
    ("correlation_id", IntegerType()),
    ("client_id", StringType()),
    ("request_ts", TimestampType()),
    ("response_ts", TimestampType()),
    ("latency_ms", DoubleType()),
    ("request_bytes", LongType()),
    ("response_bytes", LongType()),
    ("error_code", IntegerType()),
    ("error_name", StringType()),
    ("throttle_ms", IntegerType()),
    ("status", StringType()),
    ("decode_error", StringType()),
    ("request", StringType()),
    ("response", StringType()),
    ("inferred", BooleanType()),
)

PARTITIONS = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("correlation_id", IntegerType()),
    ("api_key", IntegerType()),
    ("api_name", StringType()),
    ("api_version", IntegerType()),
    ("direction", StringType()),
    ("ts", TimestampType()),
    ("topic", StringType()),
    ("topic_id", StringType()),
    ("partition", IntegerType()),
    ("error_code", IntegerType()),
    ("error_name", StringType()),
    ("record_count", LongType()),
    ("batch_count", LongType()),
    ("bytes", LongType()),
    ("offset", LongType()),
    ("base_offset", LongType()),
    ("last_offset", LongType()),
    ("high_watermark", LongType()),
    ("compression", StringType()),
    ("client_id", StringType()),
)

ANOMALIES = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("ts", TimestampType()),
    ("kind", StringType()),
    ("direction", StringType()),
    ("detail", StringType()),
)

RECORDS = _schema(
    ("capture", StringType()),
    ("connection", StringType()),
    ("correlation_id", IntegerType()),
    ("api_key", IntegerType()),
    ("direction", StringType()),
    ("ts", TimestampType()),
    ("topic", StringType()),
    ("topic_id", StringType()),
    ("partition", IntegerType()),
    ("offset", LongType()),
    ("timestamp", TimestampType()),
    ("magic", IntegerType()),
    ("key_size", IntegerType()),
    ("value_size", IntegerType()),
    ("header_count", IntegerType()),
    ("producer_id", LongType()),
    ("producer_epoch", IntegerType()),
    ("transactional", BooleanType()),
    ("control", BooleanType()),
    ("key_schema_id", IntegerType()),
    ("value_schema_id", IntegerType()),
    ("key_schema_guid", StringType()),
    ("value_schema_guid", StringType()),
    ("key_format", StringType()),
    ("value_format", StringType()),
    ("key_decoded", StringType()),
    ("value_decoded", StringType()),
)

SCHEMAS: dict[str, StructType] = {
    "exchanges": EXCHANGES,
    "partitions": PARTITIONS,
    "anomalies": ANOMALIES,
    "records": RECORDS,
}


# Columns the writer stores narrower than the jobs read them. Each is read as stored and then widened:
# Spark's reader widens a Parquet int16 read as an int itself, an embedded engine refuses the mismatch.
STORED: dict[str, dict[str, DataType]] = {
    "exchanges": {"api_key": ShortType(), "api_version": ShortType(), "error_code": ShortType()},
    "partitions": {"api_key": ShortType(), "api_version": ShortType(), "error_code": ShortType(),
                   "batch_count": IntegerType()},
    "records": {"api_key": ShortType(), "magic": ByteType(), "producer_epoch": ShortType()},
}
# The Arrow type names of a file's columns a table's schema reads (older writers' differ: one clear error).
_ARROW_NAMES = {ByteType: "int8", ShortType: "int16", IntegerType: "int32", LongType: "int64", DoubleType: "double",
                BooleanType: "bool", StringType: "string"}


def stored_schema(table: str) -> StructType:
    """``table``'s schema with each column as the writer stores it (:data:`STORED`)."""
    narrow = STORED.get(table, {})
    return StructType([StructField(f.name, narrow.get(f.name, f.dataType), True) for f in SCHEMAS[table].fields])


def widened(df: DataFrame, table: str) -> DataFrame:
    """``df`` read by :func:`stored_schema` with every column as the jobs read it (:data:`SCHEMAS`)."""
    narrow = STORED.get(table, {})
    if not narrow:
        return df
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) if f.name in narrow else F.col(f.name)
                       for f in SCHEMAS[table].fields])


def _arrow_name(arrow_type: object) -> str:
    text = str(arrow_type)
    if text.startswith("timestamp"):
        return "timestamp"
    return {"large_string": "string", "string_view": "string"}.get(text, text)


# Written only on request (``kdissect decode --records``): absent reads as empty.
OPTIONAL = frozenset({"records"})
# Every dataset has these directories, even for a capture without Kafka traffic.
REQUIRED = ("exchanges", "partitions", "anomalies")


class Kept(NamedTuple):
    """A frame :meth:`Dataset.keep` kept: the frame, its view's name (or its Parquet directory, on the
    embedded engine), and whether it was persisted (unpersisted at release) rather than checkpointed."""

    frame: DataFrame
    name: str
    persisted: bool


@dataclass(frozen=True)
class Dataset:
    """The tables of one or more dataset directories, unioned, optionally cut to a time range.

    ``kept`` holds the frames Spark keeps for this analysis (:meth:`keep`), released together by
    :meth:`release`: a long-running Spark Connect server must not keep them after the run.
    """

    exchanges: DataFrame
    partitions: DataFrame
    anomalies: DataFrame
    records: DataFrame
    paths: tuple[str, ...]
    input_bytes: int
    empty: frozenset[str] = frozenset()     # tables no dataset has a file of (records, without --records)
    kept: list[Kept] = field(default_factory=list, compare=False, repr=False)
    checkpoint: str | None = None           # keep() by local checkpoints at this StorageLevel, else persist
    scratch: str | None = None              # keep() by writing Parquet under this directory (before checkpoint)
    # One kept frame written at a time: each write is a query on every core, and the embedded engine holds
    # the working memory of all that run at once (2,000,000 exchanges' keeps side by side peaked past 2 GB).
    writing: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def keep(self, df: DataFrame) -> DataFrame:
        """``df`` kept until :meth:`release`: for a frame several tables read.

        With ``checkpoint`` (a JVM of this command's own, or a server that collects its garbage often) it is
        a local checkpoint, computed at once: its rows stored as they are (in memory, or on disk for a large
        input), where Spark's cache first builds compressed column batches of them, which cost more than the
        queries reading them saved (and, on a server, compiles a class to read them back in every query).
        (Left to the first query reading it, its tasks report metrics of a plan Spark may have forgotten by
        then, and each such report is an error in the log.) Spark frees a checkpoint once its JVM has
        collected it; any other server persists the frame instead, which :meth:`release` frees at once.

        It comes back as a temporary view of itself: the queries built on it then name it instead of
        repeating its whole plan, which Spark would otherwise analyze again in every one of them (and a
        Spark Connect client would send every time).

        With ``scratch`` (the embedded engine, which keeps nothing it is asked to persist) the frame is
        written once as Parquet under that directory and read back: every query then reads its typed
        columns, and none computes the frame again. It goes with the directory, as the command ends.
        """
        from pyspark import StorageLevel
        name = f"kdissect_{uuid.uuid4().hex}"
        if self.scratch is not None:
            where = os.path.join(self.scratch, name)
            with self.writing:
                df.write.parquet(where)
            self.kept.append(Kept(df, where, persisted=False))
            # Its schema given: an empty frame writes no file to infer one from.
            return df.sparkSession.read.schema(df.schema).parquet(where)
        checkpointed = self.checkpoint is not None and checkpoint_stays_on(df.sparkSession)
        if checkpointed:
            kept = df.localCheckpoint(eager=True, storageLevel=getattr(StorageLevel, self.checkpoint))
        else:
            kept = df.persist(StorageLevel.MEMORY_AND_DISK)
        kept.createOrReplaceTempView(name)
        self.kept.append(Kept(kept, name, persisted=not checkpointed))
        return kept.sparkSession.table(name)

    def release(self) -> None:
        """Drop every frame :meth:`keep` kept, and its view (without waiting for Spark to free the blocks; a
        checkpoint's go at the JVM's next collection)."""
        while self.kept:
            kept, name, persisted = self.kept.pop()
            if self.scratch is not None:
                shutil.rmtree(name, ignore_errors=True)
                continue
            kept.sparkSession.catalog.dropTempView(name)
            if persisted:
                kept.unpersist(blocking=False)


def checkpoint_stays_on(session: Any) -> bool:
    """Whether a local checkpoint made by ``session`` comes back as a frame of ``session``. pyspark (4.x)
    builds a Spark Connect checkpoint's frame on the process's active session, the first one created, not
    on the session that made it: with two Connect sessions in one process (a notebook's and an analysis'),
    the frame would ask the other server for a relation it never had. Such a frame is persisted instead."""
    kind = type(session)
    if not kind.__module__.startswith("pyspark.sql.connect"):
        return True
    try:
        return kind.active() is session
    except PySparkRuntimeError:     # no active or default session left: nothing to bind the frame to
        return False


def _is_remote(path: str) -> bool:
    return "://" in path


def _parquet_files(directory: str) -> list[str]:
    # Spark skips names starting with "." or "_" (the writer's temporaries, _SUCCESS): so does this.
    return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                  if n.endswith(".parquet") and not n.startswith((".", "_")))


def check_local(path: str) -> tuple[dict[str, list[str]], int, int]:
    """Files per table, total bytes and exchange rows of a local dataset; DatasetError if unusable."""
    if not os.path.exists(path):
        raise NoSuchDataset(f"{path}: no such directory (expected the OUTDIR of kdissect decode)")
    if not os.path.isdir(path):
        raise DatasetError(f"{path}: is a file, not a dataset directory (expected the OUTDIR of kdissect decode)")
    missing = [t for t in REQUIRED if not os.path.isdir(os.path.join(path, t))]
    if missing:
        raise DatasetError(f"{path}: not a kdissect dataset (no {', '.join(m + '/' for m in missing)}); "
                           f"write one with: kdissect decode CAPTURE -o {path}")
    files: dict[str, list[str]] = {}
    size = rows = 0
    for table in SCHEMAS:
        directory = os.path.join(path, table)
        files[table] = _parquet_files(directory) if os.path.isdir(directory) else []
        needed = SCHEMAS[table].fieldNames()
        expected = {f.name: "timestamp" if isinstance(f.dataType, TimestampType) else _ARROW_NAMES[type(f.dataType)]
                    for f in stored_schema(table).fields}
        for file in files[table]:
            try:
                meta = pq.read_metadata(file)
            except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
                raise DatasetError(f"{file}: not a readable Parquet file ({exc})") from None
            arrow = meta.schema.to_arrow_schema()
            have = set(arrow.names)
            absent = [c for c in needed if c not in have]
            if absent:
                raise DatasetError(f"{file}: no column {', '.join(absent)}: written by an older kdissect; "
                                   "decode the capture again with this version")
            for name in needed:
                found = _arrow_name(arrow.field(name).type)
                if found != expected[name]:
                    raise DatasetError(f"{file}: column {name} is {found}, expected {expected[name]}: written by "
                                       "another kdissect; decode the capture again with this version")
            size += os.path.getsize(file)
            if table == "exchanges":
                rows += meta.num_rows
    return files, size, rows


def check_paths(paths: Sequence[str]) -> int:
    """Check local datasets without Spark; DatasetError for the first unusable one. Their Parquet bytes."""
    rows = size = 0
    local = [p for p in paths if not _is_remote(p)]
    for path in local:
        _, nbytes, nrows = check_local(path)
        rows, size = rows + nrows, size + nbytes
    if local and len(local) == len(paths) and rows == 0:
        where = paths[0] if len(paths) == 1 else f"{len(paths)} datasets"
        raise DatasetError(f"{where}: empty dataset (no exchanges); nothing to analyze")
    return size


def _since_until(df: DataFrame, ts: Column, since: dt.datetime | None, until: dt.datetime | None) -> DataFrame:
    if since is not None:
        df = df.where(ts >= F.lit(since))
    if until is not None:
        df = df.where(ts < F.lit(until))
    return df


def load(spark: SparkSession, paths: Sequence[str], since: dt.datetime | None = None,
         until: dt.datetime | None = None) -> Dataset:
    """Every table of the datasets at ``paths``, cut to ``[since, until)`` of capture time."""
    if not paths:
        raise DatasetError("no dataset given")
    files: dict[str, list[str]] = {t: [] for t in SCHEMAS}
    remote: dict[str, list[str]] = {t: [] for t in SCHEMAS}
    size = rows = 0
    for path in paths:
        if _is_remote(path):
            for t in SCHEMAS:
                remote[t].append(path.rstrip("/") + "/" + t)
            continue
        # Absolute: a Spark Connect server on this machine resolves a relative path from its own directory.
        found, nbytes, nrows = check_local(os.path.abspath(path))
        for t, fs in found.items():
            files[t] += fs
        size, rows = size + nbytes, rows + nrows
    if not remote["exchanges"] and rows == 0:
        check_paths(paths)

    def read(table: str) -> DataFrame:
        sources = files[table] + remote[table]
        if not sources:
            return spark.createDataFrame([], SCHEMAS[table])
        df = widened(spark.read.schema(stored_schema(table)).parquet(*sources), table)
        if remote[table]:
            have = set(spark.read.parquet(*remote[table]).columns)
            absent = [c for c in SCHEMAS[table].fieldNames() if c not in have]
            if absent:
                raise DatasetError(f"{remote[table][0]}: no column {', '.join(absent)}: written by an older "
                                   "kdissect; decode the capture again with this version")
        return df

    ex = read("exchanges")
    return Dataset(
        exchanges=_since_until(ex, F.coalesce("request_ts", "response_ts"), since, until),
        partitions=_since_until(read("partitions"), F.col("ts"), since, until),
        anomalies=_since_until(read("anomalies"), F.col("ts"), since, until),
        records=_since_until(read("records"), F.col("ts"), since, until),
        paths=tuple(paths),
        empty=frozenset(t for t in SCHEMAS if not files[t] and not remote[t]),
        input_bytes=size,
    )


def cached(ds: Dataset, checkpoint: str | None = None, scratch: str | None = None) -> Dataset:
    """The dataset as the jobs read it: exchanges as facts (every body field a job reads as a typed
    column, each body parsed once, the bodies themselves dropped: see :mod:`analysis.facts`), kept
    (:meth:`Dataset.keep`, by local checkpoints at the StorageLevel ``checkpoint`` when given) so the
    jobs' many small queries parse the JSON once. The other tables are read from Parquet by each query:
    its columnar reader reads the few columns a query needs as fast as Spark's cache would, which would
    first cost a copy of every row."""
    from dataclasses import replace

    from analysis.facts import exchange_facts
    out = replace(ds, kept=[], checkpoint=checkpoint, scratch=scratch)
    return replace(out, exchanges=out.keep(exchange_facts(ds.exchanges)))


def read_table(spark: SparkSession, dataset: str, name: str) -> DataFrame:
    """One table of one dataset (for notebooks and ad-hoc use), checked like :func:`load`."""
    return getattr(load(spark, [dataset]), name)
