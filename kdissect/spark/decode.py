"""``kdissect spark-decode``: capture files -> the Parquet dataset, decoded by Spark tasks.

The same dataset ``kdissect decode`` writes (same tables, columns and file
names), with Spark scheduling, retrying and spreading the work. Each task
decodes one share of one capture (:func:`kdissect.run.parallel.decode_share`)
straight into OUTDIR under a hidden temporary name; the driver then makes each
capture's shares visible together (:func:`kdissect.run.parallel.finish_capture`),
which is also where topic ids are named across shares, exactly as ``decode
--jobs`` does. OUTDIR must therefore be a directory every executor and the
driver see at the same path (local disk with ``local[*]``, a shared filesystem
on a cluster), and so must the inputs.

On a cluster, through spark-submit (the inputs and OUTDIR on a shared filesystem)::

    spark-submit --master spark://HOST:7077 \\
        "$(python -c 'import kdissect.spark.decode as m; print(m.__file__)')" \\
        /shared/captures/ -o /shared/dataset/ --shards 8

A file that does not open as a capture becomes one ``not_a_capture`` anomaly
row and a warning, not a failed job.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from capture.shard import Share

from kdissect.dataset.writer import TABLES, Counts, prepare_outdir, remove_joined
from kdissect.run.decode import DecodeResult, shares_for
from kdissect.errors import KdissectError
from kdissect.run.parallel import ShareResult, decode_share, discard, finish_capture, share_name
from kdissect.run.source import DecodeOptions, check_keylogs
from kdissect.spark.tasks import Task, expand_captures, not_a_capture_table, plan

Outcome = tuple[Task, "ShareResult | None", "str | None"]


def run_task(task: Task, outdir: str, options: DecodeOptions) -> Outcome:
    """One Spark task: a share of a capture into ``outdir`` (temporary names); a non-capture is reported."""
    try:
        result = decode_share(task.paths, outdir, Share(task.index, task.count), options, stem=task.stem)
    except KdissectError as exc:          # raised only when the file does not open as a capture
        return task, None, str(exc)
    return task, result, None


def spark_decode(spark: Any, inputs: list[str | os.PathLike[str]], outdir: str | os.PathLike[str],
                 options: DecodeOptions, *, shards: int | None = None,
                 warn: Callable[[str], None] | None = None) -> DecodeResult:
    """Decode ``inputs`` (files, directories, glob patterns) into ``outdir`` with ``spark`` (a SparkSession).

    ``shards``: shares per capture; None: as ``decode --jobs`` splits a capture for
    as many jobs as Spark's default parallelism. ``warn`` is told about each input
    that is not a capture.
    """
    start = time.monotonic()
    sc = spark.sparkContext
    sets = expand_captures(inputs, options.rotated, probe_all=partial(_probe_on_executors, sc))
    check_keylogs(options.tls_keylog)
    if options.records:
        from kdissect.dataset.payload_columns import check_options
        check_options(options)
    out = prepare_outdir(outdir, TABLES if options.records else TABLES[:3])
    parallelism = sc.defaultParallelism
    tasks = plan(sets, (lambda _size: shards) if shards else (lambda size: shares_for(size, parallelism)))
    sc.setJobDescription(f"kdissect spark-decode: {len(sets)} capture(s), {len(tasks)} task(s)")
    try:
        outcomes: list[Outcome] = (sc.parallelize(tasks, len(tasks))
                                   .map(partial(run_task, outdir=str(out), options=options)).collect())
    except Exception as exc:
        _remove_temporaries(out, tasks)
        raise KdissectError(f"the Spark job failed: {_first_line(exc)}") from None
    by_path: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_path.setdefault(o[0].path, []).append(o)
    result = DecodeResult(out, rotated=[c for c in sets if len(c) > 1])
    try:
        for c in sets:
            mine = sorted(by_path.get(str(c[0]), []), key=lambda o: o[0].index)
            errors = [e for _, _, e in mine if e is not None]
            results = [r for _, r, _ in mine if r is not None]
            if errors:
                discard(results)
                _write_not_a_capture(out, c[0], mine[0][0].stem, errors[0])
                result.counts.anomalies["not_a_capture"] += 1
                if warn is not None:
                    warn(f"not decoded: {errors[0]}")
                continue
            files = finish_capture(results)
            remove_joined(c[1:], files)
            result.files += files
            counts = Counts(captures=1)
            for r in results:
                r.counts.captures = 0
                counts.add(r.counts)
            result.counts.add(counts, capture=c[0].name)
            result.packets += results[0].packets            # every share reads the whole file
            result.bytes_read += results[0].bytes_read
    except BaseException:
        _remove_temporaries(out, tasks)
        raise
    result.elapsed = time.monotonic() - start
    return result


def _probe_on_executors(sc: Any, paths: list[Path]) -> list[Any]:
    """First and last packet times of files that may continue one another, looked up by Spark tasks
    when some are gzipped (inflated to find their last packet); read from their tails here otherwise,
    which costs less than a Spark job."""
    from capture.rotation import probe
    if not any(p.name.lower().endswith(".gz") for p in paths):
        return [probe(p) for p in paths]
    sc.setJobDescription(f"kdissect spark-decode: which of {len(paths)} files continue one another")
    return sc.parallelize(paths, min(len(paths), 4 * sc.defaultParallelism)).map(probe).collect()


def _write_not_a_capture(out: Path, path: Path, stem: str, message: str) -> None:
    import pyarrow.parquet as pq
    final = out / "anomalies" / f"{stem}.parquet"
    tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
    pq.write_table(not_a_capture_table(path.name, message), tmp, compression="zstd")
    os.replace(tmp, final)


def _remove_temporaries(out: Path, tasks: list[Task]) -> None:
    """Hidden files of tasks that ran (on any executor) but whose capture is not made visible."""
    for t in tasks:
        name = share_name(t.stem, Share(t.index, t.count))
        for table in TABLES:
            for f in (out / table).glob(f".{name}.parquet.tmp*"):
                f.unlink(missing_ok=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if "KdissectError" in line or "Error:" in line:
            return line.strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run(args: Any, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command, from ``kdissect spark-decode``'s parsed arguments."""
    from kdissect.errors import EXIT_DAMAGED
    from kdissect.run.summary import damage_lines, format_summary

    options = DecodeOptions.from_args(args)
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        raise KdissectError("spark-decode needs PySpark: pip install 'pyspark>=4.0' (and Java 17)") from None
    from analysis.session import build_session   # the one session builder, the analysis' too
    spark = build_session("kdissect spark-decode", args.master, {"spark.ui.showConsoleProgress": "true"})
    try:
        result = spark_decode(spark, args.inputs, args.output, options, shards=args.shards,
                              warn=lambda msg: err.write(f"kdissect: warning: {msg}\n"))
    finally:
        spark.stop()
    if not args.quiet:
        tables = ["exchanges", "partitions", "anomalies"] + (["records"] if options.records else [])
        out.write(format_summary(result.counts, packets=result.packets, bytes_read=result.bytes_read,
                                 elapsed=result.elapsed, outdir=str(result.outdir), tables=tables,
                                 rotated=[(c[0].name, len(c)) for c in result.rotated]) + "\n")
    # A file that is not a capture was a warning as it happened; damage inside a capture is said here.
    damage = damage_lines(result.files, result.counts.anomalies)
    for line in damage:
        err.write(f"kdissect: damaged input: {line}; what could be read is in the dataset\n")
    return EXIT_DAMAGED if damage or result.counts.anomalies["not_a_capture"] else 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit .../spark_decode.py INPUT... -o OUTDIR [options]``: as ``kdissect spark-decode``."""
    from kdissect.commands.cli import main as cli_main
    return cli_main(["spark-decode", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
