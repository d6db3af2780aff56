"""``kdissect spark-decode`` and the ``kafka-pcap`` data source give the rows ``kdissect decode`` gives.

Real Spark: one local[2] session for this module; the standalone-cluster test
starts a real master and two workers from the pyspark installation.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kdissect.run.decode import decode_files
from kdissect.run.source import DecodeOptions
from tests.brokers import free_port, wait_for_port
from tests.capture.test_rotation import editcap_split

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SAMPLES = sorted((REPO / "samples").glob("*.pcap"))
PUBLIC = sorted(p for p in (REPO.parent / "shared" / "public-captures").glob("*.pcap*"))   # shared/ beside the checkout
SHOWN = ("exchanges", "partitions", "anomalies")


def _norm(v: object) -> object:
    if isinstance(v, dt.datetime):              # Spark hands timestamps back in its session zone
        return v.astimezone(dt.UTC) if v.tzinfo else v.replace(tzinfo=dt.UTC)
    return v


def table_rows(outdir: Path, table: str) -> list[tuple]:
    """A table's rows in a dataset directory, order aside."""
    rows = [tuple(_norm(v) for v in r.values()) for f in sorted((outdir / table).glob("*.parquet"))
            for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=repr)


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("kdissect-spark-decode-tests")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples and the public captures in one directory, a capture cut short, and a file that is not one."""
    d = tmp_path_factory.mktemp("inputs")
    for p in SAMPLES + PUBLIC:
        shutil.copy(p, d / p.name)
    for p in SAMPLES[:4]:         # the same traffic at another time: the rows must follow the timestamps
        _shifted(p, d / f"shifted-{p.name}", 86_400 * 400 + 3)
    # A rotated capture (editcap -c): one capture, named by its first file, read in order by one task.
    editcap_split(REPO / "samples" / "tansu-consume-group.pcap", d, 60, name="rotated.pcap")
    (d / "notes.pcap").write_text("not a capture at all\n")
    whole = (REPO / "samples" / "group-rebalance.pcap").read_bytes()
    (d / "cut-short.pcap").write_bytes(whole[: len(whole) // 2 + 7])     # fails halfway: keeps what decoded
    return d


def _shifted(src: Path, dst: Path, seconds: int) -> None:
    """A copy of a classic pcap file with every packet ``seconds`` later."""
    data = bytearray(src.read_bytes())
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos = 24
    while pos + 16 <= len(data):
        sec, _, incl, _ = struct.unpack_from(order + "IIII", data, pos)
        struct.pack_into(order + "I", data, pos, sec + seconds)
        pos += 16 + incl
    dst.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def reference(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``kdissect decode`` of every real capture, one process."""
    out = tmp_path_factory.mktemp("decode")
    decode_files([p for p in sorted(inputs.iterdir()) if p.name != "notes.pcap"], out, DecodeOptions())
    return out


def test_spark_decode_writes_the_dataset_decode_writes(spark, inputs: Path, reference: Path, tmp_path: Path) -> None:
    from kdissect.spark.driver import spark_decode
    warnings: list[str] = []
    result = spark_decode(spark, [inputs], tmp_path, DecodeOptions(), warn=warnings.append)
    assert len(SAMPLES + PUBLIC) >= 20
    for table in SHOWN:
        got = table_rows(tmp_path, table)
        if table == "anomalies":
            odd = [r for r in got if r[3] == "not_a_capture"]
            assert len(odd) == 1 and odd[0][0] == "notes.pcap" and "notes.pcap" in odd[0][5]
            got = [r for r in got if r[3] != "not_a_capture"]
        assert got == table_rows(reference, table), table
    assert len(warnings) == 1 and "notes.pcap" in warnings[0]
    assert result.counts.exchanges == len(table_rows(reference, "exchanges"))
    assert any(r[0] == "cut-short.pcap" and r[3] == "capture_truncated" for r in table_rows(tmp_path, "anomalies"))
    assert any(r[0] == "cut-short.pcap" for r in table_rows(tmp_path, "exchanges"))
    assert len({r[0] for r in table_rows(tmp_path, "exchanges") if r[0].startswith("shifted-")}) == 4
    rotated = sorted(inputs.glob("rotated_*.pcap"))
    assert len(rotated) > 3
    assert {r[0] for r in table_rows(tmp_path, "exchanges") if r[0].startswith("rotated")} == {rotated[0].name}
    assert not list(tmp_path.rglob(".*"))                       # no temporary file left behind


