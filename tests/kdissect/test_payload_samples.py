"""Record payloads of real serializers (samples/payloads/, samples/record_payloads.py) decode to exactly
what the producers were given, in every codec, in the compiled build and in pure Python."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

import kdissect
from kdissect.commands.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples" / "payloads"
CODECS = {"none", "gzip", "snappy", "lz4", "zstd"}
UTC = dt.timezone.utc


def sample(name: str) -> tuple[Path, Path, dict]:
    folder = SAMPLES / name
    return folder / f"{name}.pcap", folder / "schemas", json.loads((folder / "truth.json").read_text())


def expected(value: object) -> object:
    """A producer's input as the README's "Record payloads" says it is rendered."""
    if isinstance(value, dict):
        if "$decimal" in value:
            return value["$decimal"]
        if "$bytes" in value:
            return value["$bytes"]
        if "$date" in value:
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value["$date"])).isoformat()
        if "$timestamp-millis" in value:
            t = dt.datetime.fromtimestamp(value["$timestamp-millis"] / 1000, UTC)
            return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if t.microsecond else "%Y-%m-%dT%H:%M:%SZ")
        if "$branch" in value:
            return {value["$branch"]: expected(value["value"])}
        return {k: expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expected(v) for v in value]
    return value


def table(out: Path, name: str) -> list[dict]:
    return ds.dataset(out / name).to_table().to_pylist()


def decode(out: Path, pcap: Path, *args: str) -> None:
    assert main(["decode", str(pcap), "-o", str(out), "-q", "-j", "1", "--record-bytes", *args]) == 0


def check_truth(rows: list[dict], truth: dict, key_format: str, keys: bool = True) -> dict[str, int]:
    """Every record of the truth's topics decodes to its producer's input: Fetch responses by offset,
    Produce requests as the same values per topic (``keys``: their keys too, from the kept bytes).
    Returns the decoded records per direction."""
    want = {(r["topic"], r["partition"], r["offset"]): r for r in truth["records"] if not r.get("expect")}
    topics = {r["topic"] for r in want.values()}
    seen = {"request": 0, "response": 0}
    produced: dict[str, list] = {}
    for row in rows:
        if row["topic"] not in topics:
            continue
        key = row["key"].decode() if row["key"] is not None else None
        if row["value_decoded"] is None:
            continue                            # a broken producer's value (bad-values): checked there
        value = json.loads(row["value_decoded"])
        if row["direction"] == "response":
            r = want[(row["topic"], row["partition"], row["offset"])]
            assert value == expected(r["value"]), (row["topic"], row["offset"])
            if not keys:
                pass
            elif key_format == "avro":
                assert json.loads(row["key_decoded"]) == r["key"]
            else:
                assert key == r["key"] and row["key_format"] == key_format
        else:
            produced.setdefault(row["topic"], []).append(value)
        seen[row["direction"]] += 1
    for topic in topics:
        truth_values = sorted(json.dumps(expected(r["value"]), sort_keys=True) for r in want.values()
                              if r["topic"] == topic)
        assert sorted(json.dumps(v, sort_keys=True) for v in produced[topic]) == truth_values, topic
    return seen


@pytest.mark.parametrize("name,fmt,key_format", [("avro", "avro", "avro"), ("protobuf", "protobuf", "text"),
                                                  ("json", "json", "text")])
def test_every_record_decodes_to_what_its_producer_was_given(tmp_path: Path, name: str, fmt: str,
                                                             key_format: str) -> None:
    pcap, schemas, truth = sample(name)
    decode(tmp_path, pcap, "--schemas", str(schemas))
    rows = table(tmp_path, "records")
    seen = check_truth(rows, truth, key_format)
    n = len(truth["records"])
    assert seen == {"request": n, "response": n}
    assert {r["value_format"] for r in rows if r["topic"].startswith(name[:4])} == {fmt}
    assert not [a for a in table(tmp_path, "anomalies") if a["kind"] == "records_decode"]
    # Every codec carried them (the compression column of the Produce partitions).
    codecs = {p["compression"] for p in table(tmp_path, "partitions")
              if p["api_name"] == "Produce" and p["direction"] == "request" and p["record_count"]}
    assert CODECS <= codecs


def test_framing_without_schemas(tmp_path: Path) -> None:
    pcap, _schemas, truth = sample("avro")
    decode(tmp_path, pcap)
    rows = [r for r in table(tmp_path, "records") if r["topic"].startswith("avro-")]
    ids = json.loads((SAMPLES / "avro" / "schemas" / "2.json").read_text())
    assert rows and all((r["value_schema_id"] is not None or r["value_schema_guid"] is not None)
                        and r["value_format"] is None and r["value_decoded"] is None for r in rows)
    # Prefixed: the id is the value's first 5 bytes; header-framed: the GUID from __value_schema_id.
    for r in rows:
        if r["topic"] == "avro-headers":        # the id needs the schema: only the GUID is on the wire
            assert r["value_schema_guid"] is not None and r["value_schema_id"] is None
        else:
            assert r["value"][0] == 0 and int.from_bytes(r["value"][1:5], "big") == r["value_schema_id"]
    assert ids["schemaType"] == "AVRO"
    assert not [a for a in table(tmp_path, "anomalies") if a["kind"] == "records_decode"]


def test_header_framed_values_decode_by_guid(tmp_path: Path) -> None:
    pcap, schemas, truth = sample("avro")
    decode(tmp_path, pcap, "--schemas", str(schemas))
    rows = [r for r in table(tmp_path, "records") if r["topic"] == "avro-headers"]
    guids = {json.loads(p.read_text())["guid"]: json.loads(p.read_text())["id"] for p in schemas.iterdir()}
    assert rows and all(guids[r["value_schema_guid"]] == r["value_schema_id"] and r["value_format"] == "avro"
                        for r in rows)


def test_mixed_topic_plain_json_beside_framed(tmp_path: Path) -> None:
    pcap, schemas, truth = sample("mixed-json")
    decode(tmp_path, pcap, "--schemas", str(schemas))
    rows = [r for r in table(tmp_path, "records") if r["topic"] == "events"]
    by_offset = {(r["partition"], r["offset"]): r for r in truth["records"]}
    formats = {}
    for r in rows:
        formats.setdefault(r["value_format"], 0)
        formats[r["value_format"]] += 1
        if r["direction"] == "response":
            mine = by_offset[(r["partition"], r["offset"])]
            assert json.loads(r["value_decoded"]) == mine["value"]
            framed = mine["client_id"] == "kd-mixed-registry"
            assert (r["value_schema_id"] is not None) == framed
    assert formats == {"json": 12, "json-text": 12}


def test_schemas_learned_from_the_capture(tmp_path: Path) -> None:
    pcap, schemas, truth = sample("schemas-topic")
    decode(tmp_path, pcap)                      # no --schemas: the _schemas records teach them
    rows = [r for r in table(tmp_path, "records") if r["topic"] == "orders"]
    assert len(rows) == 16 and all(r["value_format"] == "avro" for r in rows)
    check_truth(table(tmp_path, "records"), truth, "text")
    learned = sorted(p.name for p in (tmp_path / "schemas").iterdir())
    assert learned == sorted(p.name for p in schemas.iterdir())
    for p in (tmp_path / "schemas").iterdir():
        mine, theirs = json.loads(p.read_text()), json.loads((schemas / p.name).read_text())
        assert {k: mine[k] for k in ("id", "subject", "version")} == {k: theirs[k] for k in ("id", "subject", "version")}
        assert json.loads(mine["schema"]) == json.loads(theirs["schema"])
    assert {r["value_schema_id"] for r in rows} == {1, 2}


def test_bad_values_each_give_their_anomaly_and_keep_the_rest(tmp_path: Path) -> None:
    pcap, schemas, truth = sample("bad-values")
    decode(tmp_path, pcap, "--schemas", str(schemas))
    rows = [r for r in table(tmp_path, "records") if r["topic"] == "orders"]
    check_truth(rows, truth, "text")
    bad = {(r["partition"], r["offset"]): r["expect"] for r in truth["records"] if r.get("expect")}
    assert sorted(bad.values()) == ["corrupt", "unknown"]
    fetched = {(r["partition"], r["offset"]): r for r in rows if r["direction"] == "response"}
    assert len(fetched) == len(truth["records"])
    for where, what in bad.items():
        r = fetched[where]
        assert r["value_decoded"] is None
        assert r["value_format"] == ("avro" if what == "corrupt" else None)
    details = [a["detail"] for a in table(tmp_path, "anomalies") if a["kind"] == "records_decode"]
    corrupt = [d for d in details if "does not match schema" in d]
    unknown = [d for d in details if "schema id 999 unknown" in d]
    assert corrupt and unknown
    partition, offset = next(k for k, w in bad.items() if w == "corrupt")
    assert any(f"Fetch v16 response corr" in d and f"orders[{partition}]: record at offset {offset}: value" in d
               for d in corrupt)


def test_wrong_schema_gives_an_anomaly_and_keeps_the_rest(tmp_path: Path) -> None:
    pcap, schemas, truth = sample("avro")
    wrong = tmp_path / "schemas"
    shutil.copytree(schemas, wrong)
    # The value schema of avro-none (an Order) replaced by the key's (a string): every such value mismatches.
    victim = next(json.loads(p.read_text()) for p in schemas.iterdir()
                  if json.loads(p.read_text())["subject"] == "avro-none-value")
    key = next(json.loads(p.read_text()) for p in schemas.iterdir()
               if json.loads(p.read_text())["subject"] == "avro-none-key")
    (wrong / f"{victim['id']}.json").write_text(json.dumps({**victim, "schema": key["schema"]}))
    decode(tmp_path / "out", pcap, "--schemas", str(wrong))
    rows = table(tmp_path / "out", "records")
    broken = [r for r in rows if r["topic"] == "avro-none"]
    assert broken and all(r["value_decoded"] is None and r["key_decoded"] is not None for r in broken)
    others = [r for r in rows if r["topic"].startswith("avro-") and r["topic"] != "avro-none"]
    assert others and all(r["value_decoded"] is not None for r in others)
    details = [a["detail"] for a in table(tmp_path / "out", "anomalies") if a["kind"] == "records_decode"]
    assert details and all(f"does not match schema {victim['id']} (avro)" in d and "avro-none[" in d
                           for d in details)


HOSTILE = {                     # what the sample's hostile values and schemas each cost: one anomaly, saying this
    "nested 150,000 deep": "does not match schema 1 (avro): nested more than 200 levels deep at byte 405",
    "cut short": "does not match schema 1 (avro): the value ends at byte 8, where a number was due",
    "a block of 2^40 nulls": "a block of 1099511627776 items with 1 bytes left",
    "100 blocks of 60,000 nulls": "a block of 60000 items with 295 bytes left",
    "a message nested 3,000 deep": "does not match schema 3 (protobuf): kd.hostile.Tree",
    "JSON nested 300 deep": "does not match schema 4 (json): nested more than",
    "JSON nested 100,000 deep, cut": "does not match schema 4 (json): not JSON",
    "its schema: nested 600 levels deep": "schema 900 (avro) not usable: schema nested more than 128 levels deep",
    "its schema: a record that contains itself on every path": "schema 901 (avro) not usable: Avro schema with a "
                                                              "record that contains itself on every path",
    "its schema: 20,000 fields": "schema 902 (avro) not usable: schema with more than 10000 record fields",
    "its schema: not JSON": "schema 903 (avro) not usable: Avro schema text is not JSON",
    "its schema: protoc rejects it": "schema 904 (protobuf) not usable: protoc: ",
}


@pytest.mark.parametrize("build", ["compiled", "pure"])
def test_hostile_values_and_schemas_cost_one_anomaly_each(tmp_path: Path, build: str) -> None:
    """A value of a recursive schema nested 150,000 deep ended the whole decode with SIGSEGV; with it, claims
    of 2^40 items, deep Protobuf and JSON, and hostile _schemas records. Each is one records_decode anomaly
    naming its record, its raw bytes are kept (without --record-bytes), and every value around it decodes."""
    pcap, schemas, truth = sample("hostile-values")
    env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"} | ({"KDISSECT_PURE": "1"} if build == "pure" else {})
    proc = subprocess.run([sys.executable, "-m", "kdissect", "decode", str(pcap), "-o", str(tmp_path), "-q", "-j", "1",
                           "--schemas", str(schemas)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr[-2000:]
    rows = table(tmp_path, "records")
    check_truth(rows, truth, "text", keys=False)
    hostile = {(r["topic"], r["partition"], r["offset"]): r for r in truth["records"] if r.get("expect")}
    assert sorted(r["expect"] for r in hostile.values()) == sorted(HOSTILE)
    fetched = {(r["topic"], r["partition"], r["offset"]): r for r in rows if r["direction"] == "response"}
    details = [a["detail"] for a in table(tmp_path, "anomalies") if a["kind"] == "records_decode"]
    for (topic, partition, offset), want in hostile.items():
        row = fetched[(topic, partition, offset)]
        assert row["value_decoded"] is None
        assert hashlib.sha256(row["value"]).hexdigest() == want["value"]["$sha256"]
        mine = [d for d in details if "Fetch v16 response corr" in d and f"{topic}[{partition}]: record at offset" in d
                and HOSTILE[want["expect"]] in d]
        assert mine and (f"record at offset {offset}: value" in mine[0] or f"up to offset {offset})" in mine[0]), \
            (want["expect"], details)
    good = [r for k, r in fetched.items() if k not in hostile and r["topic"] != "_schemas"]
    assert len(good) == len([r for r in truth["records"] if not r.get("expect")])
    assert all(r["value"] is None and r["value_decoded"] is not None for r in good)
    assert not [a for a in table(tmp_path, "anomalies") if a["kind"] != "records_decode"]
    assert not [d for d in details if "raised" in d]


def test_show_verbose_prints_hostile_values_problems(capsys) -> None:
    pcap, schemas, _truth = sample("hostile-values")
    assert main(["show", str(pcap), "-V", "--schemas", str(schemas), "--api", "Fetch"]) == 0
    out = capsys.readouterr().out
    assert "value (schema 1): does not match schema 1 (avro): nested more than 200 levels deep" in out
    assert "value (schema 902): schema 902 (avro) not usable: schema with more than 10000 record fields" in out


_PURE = """
import sys, kdissect
from pathlib import Path
samples, out = Path(sys.argv[1]), Path(sys.argv[2])
for folder in sorted(p for p in samples.iterdir() if p.is_dir()):
    kdissect.write_dataset([folder / f"{folder.name}.pcap"], out / folder.name, record_bytes=True,
                           schemas=folder / "schemas", jobs=1)
