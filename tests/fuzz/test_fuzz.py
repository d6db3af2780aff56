"""The fuzz targets: seeds and past crash inputs replayed (fast), then each target fuzzed briefly (slow).

Longer runs: ``python -m tests.fuzz.run --seconds 3600`` (see tests/fuzz/run.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import seeds
from tests.fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = [(t, p) for t in TARGETS for p in seeds.regression_inputs(t)]


@pytest.mark.parametrize("target", list(TARGETS))
def test_seeds_satisfy_the_invariant(target: str) -> None:
    inputs = list(seeds.SEEDS[target]())
    assert len(inputs) >= 10, "the samples should give a real seed corpus"
    for data in inputs:
        assert len(data) <= TARGETS[target].max_len
        TARGETS[target].fn(data)


class TimeLimit(BaseException):
    """An input past its target's time limit: not an ``Exception``, which the code under test may contain
    as the value's problem."""


@pytest.mark.parametrize("target, path", REGRESSIONS, ids=[f"{t}/{p.name}" for t, p in REGRESSIONS])
def test_crash_inputs_found_by_fuzzing_stay_fixed(target: str, path: Path) -> None:
    """Replayed within the target's time limit, as libFuzzer ran them: a ``timeout-*`` input is a
    regression too."""
    limit = TARGETS[target].time_limit

    def expired(signum: int, frame: object) -> None:
        raise TimeLimit(f"{target}: an input took more than the target's {limit} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        TARGETS[target].fn(path.read_bytes())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.slow
def test_every_target_survives_a_short_fuzzing_run(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.run", "--seconds", "3", "--workdir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(TARGETS) and all(" ok" in ln for ln in lines), proc.stdout


_INSTRUMENTED = """
from tests.fuzz.run import instrument
instrument()
import capture.pipeline, dissector.connection, kdissect.dataset.rows
import payloads.avro, payloads.decoder, payloads.framing, payloads.jsonvalues, payloads.protobuf, payloads.store
from tests.fuzz.payload_targets import avrofast_twins
for fn in (capture.pipeline.Pipeline.run, dissector.connection.Connection.feed, kdissect.dataset.rows.RowBuilder.exchange,
           payloads.decoder.PayloadDecoder.decode, payloads.avro.AvroDecoder.decode, payloads.framing.message_indexes,
           payloads.jsonvalues.JsonDecoder.decode, payloads.protobuf.ProtobufDecoder.decode,
           payloads.store.LearnedStore.learn, avrofast_twins()[0].Program.read):
    assert "__ATHERIS_INSTRUMENTED__" in fn.__code__.co_consts, fn.__qualname__
"""


def test_fuzzing_instruments_the_code_under_test() -> None:
    """Coverage feedback reaches kdissect's and payloads' modules (the Avro reader's pure twin too, loaded
    by file): a finder placed ahead of atheris's (the KDISSECT_PURE switch once was) left a fuzzer blind,
    mutating at random."""
    pytest.importorskip("atheris")
    proc = subprocess.run([sys.executable, "-c", _INSTRUMENTED], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "KDISSECT_PURE": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
