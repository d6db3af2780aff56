"""The driver of ``kdissect spark-decode``: capture files -> the Parquet dataset, decoded by Spark tasks.

The same dataset ``kdissect decode`` writes (same tables, columns and file
names), with Spark scheduling, retrying and spreading the work. Each task
decodes one share of one capture (:func:`kdissect.run.parallel.decode_share`)
straight into OUTDIR under a hidden temporary name; the driver then makes each
capture's shares visible together (:func:`kdissect.run.parallel.finish_capture`),
which is also where topic ids are named across shares, exactly as ``decode
--jobs`` does. OUTDIR must therefore be a directory every executor and the
driver see at the same path (local disk with ``local[*]``, a shared filesystem
on a cluster), and so must the inputs.

Through spark-submit, the command is :mod:`kdissect.spark.decode`, run as a script.

A file that does not open as a capture becomes one ``not_a_capture`` anomaly
row and a warning, not a failed job. Anything else a task raises fails the job, and the
error is one line naming the capture, the share and the Python exception
(:func:`job_failure`). Before any of it, one tiny task checks that the workers run
the kdissect this driver runs (:func:`check_workers`): another copy fails later in
ways that name neither.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from capture.shard import Share

from kdissect.dataset.writer import TABLES, Counts, prepare_outdir, remove_joined
from kdissect.run.decode import DecodeResult
from kdissect.run.shares import shares_for
from kdissect.errors import DamagedInput, KdissectError
from kdissect.run.parallel import ShareResult, decode_share, discard, finish_capture, share_name
from kdissect.run.source import DecodeOptions, check_keylogs
from kdissect.spark.tasks import (Task, TaskFailed, exception_line, expand_inputs, group_captures,
                                  not_a_capture_table, plan)

Outcome = tuple[Task, "ShareResult | None", "str | None"]


def run_task(task: Task, outdir: str, options: DecodeOptions) -> Outcome:
    """One Spark task: a share of a capture into ``outdir`` (temporary names); a non-capture is reported.
    Anything else fails the task (Spark may retry it), as :class:`TaskFailed` naming the capture and share."""
    try:
        result = decode_share(task.paths, outdir, Share(task.index, task.count), options, stem=task.stem)
    except DamagedInput as exc:           # the file does not open as a capture
        return task, None, str(exc)
    except Exception as exc:              # a write that failed, a bug: the traceback stays in the worker's log
        raise task.failed(exception_line(exc)) from exc
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
    files = expand_inputs(inputs)             # bad use is said before any Spark job
    check_keylogs(options.tls_keylog)
    if options.records:
        from kdissect.dataset.payload_columns import check_options
        check_options(options)
    check_workers(sc)
    sets = group_captures(files, options.rotated, probe_all=partial(_probe_on_executors, sc))
    out = prepare_outdir(outdir, TABLES if options.records else TABLES[:3])
    parallelism = sc.defaultParallelism
    tasks = plan(sets, (lambda _size: shards) if shards else (lambda size: shares_for(size, parallelism)))
    sc.setJobDescription(f"kdissect spark-decode: {len(sets)} capture(s), {len(tasks)} task(s)")
    try:
        outcomes: list[Outcome] = (sc.parallelize(tasks, len(tasks))
                                   .map(partial(run_task, outdir=str(out), options=options)).collect())
    except Exception as exc:
        _wait_for_running_tasks(sc)
        _remove_temporaries(out, tasks)
        raise job_failure(exc, tasks) from None
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


def _wait_for_running_tasks(sc: Any, timeout: float = 15.0) -> None:
    """Spark fails a job at its first failed task and kills the others without waiting for them: until
    they end, they may still write files, which would outlive the removal of temporaries."""
    deadline = time.monotonic() + timeout
    try:
        tracker = sc._jsc.sc().statusTracker()
        while any(e.numRunningTasks() for e in tracker.getExecutorInfos()) and time.monotonic() < deadline:
            time.sleep(0.1)
    except Exception:  # noqa: BLE001 - no JVM to ask (Spark Connect): remove what is there now
        pass


def _remove_temporaries(out: Path, tasks: list[Task]) -> None:
    """Hidden files of tasks that ran (on any executor) but whose capture is not made visible."""
    for t in tasks:
        name = share_name(t.stem, Share(t.index, t.count))
        for table in TABLES:
            for f in (out / table).glob(f".{name}.parquet.tmp*"):
                f.unlink(missing_ok=True)


def check_workers(sc: Any) -> None:
    """Fail in one line unless a Spark task runs the kdissect this driver runs: the same sources and
    the same build (compiled or pure Python), wherever installed. One task of one element."""
    from kdissect.spark import fingerprint
    module = fingerprint.by_value()           # the task runs the driver's probe, whatever the worker imports
    here = module.fingerprint()
    sc.setJobDescription("kdissect spark-decode: do the workers run this kdissect?")
    try:
        there = sc.parallelize([0], 1).map(module.probe).collect()[0]
    except Exception as exc:
        cause = _cause(_error_text(exc)) or exception_line(exc)
        raise KdissectError(f"the Spark workers cannot run a Python task: {cause}") from None
    if there[2:] == here[2:] or (there[1] == here[1] and there[2:] == module.fingerprint()[2:]):
        return                                # (a checkout edited in between: the same files now)
    if not there[1]:
        raise KdissectError(f"the Spark workers' Python ({there[0]}) has no kdissect: install this one there "
                            "(kafka-dissect; PYSPARK_PYTHON names the workers' Python)")
    if os.path.realpath(there[1]) == os.path.realpath(os.getcwd()):
        fix = f"run it from outside {there[1]}: a local Spark worker imports the kdissect of its working directory"
    elif there[1] in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        fix = f"take {there[1]} out of PYTHONPATH, or run the kdissect it holds"
    else:
        fix = "install this kdissect on the workers (PYSPARK_PYTHON names their Python), or run theirs"
    raise KdissectError(f"the Spark workers run another kdissect than this driver: the driver runs the {here[2]} "
                        f"kdissect at {here[1]} (sources {here[3]}), the workers the {there[2]} one at {there[1]} "
                        f"(sources {there[3]}); {fix}")


_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)(?:: (.*))?")
_FAILED_TASK = re.compile(r"Task (\d+) in stage \S+ failed")
_LOST_TASK = re.compile(r"most recent failure: Lost task \S+ in stage \S+ \(TID \d+\) \([^)]*\): (?:[\w.$]+: )?(.*)")


def job_failure(exc: BaseException, tasks: list[Task]) -> KdissectError:
    """The one line of a failed Spark job: the task that failed (``tasks[i]`` is partition i), and why."""
    text = _error_text(exc)
    cause = _cause(text)
    if cause is None:                       # no task's: raised here, reading what the tasks returned
        return KdissectError(f"the Spark job failed: {exception_line(exc)}")
    if cause.startswith(f"{TaskFailed.__name__}: "):
        return KdissectError(cause.partition(": ")[2])
    failed = _FAILED_TASK.search(text)
    if failed and int(failed.group(1)) < len(tasks):
        return tasks[int(failed.group(1))].failed(cause)
    return KdissectError(f"a Spark task failed: {cause}")


def _error_text(exc: BaseException) -> str:
    """The text of ``exc`` and of the errors it was raised while handling: pyspark raises the Python
    worker's traceback while handling py4j's error, which alone says which task failed
    (``Task 3 in stage 1.0 failed``), and why when no Python ran (a worker that crashed)."""
    texts = []
    e: BaseException | None = exc
    while e is not None and len(texts) < 4:
        texts.append(str(e))
        e = e.__cause__ or e.__context__
    return "\n".join(texts)


def _cause(text: str) -> str | None:
    """``XError: message``: the last exception line of the first Python traceback in ``text`` (a
    :class:`TaskFailed` says it all), else the JVM's reason for the lost task; None when neither."""
    start = text.find("Traceback (most recent call last):")
    found = None
    for line in text[start:].splitlines()[1:] if start >= 0 else []:
        if line.startswith(("\tat ", " SQLSTATE", "Driver stacktrace")):     # the JVM's text again
            break
        m = _EXCEPTION_LINE.fullmatch(line)
        if m:
            found = f"{m.group(1)}: {m.group(2)}" if m.group(2) else m.group(1)
    if found is None and (lost := _LOST_TASK.search(text)):
        found = lost.group(1).strip()
    return found


