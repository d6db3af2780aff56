"""Structured Streaming over a dataset growing file by file, as ``kdissect live``'s rotations make it grow."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.live_latency import api_latency, exchanges_stream
from kdissect.run.decode import decode_files
from kdissect.run.source import DecodeOptions

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def expected(outdir: Path) -> dict[str, tuple[int, int]]:
    """Per api: (exchanges, exchanges with a latency), from the Parquet files themselves."""
    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for f in (outdir / "exchanges").glob("*.parquet"):
        for r in pq.read_table(f, columns=["api_name", "latency_ms"]).to_pylist():
            e = got[r["api_name"] or "unknown"]
            e[0] += 1
            e[1] += r["latency_ms"] is not None
    return {k: tuple(v) for k, v in got.items()}


def test_running_latency_aggregate_grows_with_each_rotation(spark, tmp_path: Path) -> None:
    out, checkpoint = tmp_path / "live", tmp_path / "checkpoint"

    def trigger() -> dict[str, tuple[int, int]]:
        query = (api_latency(exchanges_stream(spark, str(out))).writeStream.outputMode("complete")
                 .format("memory").queryName("api_latency").option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        rows = spark.sql("select * from api_latency").collect()
        return {r["api"]: (r["exchanges"], r["timed"]) for r in rows}

    # Two rotations' files, appearing one after the other in the same OUTDIR/exchanges/.
    decode_files([REPO / "samples" / "tansu-aiokafka.pcap"], out, DecodeOptions())
    first = trigger()
    assert first == expected(out)
    decode_files([REPO / "samples" / "tansu-kafka-python.pcap"], out, DecodeOptions())
    second = trigger()                                # only the new file is read; the state carries the rest
    assert second == expected(out)
    assert sum(n for n, _ in second.values()) > sum(n for n, _ in first.values())
