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
