"""The ``kafka-pcap`` Spark data source: capture files read as a dataset table, decoded on the executors.

Register it once per session, then read any table of the dataset::

    from kdissect.spark.source import register
    register(spark)
    df = (spark.read.format("kafka-pcap").option("table", "exchanges")
          .option("ports", "9092").load("/shared/captures/*.pcap*"))

Options: ``table`` (``exchanges`` — default —, ``partitions``, ``anomalies``,
``records``), ``ports``, ``keep_secrets``, ``records`` (decode records, for their
anomalies; implied by ``table=records``), ``record_bytes``, ``max_decompressed``
(MiB, as ``decode --max-decompressed``), ``tls_keylog`` (key log path(s),
comma-separated), ``schemas`` (a folder of schemas by id, as ``decode --schemas``: record keys
and values decoded), ``schema_registry`` (a registry URL), ``validate_json``, ``shards`` (tasks per
capture; default one per 512 MiB),
``rotated`` (default true: files that continue one another, as ``tcpdump -C/-G``
writes them, are one capture read in order by one task; false: each file alone).
The schema is the dataset's (:mod:`kdissect.dataset.tables`) and the rows are those
``kdissect decode`` writes for the same files.

Spark does no file listing for Python data sources: the path given to ``load``
is expanded here (a file, a directory searched for captures, or a glob pattern),
on the driver, so it must name files every executor also sees at that path.

Topic names across shares: a task that decodes one share of a split capture
and wrote rows whose topic id it could not name (the Metadata response naming it
travelled on a connection of another share) also decodes the capture's other
shares, for the names only, and names its rows as :func:`kdissect.run.parallel.finish_capture`
does — with the name some share had learnt by that packet, which is what the
single-process decode knew there. Tasks cannot exchange results, so that costs
a full decode of the capture in such a task; ``kdissect spark-decode`` resolves
names on the driver instead, at no extra decoding.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from capture.shard import Share

from kdissect.dataset.writer import TABLES, prepare_outdir
from kdissect.errors import DamagedInput, KdissectError
from kdissect.run.parallel import decode_share, discard, finish_capture, share_name
from kdissect.run.source import DecodeOptions
from kdissect.spark.tasks import (Task, exception_line, expand_captures, not_a_capture_table, plan, shares_by_size,
                                  spark_schema)

NAME = "kafka-pcap"


def register(spark: Any) -> None:
    """Make ``spark.read.format("kafka-pcap")`` available in this session."""
    spark.dataSource.register(KafkaPcapSource)


def _flag(options: dict[str, str], name: str) -> bool:
    value = str(options.get(name, "false")).strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise KdissectError(f"option {name}: expected true or false, got {value!r}")
    return value in ("true", "1", "yes")


def decode_options(options: dict[str, str]) -> DecodeOptions:
    """Reader options -> the decode options ``kdissect decode`` would use."""
    return DecodeOptions.from_mapping({
        "ports": options.get("ports"), "keep_secrets": _flag(options, "keep_secrets"),
        # The records table is written only when records are decoded.
        "records": options.get("table", "exchanges") == "records" or _flag(options, "records"),
        "record_bytes": _flag(options, "record_bytes"), "max_decompressed": options.get("max_decompressed") or None,
        "tls_keylog": [p for p in options.get("tls_keylog", "").split(",") if p],
        "rotated": _flag(options, "rotated") if "rotated" in options else True,
        "schemas": options.get("schemas"), "schema_registry": options.get("schema_registry"),
        "validate_json": _flag(options, "validate_json")})


@dataclass(frozen=True, slots=True)
class CapturePartition(InputPartition):
    """One task: a share of one capture file."""

    task: Task


class KafkaPcapSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> Any:
        return spark_schema(self.options.get("table", "exchanges"))

    def reader(self, schema: Any) -> DataSourceReader:
        return KafkaPcapReader(dict(self.options))


class KafkaPcapReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.table = options.get("table", "exchanges")
        spark_schema(self.table)                           # an unknown table fails here, on the driver
        self.decode = decode_options(options)
        if self.decode.records:
            from kdissect.dataset.payload_columns import check_options
            check_options(self.decode)                   # a bad schemas folder fails here, on the driver
        path = options.get("path")
        if not path:
            raise KdissectError("kafka-pcap: give the captures to load(): a file, a directory or a glob")
        self.captures = [tuple(map(str, c)) for c in expand_captures([path], self.decode.rotated)]
        shards = options.get("shards")
        self.shards = int(shards) if shards else None

    def partitions(self) -> list[InputPartition]:
        from pathlib import Path
        n = self.shards
        tasks = plan([tuple(map(Path, c)) for c in self.captures], (lambda _size: n) if n else shares_by_size)
        return [CapturePartition(t) for t in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        task: Task = partition.task  # type: ignore[attr-defined]
        tmp = tempfile.mkdtemp(prefix="kdissect-spark-")
        try:
            yield from _decode_task(task, self.table, self.decode, tmp)
        except Exception as exc:        # the one line the query's error ends with: capture, share, cause
            raise task.failed(exception_line(exc)) from exc
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _decode_task(task: Task, table: str, options: DecodeOptions, tmp: str) -> Iterator[Any]:
    """The Arrow record batches of ``table`` for one share of one capture, decoded under ``tmp``."""
    import pyarrow.parquet as pq

    out = prepare_outdir(tmp, TABLES if options.records else TABLES[:3])
    share = Share(task.index, task.count)
    try:
        mine = decode_share(task.paths, out, share, options, stem=task.stem)
    except DamagedInput as exc:              # not a capture: one anomaly row (share 0 reports it)
        if table == "anomalies" and task.index == 0:
            yield from not_a_capture_table(_name(task.path), str(exc)).to_batches()
        return
    results = [mine]
    if mine.unnamed:
        try:
            for k in range(task.count):
                if k != task.index:
                    results.append(decode_share(task.paths, out, Share(k, task.count), options, stem=task.stem))
        except BaseException:
            discard(results)
            raise
        results.sort(key=lambda r: r.share.index)
    finish_capture(results)
    f = out / table / f"{share_name(task.stem, share)}.parquet"
    if f.exists():
        yield from pq.ParquetFile(f).iter_batches()


def _name(path: str) -> str:
    from pathlib import Path
    return Path(path).name


__all__ = ["NAME", "KafkaPcapSource", "decode_options", "register"]
