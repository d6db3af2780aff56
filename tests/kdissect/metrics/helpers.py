"""Folding real sample captures, live-style (as rows are built) and from their Parquet files."""

from __future__ import annotations

from pathlib import Path

from kdissect.dataset.writer import TABLES, CaptureWriter, file_stem, prepare_outdir
from kdissect.run.decode import run_into
from kdissect.metrics.fold import Family, MetricsFold
from kdissect.metrics.parquet import ParquetFold, fold_files
from kdissect.run.source import DecodeOptions, open_capture_run

from ..conftest import SAMPLES

PCAPS = sorted(SAMPLES.glob("*.pcap")) + [SAMPLES / "v07" / "clients.pcap"]


def live_fold(pcaps: list[Path], out: Path, max_series: int = 1000,
              options: DecodeOptions = DecodeOptions()) -> tuple[MetricsFold, list[Path]]:
    """Each capture decoded into ``out`` with a fold told about every row as it is built (as ``live``)."""
    fold = MetricsFold(max_series)
    prepare_outdir(out, TABLES[:3])
    files: list[Path] = []
    for pcap in pcaps:
        run = open_capture_run(pcap, options, messages=False)
        try:
            w = CaptureWriter(out, pcap.name, file_stem(pcap), options.row_options(), run.pipeline.topics,
                              metrics=fold)
            run_into(run, w)
            files += w.commit()
        finally:
            run.close()
    return fold, files


def parquet_fold(files: list[Path], max_series: int = 1000) -> ParquetFold:
    fold = ParquetFold(max_series)
    fold_files(files, fold)
    return fold


def samples(fold: MetricsFold, health: bool = False) -> dict[tuple, object]:
    """Every sample of the fold: (metric, labels) -> value (histograms: buckets and sum)."""
    out: dict[tuple, object] = {}
    fams: list[Family] = fold.families()
    for f in fams:
        if not health and f.metric.name in ("kdissect_packets", "kdissect_dropped_packets",
                                            "kdissect_spool_backlog_bytes"):
            continue
        for labels, value in f.samples:
            out[(f.metric.name, labels)] = tuple(value) if isinstance(value, (tuple, list)) else value
    return out


def total(fold: MetricsFold, metric: str, **match: str) -> float:
    """The sum of a metric's samples whose labels match."""
    fam = next(f for f in fold.families() if f.metric.name == metric)
    idx = {name: i for i, name in enumerate(fam.metric.labels)}
    return sum(v for k, v in fam.samples if all(k[idx[n]] == want for n, want in match.items()))


SHARE_PCAP = SAMPLES / "mock-share-groups.pcap"


def share_truth(pcap: Path = SHARE_PCAP) -> dict[str, dict[tuple, int]]:
    """The share consumers' own counts of a sample (its ``.expected.json``), keyed as the share metrics:
    ``acquired`` and ``redelivered`` by (group, topic, client id), ``acknowledged`` by (..., type)."""
    import json
    truth: dict[str, dict[tuple, int]] = {"acquired": {}, "redelivered": {}, "acknowledged": {}}
    for c in json.loads(pcap.with_suffix(".expected.json").read_text())["clients"]:
        key = (c.get("group"), c["client_id"])
        for topic, parts in (c.get("acquired") or {}).items():
            k = (key[0], topic, key[1])
            for p in parts.values():
                truth["acquired"][k] = truth["acquired"].get(k, 0) + p["count"]
                truth["redelivered"][k] = truth["redelivered"].get(k, 0) + p.get("redelivered", 0)
        for topic, parts in (c.get("acks") or {}).items():
            for by_type in parts.values():
                for kind, n in by_type.items():
                    if kind != "UNACKNOWLEDGED":
                        k = (key[0], topic, key[1], kind.lower())
                        truth["acknowledged"][k] = truth["acknowledged"].get(k, 0) + n
    return truth
