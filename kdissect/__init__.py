"""kdissect: decode Kafka traffic captures into a Parquet dataset for Spark.

The command line is :mod:`kdissect.cli` (``kdissect --help``). From Python::

    import kdissect
    for item in kdissect.read_pcap("capture.pcap"):       # CapturedExchange
        print(item.connection.id, item.exchange.status, item.row()["api_name"])
    df = kdissect.exchanges_frame("capture.pcap")          # pandas DataFrame
    kdissect.write_dataset(["capture.pcap"], "out/")       # the Parquet dataset

The dataset's columns are documented in the README ("The dataset").
"""

from kdissect.api import CapturedExchange, exchanges_frame, exchanges_table, read_pcap
from kdissect.decode import DecodeResult, write_dataset
from kdissect.errors import KdissectError
from kdissect.source import DecodeOptions
from kdissect.tables import ANOMALIES, EXCHANGES, PARTITIONS, RECORDS, SCHEMAS

__all__ = [
    "ANOMALIES", "CapturedExchange", "DecodeOptions", "DecodeResult", "EXCHANGES", "KdissectError",
    "PARTITIONS", "RECORDS", "SCHEMAS", "exchanges_frame", "exchanges_table", "read_pcap", "write_dataset",
]
