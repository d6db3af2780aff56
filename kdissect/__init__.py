"""kdissect: decode Kafka traffic captures into a Parquet dataset for Spark.

The command line is :mod:`kdissect.commands.cli` (``kdissect --help``). From Python::

    import kdissect
    for item in kdissect.read_pcap("capture.pcap"):       # CapturedExchange
        print(item.connection.id, item.exchange.status, item.row()["api_name"])
    df = kdissect.exchanges_frame("capture.pcap")          # pandas DataFrame
    kdissect.write_dataset(["capture.pcap"], "out/")       # the Parquet dataset

The dataset's columns are documented in the README ("The dataset").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import hotpath  # noqa: F401  (first: installs the KDISSECT_PURE switch)

# Names load on first use: `kdissect decode` must not pay for pyarrow (and what
# it pulls in) before the first packet, and `kdissect show` never needs it.
_WHERE = {
    "CapturedExchange": "kdissect.api", "exchanges_frame": "kdissect.api", "exchanges_table": "kdissect.api",
    "read_pcap": "kdissect.api",
    "DecodeResult": "kdissect.run.decode", "write_dataset": "kdissect.run.decode",
    "KdissectError": "kdissect.errors",
    "DecodeOptions": "kdissect.run.source",
    "ANOMALIES": "kdissect.dataset.tables", "EXCHANGES": "kdissect.dataset.tables", "PARTITIONS": "kdissect.dataset.tables",
    "RECORDS": "kdissect.dataset.tables", "SCHEMAS": "kdissect.dataset.tables",
}

if TYPE_CHECKING:
    from kdissect.api import CapturedExchange, exchanges_frame, exchanges_table, read_pcap
    from kdissect.run.decode import DecodeResult, write_dataset
    from kdissect.errors import KdissectError
    from kdissect.run.source import DecodeOptions
    from kdissect.dataset.tables import ANOMALIES, EXCHANGES, PARTITIONS, RECORDS, SCHEMAS

__all__ = [
    "ANOMALIES", "CapturedExchange", "DecodeOptions", "DecodeResult", "EXCHANGES", "KdissectError",
    "PARTITIONS", "RECORDS", "SCHEMAS", "exchanges_frame", "exchanges_table", "read_pcap", "write_dataset",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kdissect' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
