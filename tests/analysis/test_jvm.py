"""The local JVM's options follow the input's size: quick start for small inputs, a heap for large ones."""

from __future__ import annotations

from analysis import jvm

GIB = 1 << 30


def test_small_inputs_keep_sparks_heap_and_start_quickly() -> None:
    assert jvm.driver_memory(7 << 20) is None                  # 200,000 small exchanges are ~7 MB
    assert "-XX:TieredStopAtLevel=1" in jvm.quick_start_options(1 << 20)
    assert "-XX:+UseSerialGC" in jvm.quick_start_options(jvm.SMALL_INPUT)


def test_mid_inputs_keep_the_quick_compiler_with_a_parallel_collector_and_large_ones_the_defaults() -> None:
    options = jvm.quick_start_options(jvm.SMALL_INPUT + 1)
    assert "-XX:TieredStopAtLevel=1" in options and "-XX:+UseParallelGC" in options
    assert jvm.quick_start_options(jvm.HEAP_FREE_INPUT + 1) == []      # 2,000,000 exchanges are ~72 MB


def test_the_heap_grows_with_the_input_up_to_half_the_machine() -> None:
    assert jvm.driver_memory(72 << 20, physical=24 * GIB) == f"{1024 + 3 * 72}m"    # 2,000,000 exchanges
    assert jvm.driver_memory(10 * GIB, physical=24 * GIB) == f"{12 * 1024}m"
    assert jvm.driver_memory(jvm.HEAP_FREE_INPUT + 1, physical=GIB) == "1024m"        # never below Spark's own


def test_a_servers_heap_is_a_quarter_of_the_machine_within_bounds() -> None:
    assert jvm.server_memory(physical=24 * GIB) == "6144m"
    assert jvm.server_memory(physical=2 * GIB) == "1024m"      # never below Spark's own 1 GiB
    assert jvm.server_memory(physical=256 * GIB) == "8192m"


def test_a_server_maps_the_class_archive_an_analysis_wrote_and_never_writes_one(tmp_path, monkeypatch) -> None:
    from analysis import connect_server, preflight
    monkeypatch.setenv("KDISSECT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jvm.CDS_ENV, raising=False)
    assert connect_server._class_archive() == []          # none written yet: the server does not write it
    java = preflight.java_command() or "java"
    archive = jvm.ClassArchive(java, jvm.java_version(java))
    archive.path.write_bytes(b"archive")
    assert archive.ready() and connect_server._class_archive()[0] == f"-XX:SharedArchiveFile={archive.path}"
    monkeypatch.setenv(jvm.CDS_ENV, "0")
    assert connect_server._class_archive() == []