def run(args: Any, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The command, from ``kdissect spark-decode``'s parsed arguments."""
    from kdissect.errors import EXIT_DAMAGED
    from kdissect.run.summary import damage_lines, format_summary

    options = DecodeOptions.from_args(args)
    expand_inputs(args.inputs)         # a missing input is bad use, said before Spark's JVM starts
    check_keylogs(options.tls_keylog)
    try:
        import pyspark  # noqa: F401
    except ModuleNotFoundError:
        raise KdissectError("spark-decode needs PySpark: pip install 'pyspark>=4.0' (and Java 17)") from None
    from analysis.session import build_session   # the one session builder, the analysis' too
    # Spark's progress bar on a terminal only: elsewhere its carriage returns are noise in a log.
    progress = "true" if getattr(err, "isatty", lambda: False)() else "false"
    spark = build_session("kdissect spark-decode", args.master, {"spark.ui.showConsoleProgress": progress},
                          engine="spark")     # Python tasks on executors: JVM Spark's

    _quiet_task_errors(spark)
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


def _quiet_task_errors(spark: Any) -> None:
    """A failed task is said in one line (:func:`job_failure`); Spark would log it first, with its Java
    and Python stacks, from the executor (in this JVM when local) and the scheduler. Unless
    KDISSECT_SPARK_LOG asks for Spark's logs."""
    if "KDISSECT_SPARK_LOG" in os.environ:
        return
    try:
        log4j = spark.sparkContext._jvm.org.apache.logging.log4j
        for name in ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager"):
            log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - another logging backend: its lines stay
        pass
