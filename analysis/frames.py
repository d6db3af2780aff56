"""Column helpers every job shares: how exchanges and partition rows are keyed and named."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

# capture + connection + correlation_id identify an exchange in every table.
KEYS = ["capture", "connection", "correlation_id"]

# The api keys the jobs and rules select by (analysis.derived.api): Kafka's own numbers.
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
SASL_HANDSHAKE, API_VERSIONS = 17, 18
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
SASL_AUTHENTICATE = 36
CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 68, 76, 78, 79


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


def seconds_between(start: str | Column, end: str | Column) -> Column:
    """``end - start`` in seconds, microsecond-exact: from the integer microseconds, so it is the same double on
    both engines (a timestamp cast to double is not, in its last bit, which a rounded rate then showed)."""
    return millis_between(start, end) / 1000.0


def epoch_seconds(ts: str | Column) -> Column:
    """Seconds since the epoch of a timestamp, from its integer microseconds (see :func:`seconds_between`)."""
    return F.unix_micros(F.col(ts) if isinstance(ts, str) else ts) / 1_000_000.0


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


# Percentiles are exact and nearest-rank: the p-th percentile of n values is the value at rank ceil(p * n)
# (1-based) of them sorted, a value of the data itself. Both engines compute it alike from each group's
# sorted values; their approximate percentiles do not agree (Spark's summary returns a value of the data,
# the embedded engine's digest interpolates), nor does an exact interpolating one with a nearest rank.
# p is taken as a fraction of RANK_SCALE so the rank is integer arithmetic: 0.99 * 100 is 99.00000000000001
# in doubles, whose ceiling is 100, not 99.
RANK_SCALE = 1_000_000


def sorted_values(value: str | Column, window: WindowSpec | None = None) -> Column:
    """A group's non-null values of ``value`` (or a window's, with ``window``) sorted ascending: what
    :func:`nearest_rank` reads."""
    values = F.collect_list(value)
    return F.array_sort(values if window is None else values.over(window))


def nearest_rank(values: Column, p: float) -> Column:
    """The ``p``-th percentile (0 < p <= 1) of the sorted array ``values``: its element at rank
    ceil(p * n), null for an empty array."""
    if not 0 < p <= 1:
        raise ValueError(f"percentile {p!r}: expected 0 < p <= 1")
    scaled = round(p * RANK_SCALE)
    n = F.size(values).cast("long")
    rank = ((n * F.lit(scaled) + F.lit(RANK_SCALE - 1)) / F.lit(RANK_SCALE)).cast("long")   # exact: floor division
    return F.when(n > 0, F.element_at(values, F.greatest(rank, F.lit(1)).cast("int")))


def percentile(value: str | Column, p: float, window: WindowSpec | None = None) -> Column:
    """The exact nearest-rank ``p``-th percentile of a group's values of ``value`` (an aggregate; over
    ``window`` when given): nulls skipped, null when there are none."""
    return nearest_rank(sorted_values(value, window), p)


def where_lambda(df: DataFrame, condition: Column) -> DataFrame:
    """``df.where(condition)`` for a ``condition`` that reads a higher-order function's result (``transform``,
    ``filter``, ``exists``, ``aggregate``, or a column computed by one). Shim for the embedded engine, Sail
    0.7: its planner moves a filter down to the scan and loses the lambda variables on the way
    (``No field named "?table?".<column>``). A row is kept by a generator instead, which neither engine
    moves a filter through: the same rows on both (null counts as false, as in ``where``).
    (tests/analysis/test_frames.py holds both to it.)"""
    kept = "_kdissect_kept"
    return df.select("*", F.explode(F.when(condition, F.array(F.lit(True)))).alias(kept)).drop(kept)


def ordered(df: DataFrame, *order: str | Column) -> DataFrame:
    """A result table sorted for the driver: in one partition, then sorted there.

    A result table is small and aggregated. Sorting it in one partition spares Spark's range
    partitioning, which samples the table with a job of its own (recomputing it) before sorting.
    ``order`` ends with the table's key columns, so that rows tied on the leading ones come out in the
    same order whatever the plan, the partitioning or the server (a test compares every table row by row).
    """
    return df.coalesce(1).orderBy(*order)
