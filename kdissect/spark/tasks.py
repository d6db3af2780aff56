"""What the Spark data source and ``kdissect spark-decode`` share: inputs, tasks, the Spark schema.

A task is one share of one capture (:mod:`kdissect.run.parallel` decodes it): a file,
or the files of a rotated capture, which one task reads in order so that an
exchange cut by the rotation still pairs (:mod:`capture.rotation`);
nothing here imports pyspark at module level, so executors and the driver import
it alike and the dissector stays free of Spark.

How files and shares become tasks: every capture is at least one task; a
capture of ``size`` bytes is cut into ``shares`` tasks, each reading all of it
and keeping only the TCP connections whose 4-tuple hash falls in its share
(:mod:`capture.shard`). That is correct for reassembly and pairing because a
connection (both directions) always hashes to one share, so its bytes, its
requests and its responses are all seen by one decoder, start to end; what it
costs is that every share reads and parses the packet headers of the whole file
(a tenth or less of decoding them), so ``n`` shares cost about ``1 + n/10`` reads.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capture import capture_sets

from kdissect.errors import KdissectError, UsageError
from kdissect.run.inputs import Capture, capture_files
from kdissect.dataset.tables import SPEC

if TYPE_CHECKING:
    import pyarrow as pa

NOT_A_CAPTURE = "not_a_capture"      # anomaly kind of an input file that does not open as a capture
SHARE_BYTES = 512 << 20              # data source default: one more share per this many bytes of a file
MAX_SHARES = 64


@dataclass(frozen=True, slots=True)
class Task:
    """Share ``index`` of ``count`` of the capture in ``paths`` (one file, or a rotated set in order);
    ``stem`` names its output files."""

    paths: tuple[str, ...]
    index: int
    count: int
    stem: str

    @property
    def path(self) -> str:
        """The capture's (first) file, which names it."""
        return self.paths[0]

    def failed(self, cause: str) -> TaskFailed:
        """The one line saying this task failed: its capture, its share and ``cause`` (``XError: message``)."""
        return TaskFailed(f"the Spark task decoding {self.path} (share {self.index + 1} of {self.count}) "
                          f"failed: {cause}")


class TaskFailed(KdissectError):
    """A task that raised, with what the line must name. Raised in the task, it ends the Python
    traceback Spark hands the driver (``...TaskFailed: <message>``), where it is found again."""


def exception_line(exc: BaseException) -> str:
    """``XError: message`` of ``exc``, on one line."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def expand_inputs(inputs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files, directories (searched for captures) and glob patterns -> capture files, in a stable order.

    Spark hands a Python data source its path as a plain string, and a shell may
    pass a pattern unexpanded (``spark-submit`` quoting): patterns are expanded here.
    A pattern that matches nothing is an error, as a missing file is.
    """
    names: list[str] = []
    for raw in inputs:
        text = os.fspath(raw)
        if glob.has_magic(text) and not os.path.exists(text):
            found = sorted(glob.glob(text, recursive=True))
            if not found:
                raise UsageError(f"{text}: no file matches this pattern")
            names += found
        else:
            names.append(text)
    return capture_files(names)  # type: ignore[arg-type]


def expand_captures(inputs: Iterable[str | os.PathLike[str]], rotated: bool = True,
                    probe_all: Callable[[list[Path]], Iterable[Any]] | None = None) -> list[Capture]:
    """:func:`expand_inputs`, grouped into captures (:func:`group_captures`)."""
    return group_captures(expand_inputs(inputs), rotated, probe_all)


def group_captures(files: list[Path], rotated: bool = True,
                   probe_all: Callable[[list[Path]], Iterable[Any]] | None = None) -> list[Capture]:
    """Capture files grouped into captures (rotated sets together unless ``rotated`` is false);
    ``probe_all``: how the files that may continue one another are looked at (see ``capture_sets``)."""
    return capture_sets(files, probe_all=probe_all) if rotated else [(f,) for f in files]


def plan(captures: list[Capture], shares: Callable[[int], int]) -> list[Task]:
    """The tasks of ``captures``: ``shares(size in bytes)`` tasks per capture, each one share of its connections."""
    from kdissect.dataset.writer import file_stem
    from kdissect.run.shares import capture_size
    tasks = []
    for c in captures:
        n = max(1, shares(capture_size(c) or 0))
        stem = file_stem(c[0])
        tasks += [Task(tuple(map(str, c)), k, n, stem) for k in range(n)]
    return tasks


def shares_by_size(size: int, share_bytes: int = SHARE_BYTES) -> int:
    """The data source's default: one share per ``share_bytes`` of a file (at least one, at most MAX_SHARES)."""
    return max(1, min(MAX_SHARES, size // share_bytes))


def not_a_capture_table(capture: str, message: str) -> pa.Table:
    """The one anomaly row of an input file that is not a capture (the anomalies schema)."""
    import pyarrow as pa

    from kdissect.dataset.tables import ANOMALIES
    return pa.Table.from_pylist([{"capture": capture, "connection": None, "ts": None, "kind": NOT_A_CAPTURE,
                                  "direction": None, "detail": message}], schema=ANOMALIES)


_SPARK_TYPES = {"string": "StringType", "binary": "BinaryType", "bool": "BooleanType", "int8": "ByteType",
                "int16": "ShortType", "int32": "IntegerType", "int64": "LongType", "float64": "DoubleType",
                "ts": "TimestampType"}


def spark_schema(table: str) -> Any:
    """The Spark schema of a dataset table, from the one declaration in :mod:`kdissect.dataset.tables`."""
    from pyspark.sql import types as T
    if table not in SPEC:
        raise KdissectError(f"table {table!r}: must be one of {', '.join(SPEC)}")
    return T.StructType([T.StructField(name, getattr(T, _SPARK_TYPES[t])(), nullable)
                         for name, t, nullable in SPEC[table]])
