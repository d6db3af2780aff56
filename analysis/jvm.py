"""Java options for the JVM kdissect starts for a local analysis: a JVM that starts quickly.

A local analysis of a capture lives for seconds to a couple of minutes, and most of a short one is the
JVM warming up: loading and verifying some twenty thousand classes out of three hundred jars, and
compiling the code it runs. Two things cut that, measured on the bundled samples:

* **Class data sharing.** The first run's JVM writes an archive of every class it loaded
  (``-XX:ArchiveClassesAtExit``, JDK 13+) into kdissect's cache directory when it exits; later runs
  map it (``-XX:SharedArchiveFile``) instead of finding, reading and verifying each class again. The
  archive belongs to one Java and one pyspark install (its name says which), about 200 MB; delete it
  any time, or set ``KDISSECT_SPARK_CDS=0`` to do without. A JVM that cannot use it goes on without it.
* **For small inputs, the quick compiler only and the serial collector** (``-XX:TieredStopAtLevel=1
  -XX:+UseSerialGC``): the optimizing compiler's threads otherwise take a third of the CPU of a short
  run, on code that runs a few times. Past :data:`SMALL_INPUT` bytes of Parquet the optimizing
  compiler pays for itself and the JVM keeps its defaults.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

# Parquet bytes up to which a run counts as short. Measured, cold `kdissect analyze`, quick-start settings
# against Spark's defaults: the bundled sample (45 KB) 18-22 s against 36-39 s; 100,000 small exchanges
# (5.9 MB) 70 s against 65 s; 200,000 (7.5 MB) 86-94 s against 66-72 s.
SMALL_INPUT = 5 << 20
CDS_ENV = "KDISSECT_SPARK_CDS"


def cache_dir() -> Path:
    """``$KDISSECT_CACHE_DIR``, else ``$XDG_CACHE_HOME/kdissect``, else ``~/.cache/kdissect``."""
    explicit = os.environ.get("KDISSECT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kdissect"


# Spark's logs of the JVMs kdissect started, newest kept: enough to look back at the last few runs.
LOGS_KEPT = 20


def log_file() -> Path:
    """Where the JVM this process starts writes Spark's log: ``logs/spark-<pid>.log`` in the cache directory
    (the temporary directory when that cannot be made), the oldest logs beyond :data:`LOGS_KEPT` removed."""
    import tempfile
    name = f"spark-{os.getpid()}.log"
    for directory in (cache_dir() / "logs", Path(tempfile.gettempdir()) / "kdissect-logs"):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        _prune(directory, keep=name)
        return directory / name
    return Path(os.devnull)


def _prune(directory: Path, keep: str) -> None:
    """Leave room for one more log: the newest ``LOGS_KEPT - 1`` others stay (a run still writing is among them)."""
    def age(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0
    others = sorted((p for p in directory.glob("spark-*.log") if p.name != keep), key=age, reverse=True)
    for old in others[LOGS_KEPT - 1:]:
        old.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ClassArchive:
    """The class-data archive of one Java and pyspark install: use it when it is there, else have this
    run's JVM write it as it exits (one writer at a time, marked by a lock file holding its pid)."""

    def __init__(self, java: str, java_version: str, directory: Path | None = None) -> None:
        import pyspark
        jars = Path(pyspark.__file__).parent / "jars"
        try:
            stamp = f"{jars}:{jars.stat().st_mtime_ns}:{len(os.listdir(jars))}"
        except OSError:
            stamp = str(jars)
        key = hashlib.sha256(f"{java}\n{java_version}\n{pyspark.__version__}\n{stamp}".encode()).hexdigest()[:16]
        self.path = (directory or cache_dir()) / f"spark-{pyspark.__version__}-{key}.jsa"
        self.lock = self.path.with_suffix(".writing")

    def ready(self) -> bool:
        """The archive exists and no JVM is still writing it."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return False
        try:
            writer = int(self.lock.read_text().strip() or 0)
        except (OSError, ValueError):
            return True
        if writer and _alive(writer):
            return False
        self.lock.unlink(missing_ok=True)
        return True

    def claim(self) -> bool:
        """Whether this run may write the archive (no other live writer); takes the lock if so."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                writer = int(self.lock.read_text().strip() or 0)
            except (OSError, ValueError):
                writer = 0
            if writer and _alive(writer):
                return False
            self.lock.unlink(missing_ok=True)   # a writer that died: take over
            return self.claim()
        except OSError:
            return False
        os.close(fd)
        self.path.unlink(missing_ok=True)
        return True

    def writer_started(self, pid: int) -> None:
        """The JVM that will write the archive at its exit (the lock names it until it is gone)."""
        try:
            self.lock.write_text(f"{pid}\n")
        except OSError:
            pass

    def release(self) -> None:
        """Give up writing (the JVM did not start)."""
        self.lock.unlink(missing_ok=True)

    def options(self, writing: bool) -> list[str]:
        # Quiet either way: a missing or mismatched archive is not worth a warning on every run.
        quiet = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
        if writing:
            return [f"-XX:ArchiveClassesAtExit={self.path}", *quiet]
        return [f"-XX:SharedArchiveFile={self.path}", *quiet]


