"""Column helpers every job shares: how exchanges and partition rows are keyed and named."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# capture + connection + correlation_id identify an exchange in every table.
KEYS = ["capture", "connection", "correlation_id"]

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
API_VERSIONS = 18
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
CONSUMER_GROUP_HEARTBEAT = 68


def broker() -> Column:
    """The broker end as ``ip:port``."""
    return F.concat_ws(":", "broker_ip", F.col("broker_port").cast("string"))


def topic() -> Column:
    """The topic name, else its id (Fetch v13+ when no Metadata response named it)."""
    return F.coalesce(F.col("topic"), F.col("topic_id"))


def exchange_ts() -> Column:
    """When an exchange happened: its request, else its response (orphans)."""
    return F.coalesce(F.col("request_ts"), F.col("response_ts"))


def millis_between(start: str | Column, end: str | Column) -> Column:
    """``end - start`` in milliseconds, microsecond-exact."""
    s = F.col(start) if isinstance(start, str) else start
    e = F.col(end) if isinstance(end, str) else end
    return (F.unix_micros(e) - F.unix_micros(s)) / 1000.0


def context(exchanges: DataFrame) -> DataFrame:
    """Per exchange: the keys and who was talking (client id, broker), to join onto partition rows."""
    return exchanges.select(*KEYS, "client_id", broker().alias("broker"), "status", "api_version")


def batch_entries() -> Column:
    """A Produce request's partition entries that carry record batches, from its own ``req_topic_data``
    (a topic without its partition list counts for nothing, as the exploded batches left it out)."""
    parts = F.flatten(F.transform(F.coalesce("req_topic_data", F.array()),
                                  lambda t: F.coalesce(t["partition_data"], F.array())))
    return F.filter(parts, lambda p: p["records"]["batch_count"] > 0)


def records_total(entries: Column, field: str) -> Column:
    """``sum(field)`` of the records summaries of ``entries`` (an array of Produce partition entries), as SQL
    sums: nulls skipped, null if all are. A request's totals from its own row, where grouping its exploded
    entries back by request would shuffle every entry."""
    return F.aggregate(entries, F.lit(None).cast("long"), lambda acc, p: F.when(
        p["records"][field].isNull(), acc).otherwise(F.coalesce(acc, F.lit(0).cast("long")) + p["records"][field]))


def failed(error_code: str = "error_code") -> Column:
    return F.col(error_code).isNotNull() & (F.col(error_code) != 0)


def in_group_order(df: DataFrame, keys: Sequence[str], *values: str) -> DataFrame:
    """``df`` with each group's rows (``keys``) in one partition, sorted by ``values``: for
    ``percentile_approx`` over those values. Its summary of a group past its accuracy's size (10,000 rows)
    depends on the order it meets the rows and merges partial summaries, which a shuffle's fetch order
    changes from run to run: so did the p50 of a 200,000-exchange capture's busiest topic."""
    return df.repartition(*keys).sortWithinPartitions(*keys, *values)


def ordered(df: DataFrame, *order: str | Column) -> DataFrame:
    """A result table sorted for the driver: in one partition, then sorted there.

    A result table is small and aggregated. Sorting it in one partition spares Spark's range
    partitioning, which samples the table with a job of its own (recomputing it) before sorting.
    ``order`` ends with the table's key columns, so that rows tied on the leading ones come out in the
    same order whatever the plan, the partitioning or the server (a test compares every table row by row).
    """
    return df.coalesce(1).orderBy(*order)