@pytest.mark.skipif(os.geteuid() != 0, reason="tcpdump needs root")
def test_four_shards_of_a_capture_with_hundreds_of_connections_give_the_rows_of_one(spark, tmp_path: Path) -> None:
    """150 librdkafka producers against tansu, captured: 300+ connections spread over 4 Spark tasks."""
    pytest.importorskip("confluent_kafka")
    from kdissect.spark.driver import spark_decode
    from tests.brokers import run_tansu, tcpdump
    from tests.kdissect.run.test_parallel import _CLIENTS
    port = free_port()
    pcap = tmp_path / "many.pcap"
    with run_tansu(port) as bootstrap:
        with tcpdump(pcap, iface="lo", bpf=["tcp", "port", str(port)], immediate=True):
            out = subprocess.run([sys.executable, "-c", _CLIENTS, bootstrap, "150"], capture_output=True,
                                 text=True, timeout=600, check=True)
    assert int(out.stdout) == 150
    one = decode_files([pcap], tmp_path / "one", DecodeOptions())
    assert len(one.counts.connections) >= 300
    spark_decode(spark, [pcap], tmp_path / "four", DecodeOptions(), shards=4)
    per_share = [pq.read_metadata(f).num_rows for f in sorted((tmp_path / "four" / "exchanges").glob("*of4.parquet"))]
    assert len(per_share) == 4 and min(per_share) > 0.1 * sum(per_share)     # every task had real work
    for table in SHOWN:
        assert table_rows(tmp_path / "four", table) == table_rows(tmp_path / "one", table), table


def test_shards_give_the_rows_of_one(spark, inputs: Path, reference: Path, tmp_path: Path) -> None:
    """The largest sample, and one whose topic ids are named on another connection, in 4 shares each."""
    from kdissect.spark.driver import spark_decode
    picked = [inputs / "group-rebalance.pcap", inputs / "mock-transactions.pcap"]
    spark_decode(spark, picked, tmp_path, DecodeOptions(), shards=4)
    assert len(list((tmp_path / "exchanges").glob("*-4of4.parquet"))) == 2
    names = {p.name for p in picked}
    for table in SHOWN:
        want = [r for r in table_rows(reference, table) if r[0] in names]
        assert table_rows(tmp_path, table) == want, table


def _frame_rows(df) -> list[tuple]:
    """A DataFrame's rows, through Arrow, order aside."""
    return sorted((tuple(_norm(v) for v in d.values()) for d in df.toArrow().to_pylist()), key=repr)


@pytest.mark.parametrize("table", SHOWN)
def test_data_source_reads_the_rows_decode_writes(spark, inputs: Path, reference: Path, table: str) -> None:
    from kdissect.spark.source import register
    from kdissect.spark.tasks import spark_schema
    register(spark)
    df = spark.read.format("kafka-pcap").option("table", table).load(str(inputs / "*.pcap*"))
    assert df.schema == spark_schema(table)
    got = _frame_rows(df)
    if table == "anomalies":
        assert [r[0] for r in got if r[3] == "not_a_capture"] == ["notes.pcap"]
        got = [r for r in got if r[3] != "not_a_capture"]
    assert got == table_rows(reference, table)


def test_data_source_names_topics_across_shards(spark, inputs: Path, reference: Path) -> None:
    from kdissect.spark.source import register
    register(spark)
    df = (spark.read.format("kafka-pcap").option("table", "partitions").option("shards", "3")
          .load(str(inputs / "mock-transactions.pcap")))
    assert df.rdd.getNumPartitions() == 3
    want = [r for r in table_rows(reference, "partitions") if r[0] == "mock-transactions.pcap"]
    assert _frame_rows(df) == want


def test_gzipped_rotations_are_looked_at_by_spark_tasks_and_decode_as_one(spark, tmp_path: Path) -> None:
    import gzip
    from kdissect.spark.driver import spark_decode
    for f in editcap_split(REPO / "samples" / "mixed.pcap", tmp_path / "rot", 40):
        f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
    # A group of its own: the shared session keeps only its last 200 jobs' status (session.LONG_RUNNING).
    sc = spark.sparkContext
    sc.setJobGroup("kd-gzipped-rotations", "the Spark decode of gzipped rotations")
    try:
        result = spark_decode(spark, [tmp_path / "rot"], tmp_path / "spark", DecodeOptions())
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    # Whether the workers run this kdissect, which files continue one another, the decode.
    assert len(sc.statusTracker().getJobIdsForGroup("kd-gzipped-rotations")) == 3
    assert result.counts.captures == 1 and len(result.rotated) == 1
    decode_files([tmp_path / "rot"], tmp_path / "decode", DecodeOptions())
    for table in SHOWN:
        assert table_rows(tmp_path / "spark", table) == table_rows(tmp_path / "decode", table), table


def test_a_data_source_task_that_fails_names_its_capture_share_and_cause(spark, tmp_path: Path) -> None:
    # A key log the executors cannot read (the driver does not open it): every task fails.
    from kdissect.spark.source import register
    register(spark)
    keys = tmp_path / "gone.keys"
    df = spark.read.format("kafka-pcap").option("tls_keylog", str(keys)).load(str(REPO / "samples" / "mixed.pcap"))
    with pytest.raises(Exception) as failed:
        df.collect()
    want = (f"TaskFailed: the Spark task decoding {REPO / 'samples' / 'mixed.pcap'} (share 1 of 1) failed: "
            f"UsageError: TLS key log {keys}: cannot read")
    assert want in str(failed.value), str(failed.value)[-2000:]


