"""TLS samples through the dataset: what the clients reported, the same as the plaintext hop, tls_* columns."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import kdissect

from tests.kdissect.conftest import SAMPLES, read_table
from tests.kdissect.test_samples import _delivered

TLS = SAMPLES / "tls"
EXPECTED = sorted(TLS.glob("*.expected.json"))
NAMES = [p.name.removesuffix(".expected.json") for p in EXPECTED]


@pytest.fixture(scope="module")
def tls_dataset(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("tls") / "out"
    pcaps = [TLS / f"{n}.pcap" for n in NAMES] + [TLS / f"{n}.plain.pcap" for n in NAMES]
    kdissect.write_dataset(pcaps, out, tls_keylog=[TLS / f"{n}.keys" for n in NAMES])
    return {t: read_table(out, t).to_pandas() for t in ("exchanges", "partitions", "anomalies")}


@pytest.mark.parametrize("name", NAMES)
def test_tls_sample_decodes_to_what_the_clients_reported(tls_dataset: dict[str, pd.DataFrame], name: str) -> None:
    exp = json.loads((TLS / f"{name}.expected.json").read_text())
    ex = tls_dataset["exchanges"]
    mine = ex[ex.capture == exp["pcap"]]
    assert set(exp["client_ids"]) <= set(mine.client_id.dropna())
    assert tls_dataset["anomalies"][tls_dataset["anomalies"].capture == exp["pcap"]].empty
    delivered = _delivered(tls_dataset, exp["pcap"])
    got = delivered.groupby(["topic", "partition"]).record_count.sum().astype(int).to_dict()
    want = {(t, int(p)): s["count"] for t, parts in exp["delivered_totals"].items() for p, s in parts.items()}
    assert got == want
    assert mine.tls_version.notna().all() and (mine.tls_sni == "broker.kafka.test").all()
    assert mine.tls_cipher.str.startswith("TLS_").all()
    # Every exchange paired (the recorder's consumers wait for their in-flight Fetch before closing).
    assert (mine.status == "ok").all()


def _shape(df: pd.DataFrame) -> Counter:
    return Counter(zip(df.api_name, df.api_version, df.client_id, df.error_code.fillna(-1)))


@pytest.mark.parametrize("name", NAMES)
def test_tls_hop_and_plaintext_hop_carry_the_same_exchanges(tls_dataset: dict[str, pd.DataFrame],
                                                             name: str) -> None:
    ex = tls_dataset["exchanges"]
    tls, plain = ex[ex.capture == f"{name}.pcap"], ex[ex.capture == f"{name}.plain.pcap"]
    assert plain.tls_version.isna().all() and plain.tls_cipher.isna().all() and plain.tls_sni.isna().all()
    assert (plain.status == "ok").all()
    assert _shape(tls) == _shape(plain)
    parts = tls_dataset["partitions"]
    produced = parts[(parts.api_name == "Produce") & (parts.direction == "request")]

    def records(capture: str) -> dict:
        p = produced[produced.capture == capture]
        return p.groupby(["topic", "partition"]).record_count.sum().to_dict()
    assert records(f"{name}.pcap") == records(f"{name}.plain.pcap")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kdissect", *args], capture_output=True, text=True,
                          cwd=SAMPLES.parent, timeout=120)


def test_an_unreadable_key_log_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    r = _cli("decode", str(TLS / "tls13.pcap"), "-o", str(tmp_path / "out"), "--tls-keylog",
             str(tmp_path / "missing.keys"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.keys" in r.stderr   # bad use
    assert not (tmp_path / "out").exists()


def test_summary_says_how_to_get_keys_and_never_prints_them(tmp_path: Path) -> None:
    r = _cli("decode", str(TLS / "tls13.pcap"), "-o", str(tmp_path / "out"))
    assert r.returncode == 0
    assert "10 TLS connections not decoded" in r.stdout and "jSSLKeyLog" in r.stdout
    secrets = [ln.split()[2] for ln in (TLS / "tls13.keys").read_text().splitlines() if ln and ln[0] != "#"]
    r = _cli("show", str(TLS / "tls13.pcap"), "-V", "--tls-keylog", str(TLS / "tls13.keys"))
    assert r.returncode == 0 and "ApiVersions" in r.stdout
    out = tmp_path / "out2"
    _cli("decode", str(TLS / "tls13.pcap"), "-o", str(out), "--records", "--tls-keylog", str(TLS / "tls13.keys"))
    blob = b"".join(p.read_bytes() for p in out.rglob("*.parquet")).hex() + r.stdout + r.stderr
    assert not any(s in blob for s in secrets)


def test_python_api_takes_a_key_log() -> None:
    rows = [e.row() for e in kdissect.read_pcap(TLS / "tls12-cbc.pcap", tls_keylog=TLS / "tls12-cbc.keys")]
    assert len(rows) >= 70 and {r["tls_version"] for r in rows} == {"TLS 1.2"}
    assert {r["tls_cipher"] for r in rows} == {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
                                               "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"}


def _compare_counts(text: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(
        r"^(messages compared|agreeing|disagreeing|only kdissect|only wireshark)\s+(\d+)", text, re.M)}


@pytest.mark.slow
def test_compare_gives_tshark_the_keys_and_both_agree_as_on_plaintext() -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (apt-get install tshark)")
    tls = _compare_counts(_cli("compare", str(TLS / "tls13.pcap"), "--tls-keylog", str(TLS / "tls13.keys")).stdout)
    plain = _compare_counts(_cli("compare", str(TLS / "tls13.plain.pcap")).stdout)
    # Wireshark decrypts every record too: nothing only one side decoded, the same disagreements
    # (its own version limits) as on the plaintext hop, on as many messages.
    assert tls["only kdissect"] == tls["only wireshark"] == 0
    assert tls["disagreeing"] == plain["disagreeing"]
    assert tls["messages compared"] == plain["messages compared"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="live capture needs root")
def test_live_follows_a_key_log_the_clients_are_writing(tmp_path: Path) -> None:
    """``kdissect live --tls-keylog`` while kafka-python and aiokafka write that key log (record_tls's
    scenario, real TLS through the forwarder): every connection decrypted, as the clients reported."""
    sys.path.insert(0, str(SAMPLES))
    import record_tls as rt

    from tests.brokers import in_netns, netns

    keylog, out, work = tmp_path / "keys.log", tmp_path / "out", tmp_path / "work"
    keylog.write_text("")                                 # created empty: the clients append as they connect
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(SAMPLES.parent)}
    with netns(f"kd-i14-live-{os.getpid() % 10000}", mtu=1500) as ns, rt.netns_hosts(ns), \
            rt.tansu_advertising(ns, f"tcp://{rt.HOST}:9093", tmp_path / "tansu.log"):
        live = subprocess.Popen(in_netns(ns, [sys.executable, "-m", "kdissect", "live", "-i", "lo", "-o", str(out),
                                              "--tls-keylog", str(keylog)]),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=SAMPLES.parent)
        assert live.stderr is not None
        first = live.stderr.readline()
        assert first.startswith("listening on lo"), first + live.stderr.read()
        result = tmp_path / "result.json"
        rc = subprocess.call(in_netns(ns, [sys.executable, str(SAMPLES / "record_tls.py"), "--client", "tls13",
                                           "--result", str(result), "--keylog", str(keylog), "--workdir", str(work)]),
                             env=env, timeout=300, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert rc == 0
        time.sleep(2)
        live.send_signal(signal.SIGINT)
        _, err = live.communicate(timeout=120)
    assert live.returncode == 0 and "Traceback" not in err, err
    report = json.loads(result.read_text())
    ex = read_table(out, "exchanges").to_pandas()
    an = read_table(out, "anomalies").to_pandas()
    assert an[an.kind.str.startswith("tls")].empty, an.detail.tolist()
    # lo carries both hops: client <-> forwarder (TLS, 9093) and forwarder <-> tansu (plaintext, 9092).
    tls, plain = ex[ex.broker_port == 9093], ex[ex.broker_port == 9092]
    assert (tls.tls_version == "TLS 1.3").all() and plain.tls_version.isna().all()
    assert len(tls) >= 70 and len(tls) == len(plain)
    parts = read_table(out, "partitions").to_pandas()
    parts = parts[parts.connection.isin(set(tls.connection))]
    produced = parts[(parts.api_name == "Produce") & (parts.direction == "request")]
    got = produced.groupby(["topic", "partition"]).record_count.sum().astype(int).to_dict()
    want: dict = {}
    for c in report["clients"]:
        for topic, ps in c.get("delivered", {}).items():
            for p, s in ps.items():
                want[(topic, int(p))] = want.get((topic, int(p)), 0) + s["count"]
    assert got == want


def test_parallel_decode_decrypts_each_share(tmp_path: Path) -> None:
    from kdissect.run.decode import decode_files
    from kdissect.run.source import DecodeOptions
    options = DecodeOptions(tls_keylog=(str(TLS / "tls13.keys"),))
    one = decode_files([TLS / "tls13.pcap"], tmp_path / "one", options)
    two = decode_files([TLS / "tls13.pcap"], tmp_path / "two", options, jobs=2, min_share_bytes=0)
    assert two.counts.exchanges == one.counts.exchanges >= 70 and not two.counts.anomalies
    cols = ["connection", "correlation_id", "api_key", "status", "tls_version", "tls_cipher", "tls_sni"]
    rows = [read_table(tmp_path / d, "exchanges").to_pandas()[cols].sort_values(cols[:2]).reset_index(drop=True)
            for d in ("one", "two")]
    assert rows[0].equals(rows[1])
