"""A run's tables out: as JSON rows, as Parquet or CSV files, or printed aligned on a terminal."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa

    from analysis.schedule import Results


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """Plain JSON-ready rows: timestamps as ISO-8601 UTC strings, lists as lists, null as None."""
    return [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]


def as_json(results: Results) -> dict[str, list[dict[str, Any]]]:
    return {name: rows(table) for name, table in results.items()}


def write_json(path: str, results: Results) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(as_json(results), fh, indent=None, separators=(",", ":"))
        fh.write("\n")


def write_out(directory: str, results: Results, fmt: str) -> None:
    """One file per table: ``DIR/<table>.parquet`` or ``DIR/<table>.csv`` (lists joined with ',')."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    for name, table in results.items():
        if fmt == "csv":
            cols = [pa.array([None if v is None else ",".join(map(str, v)) for v in col.to_pylist()], pa.string())
                    if pa.types.is_list(col.type) else col for col in table.columns]
            pacsv.write_csv(pa.table(cols, names=table.column_names), os.path.join(directory, f"{name}.csv"))
        else:
            pq.write_table(table, os.path.join(directory, f"{name}.parquet"))


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:
            return "-"
        return f"{value:.2f}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value)
    return str(value)


def format_table(table: pa.Table, columns: Sequence[str] | None = None, limit: int = 10,
                 width: int = 48) -> str:
    """The first ``limit`` rows aligned; numbers right-aligned; cells cut at ``width`` characters."""
    import pyarrow as pa
    cols = [c for c in (columns or table.column_names) if c in table.column_names]
    data = table.select(cols).slice(0, limit).to_pylist()
    cells = [[cell(r[c]) for c in cols] for r in data]
    cells = [[v if len(v) <= width else v[:width - 1] + "…" for v in row] for row in cells]
    numeric = [pa.types.is_integer(table.schema.field(c).type) or pa.types.is_floating(table.schema.field(c).type)
               for c in cols]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(cols), line(["-" * w for w in widths])] + [line(row) for row in cells]
    if table.num_rows > limit:
        out.append(f"... {table.num_rows - limit} more rows")
    if table.num_rows == 0:
        out.append("(no rows)")
    return "\n".join(out)


def print_tables(results: Results, views: Sequence[tuple[str, str, Sequence[str] | None]], limit: int,
                 out: TextIO) -> None:
    for name, title, columns in views:
        if name in results:
            print(f"\n== {title}", file=out)
            print(format_table(results[name], columns, limit), file=out)


class Progress:
    """A one-line progress indicator on stderr, only when it is a terminal."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream, self.label = stream, label
        self.enabled = stream.isatty()

    def __call__(self, done: int, total: int, name: str) -> None:
        if not self.enabled:
            return
        text = f"{self.label}: {done}/{total} tables" + (f" ({name})" if name else "")
        self.stream.write("\r" + text.ljust(72)[:79])
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()
