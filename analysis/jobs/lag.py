"""Consumer lag as the wire shows it, and how long produced data waits before a consumer reads it.

``consumer_lag``: per group (or per client id for consumers without a group),
topic and partition: the latest committed offset the broker accepted
(OffsetCommit / TxnOffsetCommit), the latest fetch position of the consumer's
Fetch requests (followers' fetches excluded), the latest high watermark seen
(Fetch responses, and ListOffsets responses to a LATEST (-1) query), and
``lag`` = high watermark − committed offset (the fetch position where nothing
was committed): :func:`analysis.derived.consumer_lag`, which the findings'
``consumer.lag_growing`` quotes. Each value carries when it was seen: they are
samples taken at different moments, so lag is only as fresh as the older of
the two. A partition no Fetch or ListOffsets response described has no high
watermark, hence no lag. The wire cannot show lag of consumers that were not
captured, nor offsets committed before the capture started.

``produce_to_fetch``: per topic-partition and consumer client id, for every
record seen produced (its offset: the Produce response's ``base_offset`` plus
its position in the batch) and later carried by a Fetch response, the time
from the Produce response to the first Fetch response that carried it.

Tables: ``consumer_lag``, ``produce_to_fetch``.

Usage::

    python -m analysis lag DATASET... [--master local[*]] [--out DIR]
    PYTHONPATH=. spark-submit [--master spark://host:7077] analysis/jobs/lag.py DATASET [--out DIR]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import derived, frames, runner
from analysis.dataset import Dataset
from analysis.jobs import needs
from analysis.options import Options

TP = derived.TP


def produce_to_fetch(exchanges: DataFrame, partitions: DataFrame) -> DataFrame:
    """Per topic-partition and consumer: records seen produced then fetched, and produce -> first fetch delay."""
    req = (partitions.where(derived.api(frames.PRODUCE) & (F.col("direction") == "request"))
           .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "record_count"))
    resp = (partitions.where(derived.api(frames.PRODUCE) & (F.col("direction") == "response")
                             & (F.col("error_code") == 0) & (F.col("base_offset") >= 0))
            .select(*frames.KEYS, frames.topic().alias("topic"), "partition", "base_offset",
                    F.col("ts").alias("produced_ts")))
    produced = (req.join(resp, [*frames.KEYS, *TP]).where(F.col("record_count") > 0)
                .select(*TP, "produced_ts", F.explode(F.sequence(
                    F.col("base_offset"), F.col("base_offset") + F.col("record_count") - 1)).alias("offset")))
    fetched = (partitions.where(derived.api(frames.FETCH) & (F.col("direction") == "response")
                                & (F.col("record_count") > 0) & F.col("base_offset").isNotNull())
               .select(frames.topic().alias("topic"), "partition", "client_id", F.col("ts").alias("fetched_ts"),
                       F.explode(F.sequence("base_offset", "last_offset")).alias("offset")))
    first = (produced.join(fetched, [*TP, "offset"])
             .where(F.col("fetched_ts") >= F.col("produced_ts"))
             .groupBy(*TP, "client_id", "offset")
             .agg(F.min(frames.millis_between("produced_ts", "fetched_ts")).alias("delay_ms")))
    delays = frames.sorted_values("delay_ms")
    return (first.groupBy(*TP, "client_id")
            .agg(F.count(F.lit(1)).alias("count"), frames.nearest_rank(delays, 0.5).alias("p50_ms"),
                 frames.nearest_rank(delays, 0.99).alias("p99_ms"),
                 F.max("delay_ms").alias("max_ms")))


def tables(ds: Dataset, opts: Options) -> dict[str, DataFrame]:
    # Fetch positions, or commits; both a Produce and the Fetch that got its records.
    lag_apis = (frames.FETCH, frames.OFFSET_COMMIT, frames.TXN_OFFSET_COMMIT)
    return {
        "consumer_lag": needs(opts, frames.ordered(derived.consumer_lag(ds.exchanges, ds.partitions, ds.keep),
                                                          F.col("lag").desc_nulls_last(), "group_id", "topic",
                                                          "partition", "client_id"), *lag_apis),
        "produce_to_fetch": needs(opts, frames.ordered(produce_to_fetch(ds.exchanges, ds.partitions),
                                                              F.col("p50_ms").desc(), "topic", "partition",
                                                              "client_id"), all_of=(frames.PRODUCE, frames.FETCH)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return runner.run_job("lag", tables, argv)


if __name__ == "__main__":
    sys.exit(main())
