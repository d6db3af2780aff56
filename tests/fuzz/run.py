"""Run the fuzz targets with atheris (coverage-guided, libFuzzer underneath).

    python -m tests.fuzz.run                          # every target, 10 s each
    python -m tests.fuzz.run records packets --seconds 3600 --workdir /var/tmp/kd-fuzz
    python -m tests.fuzz.run --runs 1000000           # every target until a million inputs each

Per target: a seed corpus is written from the samples (``tests/fuzz/seeds.py``)
into ``<workdir>/<target>/corpus`` (kept between runs, so long runs build on
each other), then a child process instruments ``capture``, ``dissector``,
``kdissect`` and ``payloads`` and fuzzes with libFuzzer's ``-rss_limit_mb`` / ``-timeout`` /
``-max_len`` from the target's declaration. A crash leaves its input in
``<workdir>/<target>/crash-*``: copy it into ``tests/fuzz/regressions/<target>/``
and it is replayed by ``tests/fuzz/test_fuzz.py`` from then on.

Prints one line per target: inputs executed, seconds, result. Exit status 1
if any target failed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    target: str
    runs: int
    seconds: float
    ok: bool
    detail: str


def instrument() -> None:
    """Import the code under test with atheris's coverage hooks (in a KDISSECT_PURE process)."""
    import atheris

    with atheris.instrument_imports(include=["capture", "dissector", "kdissect", "payloads"]):
        import capture.pipeline  # noqa: F401  (instrumented before the targets import them)
        import dissector.connection  # noqa: F401
        import kdissect.dataset.writer  # noqa: F401
        import payloads.avro  # noqa: F401
        import payloads.avrofast  # noqa: F401
        import payloads.decoder  # noqa: F401
        import payloads.jsonvalues  # noqa: F401
        import payloads.protobuf  # noqa: F401


def _child(target: str, corpus: Path, workdir: Path, runs: int, seconds: int, max_len: int) -> None:
    import atheris

    instrument()
    from tests.fuzz.targets import TARGETS

    t = TARGETS[target]
    if t.warm is not None:
        t.warm()            # what is fixed per process (protoc's runs), before the first input and its timer
    argv = [sys.argv[0], str(corpus), f"-rss_limit_mb={t.rss_mb}", f"-timeout={t.time_limit}",
            f"-max_len={max_len or t.max_len}", f"-artifact_prefix={workdir}/", "-print_final_stats=1"]
    if runs:
        argv.append(f"-runs={runs}")
    if seconds:
        argv.append(f"-max_total_time={seconds}")
    atheris.Setup(argv, t.fn)
    atheris.Fuzz()


def run_target(target: str, workdir: Path, runs: int, seconds: int, quiet: bool = True, max_len: int = 0) -> Result:
    from tests.fuzz.seeds import write_corpus

    tdir = workdir / target
    corpus = tdir / "corpus"
    write_corpus(target, corpus)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.run", "--child", target, "--corpus", str(corpus),
         "--workdir", str(tdir), "--runs", str(runs), "--seconds", str(seconds), "--max-len", str(max_len)],
        cwd=ROOT, capture_output=True, text=True, errors="replace",
        env={**os.environ, "KDISSECT_PURE": "1"})   # atheris sees Python bytecode, not the compiled modules
    elapsed = time.monotonic() - t0
    log = proc.stderr + proc.stdout
    (tdir / "last.log").write_text(log)
    done = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log) or re.findall(r"#(\d+)\s", log)
    executed = int(done[-1]) if done else 0
    ok = proc.returncode == 0
    detail = "ok" if ok else _failure(log, tdir)
    return Result(target, executed, elapsed, ok, detail)


def _failure(log: str, tdir: Path) -> str:
    crashes = sorted(tdir.glob("crash-*")) + sorted(tdir.glob("timeout-*")) + sorted(tdir.glob("oom-*"))
    lines = [ln for ln in log.splitlines() if ln.strip()]
    why = next((ln for ln in reversed(lines) if "Error" in ln or "Exception" in ln or "ERROR" in ln),
               lines[-1] if lines else "no output")
    return f"{why.strip()} (input: {crashes[-1] if crashes else 'none kept'}; log: {tdir / 'last.log'})"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        # Nothing of the code under test may be imported before the child instruments it.
        _, target, _, corpus, _, workdir, _, runs, _, seconds, _, max_len = argv
        _child(target, Path(corpus), Path(workdir), int(runs), int(seconds), int(max_len))
        return 0
    from tests.fuzz.targets import TARGETS

    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", help=f"default: all of {', '.join(TARGETS)}")
    ap.add_argument("--seconds", type=int, default=0, help="per target (default 10 unless --runs)")
    ap.add_argument("--runs", type=int, default=0, help="inputs per target")
    ap.add_argument("--max-len", type=int, default=0,
                    help="longest input in bytes (default: the target's own; smaller inputs run faster but "
                         "hold fewer packets or frames)")
    ap.add_argument("--workdir", type=Path, help="corpora and crash inputs (default: a temporary directory)")
    args = ap.parse_args(argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris is not installed: pip install atheris (it is in the test extras)", file=sys.stderr)
        return 2
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    seconds = args.seconds or (0 if args.runs else 10)
    failed = False
    with tempfile.TemporaryDirectory(prefix="kd-fuzz-") as tmp:
        workdir = args.workdir or Path(tmp)
        for target in args.targets or list(TARGETS):
            r = run_target(target, workdir, args.runs, seconds, max_len=args.max_len)
            failed |= not r.ok
            print(f"{r.target:22} {r.runs:>10} inputs {r.seconds:8.1f} s  {r.detail}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
