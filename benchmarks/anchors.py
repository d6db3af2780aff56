"""The analysis' anchors: what bare PySpark and DuckDB take for the same reads and aggregations.

    python benchmarks/anchors.py spark DATASET [DATASET...] [--master 'local[*]' | --remote sc://HOST:PORT]
    python benchmarks/anchors.py duckdb DATASET [DATASET...]

``spark``: a plain PySpark program, nothing of kdissect in it: a session (a new JVM, or a client of a
running Spark Connect server), the exchanges (without their JSON bodies) and partitions read and cached,
then twenty small aggregations of the kinds ``kdissect analyze`` computes -- latency percentiles per
api, client, broker, topic and time window, errors, throughput per topic and window, clients and their
versions -- each collected in turn. It is Spark's own floor for such an analysis on this machine: what
any program pays for the session, the read and that many queries. ``duckdb``: the latency-by-api,
errors and throughput-by-topic queries in DuckDB (in-process, no JVM), which users would otherwise pick.

Prints one JSON line: the seconds of each phase, and the number of queries. ``bench_analyze.py
--anchor`` runs it beside ``kdissect analyze`` in the same run, so both share the machine's load.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

QUANTILES = [0.5, 0.9, 0.99, 0.999]
ACCURACY = 10_000


def spark_anchor(datasets: list[str], master: str | None, remote: str | None) -> dict[str, float]:
    t0 = time.monotonic()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    builder = SparkSession.builder.appName("anchor")
    if remote:
        builder = builder.remote(remote)
    else:
        builder = (builder.master(master or "local[*]").config("spark.ui.enabled", "false")
                   .config("spark.sql.session.timeZone", "UTC"))
    spark = builder.getOrCreate()
    if not remote:
        spark.sparkContext.setLogLevel("ERROR")
    t1 = time.monotonic()
    ex = spark.read.parquet(*[f"{d}/exchanges" for d in datasets]).drop("request", "response").cache()
    parts = spark.read.parquet(*[f"{d}/partitions" for d in datasets]).cache()
    ex.count()
    parts.count()
    t2 = time.monotonic()

    keys = ["capture", "connection", "correlation_id"]
    q = F.percentile_approx("latency_ms", QUANTILES, ACCURACY)
    lat = ex.where(F.col("latency_ms").isNotNull())
    broker = F.concat_ws(":", "broker_ip", F.col("broker_port").cast("string"))
    topics = parts.select(*keys, F.coalesce("topic", "topic_id").alias("topic")).where(F.col("topic").isNotNull())
    window = F.window("request_ts", "10 seconds")
    queries = [
        lat.groupBy("api_name", "api_version").agg(F.count("*"), F.avg("latency_ms"), q, F.max("latency_ms")),
        lat.groupBy("client_id").agg(F.count("*"), F.avg("latency_ms"), q, F.max("latency_ms")),
        lat.groupBy(broker.alias("broker")).agg(F.count("*"), F.avg("latency_ms"), q, F.max("latency_ms")),
        lat.join(topics.distinct(), keys).groupBy("api_name", "topic").agg(F.count("*"), q),
        lat.groupBy(window, "api_name").agg(F.count("*"), q),
        lat.groupBy("api_name", F.floor(F.log10(F.greatest("latency_ms", F.lit(0.001))) * 4)).count(),
        lat.where(F.col("api_key") == 0).groupBy((F.col("request_bytes") / 16384).cast("int")).agg(q),
        ex.groupBy("api_name", "error_name").agg(F.count("*"), F.min("request_ts"), F.max("request_ts")),
        ex.where(F.col("error_code") != 0).groupBy(window, "error_name").count(),
        parts.groupBy("topic", "partition", "direction").agg(F.sum("bytes"), F.sum("record_count"),
                                                             F.countDistinct(*keys)),
        parts.groupBy(F.window("ts", "10 seconds"), "topic").agg(F.sum("bytes"), F.sum("record_count")),
        ex.groupBy("client_id").agg(F.count("*"), F.countDistinct("connection"), F.sum("request_bytes"),
                                    F.sum("response_bytes")),
        ex.groupBy("client_id", "api_key", "api_version").agg(F.count("*")),
        ex.groupBy("client_id").agg(F.count("*").alias("n")).orderBy(F.desc("n")).limit(10),
        ex.groupBy("status").agg(F.count("*")),
        ex.groupBy(broker.alias("broker"), "api_name").agg(F.count("*"), F.sum("request_bytes")),
        ex.agg(F.min("request_ts"), F.max("request_ts"), F.countDistinct("client_id"), F.count("*")),
        parts.where(F.col("error_code") != 0).groupBy("topic", "error_name").count(),
        parts.where(F.col("api_key") == 0).groupBy("compression").agg(F.sum("bytes"), F.sum("record_count")),
        parts.where(F.col("api_key") == 1).groupBy("topic", "partition").agg(F.max("high_watermark")),
    ]
    for df in queries:
        df.collect()
    t3 = time.monotonic()
    ex.unpersist()
    parts.unpersist()
    spark.stop()
    return {"session_s": t1 - t0, "read_cache_s": t2 - t1, "queries_s": t3 - t2, "queries": len(queries),
            "total_s": t3 - t0}


def duckdb_anchor(datasets: list[str]) -> dict[str, float]:
    try:
        import duckdb
    except ImportError:
        raise SystemExit("duckdb is not installed: pip install duckdb") from None
    t0 = time.monotonic()
    con = duckdb.connect()
    ex = "[" + ", ".join(f"'{d}/exchanges/*.parquet'" for d in datasets) + "]"
    parts = "[" + ", ".join(f"'{d}/partitions/*.parquet'" for d in datasets) + "]"
    sql = [
        f"select api_name, api_version, count(*), avg(latency_ms), quantile_cont(latency_ms, {QUANTILES}), "
        f"max(latency_ms) from read_parquet({ex}) where latency_ms is not null group by all",
        f"select api_name, error_name, count(*) from read_parquet({ex}) group by all",
        f"select topic, partition, direction, sum(bytes), sum(record_count) from read_parquet({parts}) group by all",
    ]
    for query in sql:
        con.sql(query).fetchall()
    t1 = time.monotonic()
    return {"queries_s": t1 - t0, "queries": len(sql), "total_s": t1 - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine", choices=("spark", "duckdb"))
    ap.add_argument("datasets", nargs="+", type=Path)
    ap.add_argument("--master", help="Spark master (default local[*])")
    ap.add_argument("--remote", metavar="sc://HOST:PORT", help="a running Spark Connect server")
    args = ap.parse_args()
    datasets = [str(d.resolve()) for d in args.datasets]
    out = (spark_anchor(datasets, args.master, args.remote) if args.engine == "spark"
           else duckdb_anchor(datasets))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