def java_version(java: str) -> str:
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stderr + proc.stdout


def quick_start_options(input_bytes: int) -> list[str]:
    """JIT and GC options for a local run over ``input_bytes`` of Parquet.

    Up to :data:`HEAP_FREE_INPUT` a run is a minute or so of many short queries: the quick compiler alone
    (C1), as the optimizing compiler's threads take more of two cores than its code gives back, and a
    throughput collector rather than G1, whose concurrent work competes for the same cores (serial for a
    small input's small heap, parallel past it). 200,000 exchanges (7 MB): 54 s, against 66 s with the
    JVM's defaults. Past it, runs are long and heaps large, and the defaults pay (2,000,000 exchanges,
    72 MB: 171 s, against 277 s with these).
    """
    if input_bytes > HEAP_FREE_INPUT:
        return []
    # C1 alone gets a 48 MB code cache; Spark with its Connect server fills it, and a full cache stops
    # compiling for the rest of the run (and says so on the console). The tiered default's 240 MB.
    gc = "-XX:+UseSerialGC" if input_bytes <= SMALL_INPUT else "-XX:+UseParallelGC"
    return ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", gc]


# The driver's heap for a local run: Spark's 1 GB up to HEAP_FREE_INPUT bytes of Parquet, then this many
# bytes of heap per byte of input (the queries' sorts and hash tables; what the analysis keeps is on
# disk past SMALL_INPUT), at most half of the machine's memory.
HEAP_FREE_INPUT = 16 << 20
HEAP_PER_INPUT_BYTE = 3


def physical_memory() -> int:
    """The machine's memory in bytes (4 GiB when the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def driver_memory(input_bytes: int, physical: int | None = None) -> str | None:
    """``spark.driver.memory`` for a local run over ``input_bytes`` of Parquet; None: Spark's default."""
    if input_bytes <= HEAP_FREE_INPUT:
        return None
    physical = physical_memory() if physical is None else physical
    mib = max(1024, min((1 << 30) + HEAP_PER_INPUT_BYTE * input_bytes, physical // 2) >> 20)
    return f"{mib}m"


def server_memory(physical: int | None = None) -> str:
    """The heap of a Spark Connect server kdissect starts: a quarter of the machine, 1 to 8 GiB.

    A server outlives its analyses and serves several at once, on datasets it does not know in advance:
    with Spark's 1 GiB, one that had served a few dozen analyses ran out of heap on 200,000 exchanges."""
    physical = physical_memory() if physical is None else physical
    return f"{max(1024, min(8192, (physical // 4) >> 20))}m"


def cds_enabled() -> bool:
    return os.environ.get(CDS_ENV, "1") not in ("0", "false", "no", "off")
