"""The fold over a finished capture's Parquet files (``kdissect decode --metrics-out``).

The rows are read back as the writer left them (any ``--jobs``: each share's files are whole
exchanges), in their order, so the fold sees what ``live --metrics`` sees as it decodes. A
table's partition rows follow their exchange's row; they are matched to it by connection,
correlation id and api, as the analysis joins them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from kdissect.dataset.arrow import import_pyarrow
from kdissect.metrics.fold import BODY_APIS, MetricsFold
from kdissect.dataset.tables import COLUMNS

_REQ = COLUMNS["exchanges"].index("request")
_RESP = COLUMNS["exchanges"].index("response")
_KEYS = [COLUMNS["exchanges"].index(n) for n in ("connection", "correlation_id", "api_key")]
_PKEYS = [COLUMNS["partitions"].index(n) for n in ("connection", "correlation_id", "api_key")]


class ParquetFold(MetricsFold):
    """A fold whose bodies come from the exchanges table's JSON (parsed for the apis that need them)."""

    def bodies(self, source: Any) -> tuple[Any, Any]:
        req, resp = source
        return (orjson.loads(req) if req else None), (orjson.loads(resp) if resp else None)


def _columns(path: Path, table: str) -> list[list]:
    """The file's columns as Python lists, in the table's order; times as integer µs, as rows build them."""
    import_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pq.read_table(path)
    out = []
    for name in COLUMNS[table]:
        col = t.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        out.append(col.to_pylist())
    return out


def fold_files(files: Iterable[Path], fold: ParquetFold) -> None:
    """Fold the tables of every capture whose ``exchanges`` file is among ``files``."""
    for path in sorted(p for p in files if p.parent.name == "exchanges"):
        root, name = path.parent.parent, path.name
        ex = _columns(path, "exchanges")
        pa_path = root / "partitions" / name
        pa = _columns(pa_path, "partitions") if pa_path.exists() else [[] for _ in COLUMNS["partitions"]]
        ck, cc, ca = (ex[k] for k in _KEYS)
        pk, pc, pp = (pa[k] for k in _PKEYS)
        key_col = ex[COLUMNS["exchanges"].index("api_key")]
        j, n = 0, len(pk)
        for i in range(len(ck)):
            p0 = j
            while j < n and pk[j] == ck[i] and pc[j] == cc[i] and pp[j] == ca[i]:
                j += 1
            source = (ex[_REQ][i], ex[_RESP][i]) if key_col[i] in BODY_APIS else None
            fold.exchange(ex, i, pa, p0, j, source)
        an_path = root / "anomalies" / name
        if an_path.exists():
            for kind in _columns(an_path, "anomalies")[COLUMNS["anomalies"].index("kind")]:
                fold.anomaly(kind)
    fold.close_all()