"""


def _rows(out: Path) -> dict:
    return {t: sorted(json.dumps(r, default=str, sort_keys=True) for r in table(out, t))
            for t in ("records", "anomalies")}


@pytest.mark.slow
def test_pure_and_compiled_builds_decode_the_payload_samples_alike(tmp_path: Path) -> None:
    results = {}
    for mode in ("compiled", "pure"):
        env = {k: v for k, v in os.environ.items() if k != "KDISSECT_PURE"}
        if mode == "pure":
            env["KDISSECT_PURE"] = "1"
        proc = subprocess.run([sys.executable, "-c", _PURE, str(SAMPLES), str(tmp_path / mode)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[mode] = {f.name: _rows(f) for f in sorted((tmp_path / mode).iterdir())}
    assert results["compiled"] == results["pure"]
    # And both are the truth.
    for name, key_format in (("avro", "avro"), ("protobuf", "text"), ("json", "text")):
        for mode in ("compiled", "pure"):
            _pcap, _schemas, truth = sample(name)
            check_truth(table(tmp_path / mode / name, "records"), truth, key_format)


def test_python_api_decodes_values(tmp_path: Path) -> None:
    pcap, schemas, truth = sample("json")
    result = kdissect.write_dataset([pcap], tmp_path, schemas=schemas, record_bytes=True)
    assert result.counts.records
    check_truth(table(tmp_path, "records"), truth, "text")
    rows = table(tmp_path, "records")
    assert all(r["value_format"] == "json" and r["value_decoded"] for r in rows if r["topic"].startswith("json-"))


def test_a_schemas_folder_that_does_not_read_is_one_line(tmp_path: Path, capsys) -> None:
    pcap, _schemas, _truth = sample("json")
    assert main(["decode", str(pcap), "-o", str(tmp_path / "o"), "--schemas", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "1.json").write_text("{not json")
    assert main(["decode", str(pcap), "-o", str(tmp_path / "o"), "--schemas", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1.json" in err


def test_show_verbose_prints_decoded_values(tmp_path: Path, capsys) -> None:
    pcap, schemas, truth = sample("protobuf")
    assert main(["show", str(pcap), "--api", "Produce", "-V", "-c", "1", "--schemas", str(schemas)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "value protobuf (schema" in line]
    assert lines
    for line in lines:
        assert json.loads(line.split("): ", 1)[1]) in [r["value"] for r in truth["records"]]


@pytest.mark.parametrize("jobs", [2, 3])
def test_jobs_learn_schemas_across_shares_as_one_process_does(tmp_path: Path, jobs: int) -> None:
    from kdissect.run.decode import decode_files
    from kdissect.run.source import DecodeOptions
    pcap, _schemas, _truth = sample("schemas-topic")
    options = DecodeOptions(records=True)
    decode_files([pcap], tmp_path / "one", options, jobs=1)
    decode_files([pcap], tmp_path / "many", options, jobs=jobs, min_share_bytes=0)
    assert len(list((tmp_path / "many" / "records").glob("*of*.parquet"))) == jobs
    one, many = _rows(tmp_path / "one"), _rows(tmp_path / "many")
    assert many == one
    decoded = [r for r in table(tmp_path / "many", "records") if r["topic"] == "orders"]
    assert decoded and all(r["value_format"] == "avro" for r in decoded)


@pytest.mark.parametrize("argv", [
    ["decode", "x.pcap", "-o", "out", "--schemas", "s/"],
    ["spark-decode", "x.pcap", "-o", "out", "--schema-registry", "http://r:8081"],
    ["live", "-i", "lo", "-o", "out", "--schemas", "s/", "--validate-json"],
    ["doctor", "x.pcap", "--schemas", "s/"],
])
def test_every_command_takes_the_payload_options_and_they_imply_records(argv) -> None:
    from kdissect.commands.parser import build_parser
    from kdissect.run.source import DecodeOptions
    args = build_parser(argv[0]).parse_args(argv)
    options = DecodeOptions.from_args(args)
    assert options.records and not getattr(args, "records", False)
    assert options.schemas in ("s/", None) and (options.schemas or options.schema_registry)


@pytest.mark.parametrize("library, name, args", [("fastavro", "avro", []), ("regex", "json", ["--validate-json"])])
def test_a_missing_codec_library_is_one_line(tmp_path: Path, capsys, monkeypatch, library: str, name: str,
                                             args: list[str]) -> None:
    import builtins
    real = builtins.__import__

    def missing(module, *a, **k):
        if module == library or module.startswith(f"{library}."):
            raise ImportError(module)
        return real(module, *a, **k)
    monkeypatch.setattr(builtins, "__import__", missing)
    monkeypatch.delitem(sys.modules, library, raising=False)
    pcap, schemas, _truth = sample(name)
    assert main(["decode", str(pcap), "-o", str(tmp_path / "o"), "--schemas", str(schemas), *args]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'kafka-dissect[payloads]'" in err and library in err