def test_data_source_reads_a_rotated_capture_as_one_unless_told_otherwise(spark, inputs: Path, reference: Path) -> None:
    from kdissect.spark.source import register
    register(spark)
    files = sorted(inputs.glob("rotated_*.pcap"))
    reader = spark.read.format("kafka-pcap").option("table", "exchanges")
    joined = _frame_rows(reader.load(str(inputs / "rotated_*.pcap")))
    assert joined == [r for r in table_rows(reference, "exchanges") if r[0] == files[0].name]
    apart = _frame_rows(reader.option("rotated", "false").load(str(inputs / "rotated_*.pcap")))
    assert len({r[0] for r in apart}) == len(files)


def test_spark_decode_says_in_one_line_that_its_master_does_not_answer(inputs: Path, tmp_path: Path) -> None:
    # The analysis' session builder and checks: nothing starts a JVM for a master nobody listens at.
    master = f"spark://127.0.0.1:{free_port()}"
    run = subprocess.run([sys.executable, "-m", "kdissect", "spark-decode", str(inputs), "-o", str(tmp_path / "o"),
                          "--master", master], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and master in run.stderr and "Traceback" not in run.stderr, run.stderr


# -- a real standalone cluster -------------------------------------------------------------------

def _spark_class() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def test_spark_decode_on_a_standalone_cluster(inputs: Path, reference: Path, tmp_path: Path) -> None:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_WORKER_DIR=str(tmp_path / "work"))
    port, ui = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs = []

    def start(*args: str) -> None:
        log = open(tmp_path / f"proc{len(procs)}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen([str(_spark_class()), *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))

    try:
        start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui))
        wait_for_port("127.0.0.1", port, timeout=120)
        for _ in range(2):
            start("org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1", "--cores", "1",
                  "--memory", "1g", "--port", str(free_port()), "--webui-port", str(free_port()))
        out = tmp_path / "out"
        run = subprocess.run([sys.executable, "-m", "kdissect", "spark-decode", str(inputs), "-o", str(out),
                              "--master", master_url, "--shards", "2"],
                             env=env, capture_output=True, text=True, timeout=900)
        # A file that is not a capture, and one cut short: decoded as far as they go, then exit 3.
        assert run.returncode == 3, run.stderr[-3000:]
        assert "notes.pcap" in run.stderr and "damaged input: " in run.stderr
        for table in SHOWN:
            got = table_rows(out, table)
            if table == "anomalies":
                got = [r for r in got if r[3] != "not_a_capture"]
            assert got == table_rows(reference, table), table
        # Both workers ran executors of the application. Counted from the master's log, not the
        # executor directories: an executor that exits as the application ends can be relaunched
        # by the master in that instant, a third directory on a busy machine.
        for log in logs:
            log.flush()
        master_log = (tmp_path / "proc0.log").read_text(errors="replace")
        workers = set(re.findall(r"Launching executor \S+ on worker (\S+)", master_log))
        assert len(workers) == 2, master_log[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
        deadline = time.monotonic() + 30
        for p in procs:
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()
        for log in logs:
            log.close()


PAYLOADS = REPO / "samples" / "payloads"


def test_spark_decode_and_the_data_source_decode_record_payloads(spark, tmp_path: Path) -> None:
    """--schemas through spark-decode and the data source's ``schemas`` option: the rows decode gives;
    and schemas learnt from _schemas records on one share reach the values of another (spark-decode)."""
    from kdissect.spark.driver import spark_decode
    from kdissect.spark.source import register
    avro = PAYLOADS / "avro" / "avro.pcap"
    options = DecodeOptions(records=True, schemas=str(PAYLOADS / "avro" / "schemas"))
    decode_files([avro], tmp_path / "one", options)
    spark_decode(spark, [avro], tmp_path / "spark", options, shards=2)
    assert table_rows(tmp_path / "spark", "records") == table_rows(tmp_path / "one", "records")
    assert all(r["value_decoded"] for r in pq.read_table(tmp_path / "spark" / "records").to_pylist())
    register(spark)
    df = (spark.read.format("kafka-pcap").option("table", "records")
          .option("schemas", str(PAYLOADS / "avro" / "schemas")).load(str(avro)))
    assert _frame_rows(df) == table_rows(tmp_path / "one", "records")
    learnt = PAYLOADS / "schemas-topic" / "schemas-topic.pcap"
    decode_files([learnt], tmp_path / "learnt-one", DecodeOptions(records=True))
    spark_decode(spark, [learnt], tmp_path / "learnt-spark", DecodeOptions(records=True), shards=3)
    assert table_rows(tmp_path / "learnt-spark", "records") == table_rows(tmp_path / "learnt-one", "records")
    assert sorted(p.name for p in (tmp_path / "learnt-spark" / "schemas").iterdir()) == ["1.json", "2.json"]
