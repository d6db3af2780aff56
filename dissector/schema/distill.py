"""Distil Kafka's protocol reference into ``kafka_facts.json``: the facts every generator reads.

Usage (from the repository root)::

    python -m dissector.schema.distill PATH/TO/kafka-protocol           # rewrite kafka_facts.json
    python -m dissector.schema.distill PATH/TO/kafka-protocol --check   # exit 1 if it is not what the specs give

``PATH/TO/kafka-protocol`` is the reference folder of Kafka's JSON message specs (one folder per
release under ``messages/``) and its error tables (``errors.tsv``, ``errors-retriable.tsv``). A clone
of this repository does not need it: the facts file is committed, and the generators
(``dissector.schema.generate``, ``analysis.generate_retriable``,
``analysis.findings.gen_removed_versions``) read only that file.

What is kept is facts, never prose: per message spec its name, kind, api key, valid and flexible
versions, listeners and whether its newest version is unstable; per field its name, type,
versions, nullable and tagged versions, tag, default, entity type, flexible override and nested
fields; common structs; per error code its name and whether Kafka's Java client retries it. Spec
keys that no generator reads (``about``, ``ignorable``, ``mapKey``, ...) are dropped; a key this
script does not know stops it, so a new fact in a newer spec is never lost silently.

The newest release is kept whole. An older release is kept for the history newer ones removed
(Kafka 4.x dropped versions older clients and clusters still speak): its specs keep their fields
only where they define a version no newer release defines, and otherwise only their version facts.
The file records each release's label and a SHA-256 of the spec files it came from.

This script is never imported by the dissector at run time.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

FACTS = Path(__file__).with_name("kafka_facts.json")

# Newest first. A release's label says which Kafka it is; the folder under messages/ holds its specs.
RELEASES = {
    "4.4": "Apache Kafka 4.4 message specs (the 4.4 branch of 2026-08-21): the newest versions and api keys",
    "3.9": "Apache Kafka 3.9 message specs: the whole version history from v0, and the inter-broker apis 4-7",
}
ERRORS_LABEL = ("error codes and names as of Apache Kafka 4.4; retriable: whether Kafka's Java client retries "
                "the error (its exception derives from RetriableException), read from Kafka's Errors.java of late "
                "2024, null for codes added since")

SPEC_KEYS = ("name", "type", "apiKey", "validVersions", "flexibleVersions", "listeners", "latestVersionUnstable")
SPEC_DROPPED = {"deprecatedVersions"}
# A field is written as a row in this column order, trailing absent values cut: rows are a third of
# the size of keyed objects. An absent key and a null are the same (the specs hold no nulls).
FIELD_COLUMNS = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
                 "entityType", "flexibleVersions", "fields")
FIELD_DROPPED = {"about", "ignorable", "mapKey", "zeroCopy"}
COMMON_DROPPED = {"versions"}
OPEN = 0x7FFF


def load_spec(path: Path) -> dict:
    # The specs carry // comments, which JSON does not allow.
    return json.loads(re.sub(r"(?m)^\s*//.*$", "", path.read_text()))


def message_key(spec: dict) -> object:
    """What a spec defines: (api key, kind) for a request or response, its name for anything else.

    By api key, not name: an api renamed between releases (74 was ListClientMetricsResources in 3.9,
    is ListConfigResources in 4.4) is still one version history.
    """
    if spec["type"] in ("request", "response"):
        return (spec["apiKey"], spec["type"])
    return spec["name"]


def version_set(text: str | None) -> set[int]:
    """'0+', '3-5', '7', 'none' -> the versions named (an open range up to 0x7fff)."""
    if text is None or text == "none":
        return set()
    if text.endswith("+"):
        return set(range(int(text[:-1]), OPEN + 1))
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def _unknown(obj: dict, known: set[str], where: str) -> None:
    extra = set(obj) - known
    if extra:
        raise SystemExit(f"error: {where} has keys this script does not know: {sorted(extra)}; "
                         "decide whether they are facts a generator needs, then add them to distill.py")


def field_rows(fields: list[dict], where: str) -> list[list]:
    rows = []
    for f in fields:
        _unknown(f, set(FIELD_COLUMNS) | FIELD_DROPPED, f"{where}.{f.get('name')}")
        row = [field_rows(f["fields"], f"{where}.{f['name']}") if col == "fields" and col in f else f.get(col)
               for col in FIELD_COLUMNS]
        while row and row[-1] is None:
            row.pop()
        rows.append(row)
    return rows


def spec_facts(spec: dict, with_fields: bool, where: str) -> dict:
    _unknown(spec, set(SPEC_KEYS) | SPEC_DROPPED | {"fields", "commonStructs"}, where)
    out = {k: spec[k] for k in SPEC_KEYS if k in spec}
    if with_fields:
        out["fields"] = field_rows(spec.get("fields", []), where)
        commons = []
        for c in spec.get("commonStructs", []):
            _unknown(c, {"name", "fields"} | COMMON_DROPPED, f"{where}.{c['name']}")
            commons.append({"name": c["name"], "fields": field_rows(c["fields"], f"{where}.{c['name']}")})
        if commons:
            out["commonStructs"] = commons
    return out


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def distill(root: Path) -> dict:
    releases, messages = {}, {}
    newer: dict[object, set[int]] = {}     # versions defined by newer releases, per message
    for release, label in RELEASES.items():
        paths = sorted((root / "messages" / release).glob("*.json"))
        if not paths:
            raise SystemExit(f"error: {root / 'messages' / release} holds no message specs")
        releases[release] = {"label": label, "spec_files": len(paths), "sha256": _digest(paths)}
        here: dict[object, set[int]] = {}
        messages[release] = {}
        for path in paths:
            spec = load_spec(path)
            key = message_key(spec)
            versions = version_set(spec["validVersions"])
            owns = bool(versions - newer.get(key, set()))
            messages[release][path.stem] = spec_facts(spec, owns or not newer, f"{release}/{path.name}")
            here.setdefault(key, set()).update(versions)
        for key, versions in here.items():
            newer.setdefault(key, set()).update(versions)
    names = _tsv(root / "errors.tsv")
    retriable = _tsv(root / "errors-retriable.tsv")
    if [row[:2] for row in retriable] != names:
        raise SystemExit("error: errors.tsv and errors-retriable.tsv disagree on codes or names")
    errors = [[int(code), name, {"true": True, "false": False}.get(value)] for code, name, value in retriable]
    return {
        "format": "kafka-dissect protocol facts, 1",
        "generated_by": "python -m dissector.schema.distill PATH/TO/kafka-protocol",
        "releases": releases,
        "errors_source": {"label": ERRORS_LABEL,
                          "sha256": _digest([root / "errors.tsv", root / "errors-retriable.tsv"])},
        "field_columns": list(FIELD_COLUMNS),
        "errors": errors,
        "messages": messages,
    }


def _tsv(path: Path) -> list[list[str]]:
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    return [[cell.strip() for cell in row] for row in rows]


def render(facts: dict) -> str:
    """Compact JSON, one error or message spec per line, so a new Kafka release diffs by message."""
    def one(value) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    lines = ["{"]
    for key, value in facts.items():
        if key == "errors":
            lines.append('"errors":[')
            lines.append(",\n".join(one(row) for row in value))
            lines.append("],")
        elif key == "messages":
            lines.append('"messages":{')
            releases = []
            for release, specs in value.items():
                body = ",\n".join(f"{one(name)}:{one(spec)}" for name, spec in specs.items())
                releases.append(f"{one(release)}:{{\n{body}\n}}")
            lines.append(",\n".join(releases))
            lines.append("}")
        else:
            lines.append(f"{one(key)}:{one(value)},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def load(path: Path = FACTS) -> dict:
    """The facts file with every field row turned back into the spec's keyed form."""
    facts = json.loads(path.read_text())
    columns = facts["field_columns"]

    def fields(rows: list[list]) -> list[dict]:
        out = []
        for row in rows:
            f = {col: value for col, value in zip(columns, row) if value is not None}
            if "fields" in f:
                f["fields"] = fields(f["fields"])
            out.append(f)
        return out

    for specs in facts["messages"].values():
        for spec in specs.values():
            if "fields" in spec:
                spec["fields"] = fields(spec["fields"])
            for c in spec.get("commonStructs", ()):
                c["fields"] = fields(c["fields"])
    return facts


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--check"]
    if len(args) != 1:
        print("usage: python -m dissector.schema.distill PATH/TO/kafka-protocol [--check]", file=sys.stderr)
        return 2
    root = Path(args[0])
    if not (root / "messages").is_dir():
        print(f"error: {root} has no messages/ folder (pass Kafka's protocol reference folder)", file=sys.stderr)
        return 2
    text = render(distill(root))
    if "--check" in argv:
        if FACTS.is_file() and FACTS.read_text() == text:
            print(f"{FACTS}: matches {root}")
            return 0
        print(f"{FACTS} is not what {root} gives: run `python -m dissector.schema.distill {root}`", file=sys.stderr)
        return 1
    FACTS.write_text(text)
    print(f"wrote {FACTS} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
