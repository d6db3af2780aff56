"""The busiest messages' decoders as compiled at install (``dissector/schema/_decoders.py``):
reproducible, and decoding every body, whole or damaged, exactly as the executed source does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hotpath as compiled
from dissector import schema
from dissector.decoders import Decoded, Decoders, run
from dissector.encoder import encode_body
from dissector.schema import _decoders
from dissector.schema.generate_decoders import HOT_APIS, render

from tests.dissector.strategies import body_strategy

DECODERS = Decoders()          # the records summary: what the compiled module calls
HOT_MESSAGES = sorted(_decoders.ENTRIES)
USED = bool(DECODERS._prebuilt)
needs_compiled = pytest.mark.skipif(not USED, reason="dissector/schema/_decoders.py is not compiled here")


def test_regenerating_gives_the_committed_files():
    module, pxd = render()
    here = Path(_decoders.__file__).with_name("_decoders.py")
    assert module == here.read_text(), "_decoders.py is stale: run `python -m dissector.schema.generate_decoders`"
    assert pxd == here.with_suffix(".pxd").read_text(), "_decoders.pxd is stale: regenerate it"


def test_every_version_of_the_busy_apis_is_there():
    expected = {(k, kind, v) for k in HOT_APIS for v in range(schema.version_range(k)[0], schema.version_range(k)[1] + 1)
                for kind in ("request", "response") if schema.message(k, kind, v) is not None}
    assert set(_decoders.ENTRIES) == expected


def test_used_when_compiled_and_never_as_python():
    if os.environ.get("KDISSECT_REQUIRE_COMPILED") and not compiled.pure_requested():
        assert USED, "the compiled decoders were not loaded"
    assert USED == (compiled.is_compiled(_decoders) and not compiled.pure_requested())
    # Another records hook than the summary: the module's functions would call the wrong one.
    assert Decoders(records_hook=lambda data: data)._prebuilt == {}


def _same(key: tuple[int, str, int], data: bytes) -> None:
    fast = DECODERS.decode(*key, data, 0)
    executed = run(DECODERS.get(*key), data, 0)
    assert isinstance(fast, Decoded)
    assert (fast.body, fast.end, fast.failure) == (executed.body, executed.end, executed.failure), data.hex()


@st.composite
def _encoded(draw) -> tuple[tuple[int, str, int], bytes]:
    key = draw(st.sampled_from(HOT_MESSAGES))
    return key, encode_body(*key, draw(body_strategy(*key)))


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_encoded(), st.data())
def test_a_body_decodes_as_the_executed_source_decodes_it(encoded, data):
    key, body = encoded
    _same(key, body)
    # Cut short anywhere, and with a few bytes changed: where each stops, and what it kept.
    for cut in sorted({len(body) * i // 8 for i in range(8)} | {len(body) - 1}):
        _same(key, body[:max(cut, 0)])
    damaged = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        if damaged:
            damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    _same(key, bytes(damaged))


@needs_compiled
def test_every_hot_message_on_zeros_and_on_nothing():
    # Zeros decode as empty arrays, empty strings, zero numbers (or run out); nothing runs out at once.
    for key in HOT_MESSAGES:
        _same(key, bytes(64))
        _same(key, b"")


def test_other_buffers_than_bytes_take_the_executed_source():
    key = (0, "response", 10)
    body = encode_body(*key, {"responses": [], "throttle_time_ms": 7, "node_endpoints": []})
    for buf in (bytearray(body), memoryview(body)):
        d = DECODERS.decode(*key, buf, 0)
        assert d.failure is None and d.body["throttle_time_ms"] == 7


def test_regenerating_leaves_unchanged_files_alone(tmp_path, monkeypatch):
    # A rewritten file with the same text would still make a checkout's build stale.
    from dissector.schema import generate_decoders

    out = tmp_path / "_decoders.py"
    module, pxd = render()
    out.write_text(module)
    out.with_suffix(".pxd").write_text("stale\n")
    os.utime(out, (1_000, 1_000))
    monkeypatch.setattr(generate_decoders, "OUTPUT", out)
    assert generate_decoders.main([]) == 0
    assert out.stat().st_mtime == 1_000
    assert out.with_suffix(".pxd").read_text() == pxd
