"""A running per-api latency aggregate over ``kdissect live``'s rotating output, with Structured Streaming.

``kdissect live -o OUTDIR`` writes a new set of Parquet files per rotation into
``OUTDIR/exchanges/``; a streaming read of that directory picks up each file as
it appears (Spark's file source lists the directory each trigger; a file is
read once, when it is complete: live renames it into place) and the aggregate
below is kept across triggers in Spark's state store::

    python -m analysis.live_latency OUTDIR [--checkpoint DIR] [--every '10 seconds']
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.dataset import SCHEMAS


def exchanges_stream(spark: SparkSession, outdir: str) -> DataFrame:
    """The exchanges table of a live dataset as a stream (explicit schema: streams do not infer one)."""
    return spark.readStream.schema(SCHEMAS["exchanges"]).parquet(f"{outdir.rstrip('/')}/exchanges")


def api_latency(exchanges: DataFrame) -> DataFrame:
    """Per api: exchanges so far, those with a latency, mean and max latency (ms); works on streams."""
    return (exchanges.groupBy(F.coalesce("api_name", F.lit("unknown")).alias("api"))
            .agg(F.count(F.lit(1)).alias("exchanges"), F.count("latency_ms").alias("timed"),
                 F.avg("latency_ms").alias("mean_ms"), F.max("latency_ms").alias("max_ms")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.live_latency", description=__doc__.splitlines()[0])
    p.add_argument("outdir", help="kdissect live's OUTDIR")
    p.add_argument("--checkpoint", help="checkpoint directory (keeps the aggregate across restarts)")
    p.add_argument("--every", default="10 seconds", help="trigger interval (default: 10 seconds)")
    args = p.parse_args(argv)
    spark = SparkSession.builder.appName("kdissect live latency").getOrCreate()
    writer = (api_latency(exchanges_stream(spark, args.outdir)).writeStream.outputMode("complete")
              .format("console").option("truncate", "false").trigger(processingTime=args.every))
    if args.checkpoint:
        writer = writer.option("checkpointLocation", args.checkpoint)
    writer.start().awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
