"""Generate ``dissector/schema/_generated.py`` from the facts of Kafka's JSON message specs.

Usage (from the repository root)::

    python -m dissector.schema.generate

It reads ``kafka_facts.json`` beside it (distilled from the specs by ``distill.py``), never the
specs themselves. The generated module keeps facts only (names, types, version ranges, tags,
defaults). For each (api key, version) the newest release that defines it wins, so legacy
versions come from the 3.9 specs and the newest versions and api keys from 4.4.

This script is never imported by the dissector at run time.
"""

from __future__ import annotations

import pprint
import re
import sys
from pathlib import Path

from dissector.schema.distill import FACTS, load, message_key

OPEN = 0x7FFF  # upper bound of an open version range like "3+"
OUTPUT = Path(__file__).with_name("_generated.py")


def snake(name: str) -> str:
    """CamelCase spec names to the snake_case used in decoded bodies."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return s.lower()


def parse_versions(text: str | None) -> tuple[int, int] | None:
    """'0+', '3-5', '7', 'none' -> (lo, hi) or None."""
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), OPEN)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def parse_default(ftype: str, raw) -> object:
    base = ftype[2:] if ftype.startswith("[]") else ftype
    if ftype.startswith("[]"):
        return None if raw == "null" else []
    if raw is None:
        if base in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return 0
        if base == "float64":
            return 0.0
        if base == "bool":
            return False
        if base == "string":
            return ""
        if base == "uuid":
            return "AAAAAAAAAAAAAAAAAAAAAA"  # the zero uuid in Kafka's base64 form
        return None
    if raw == "null":
        return None
    if base in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(str(raw), 0)
    if base == "float64":
        return float(raw)
    if base == "bool":
        return str(raw).lower() == "true"
    return str(raw)


class Generator:
    def __init__(self, facts: dict):
        """``facts``: the facts file as :func:`dissector.schema.distill.load` reads it."""
        self.facts = facts
        # Newest first: a version is taken from the first release whose spec defines it.
        self.releases = tuple(facts["releases"])

    def build_fields(self, fields: list[dict], commons: dict[str, dict]) -> tuple:
        out = []
        for f in fields:
            ftype = f["type"]
            is_array = ftype.startswith("[]")
            base = ftype[2:] if is_array else ftype
            children = None
            if base[0].isupper():
                struct_fields = f.get("fields")
                if struct_fields is None:
                    struct_fields = commons[base]["fields"]
                children = self.build_fields(struct_fields, commons)
                kind = "[]struct" if is_array else "struct"
            else:
                kind = ftype
            tag = f.get("tag")
            out.append((
                snake(f["name"]),
                kind,
                parse_versions(f.get("versions")),
                parse_versions(f.get("nullableVersions")),
                parse_versions(f.get("taggedVersions")) if tag is not None else None,
                tag,
                parse_default(ftype, f.get("default")),
                f.get("entityType"),
                parse_versions(f["flexibleVersions"]) if "flexibleVersions" in f else False,
                children,
            ))
        return tuple(out)

    def compile_spec(self, spec: dict) -> tuple:
        commons = {c["name"]: c for c in spec.get("commonStructs", [])}
        return self.build_fields(spec["fields"], commons)   # KeyError: a release kept without its fields

    def specs(self) -> dict[object, dict[str, dict]]:
        """Specs grouped by what they define (:func:`message_key`), then by release."""
        found: dict[object, dict[str, dict]] = {}
        for folder in self.releases:
            for spec in self.facts["messages"][folder].values():
                found.setdefault(message_key(spec), {})[folder] = spec
        return found

    def variants(self, by_folder: dict[str, dict]) -> list[tuple]:
        """Split a message's version history into ranges, each from one spec folder."""
        owner: dict[int, str] = {}
        for folder in self.releases:
            spec = by_folder.get(folder)
            if spec is None:
                continue
            rng = parse_versions(spec["validVersions"])
            if rng is None:
                continue
            for v in range(rng[0], rng[1] + 1):
                owner.setdefault(v, folder)
        out = []
        versions = sorted(owner)
        start = 0
        for i in range(1, len(versions) + 1):
            if i == len(versions) or owner[versions[i]] != owner[versions[start]] or versions[i] != versions[i - 1] + 1:
                folder = owner[versions[start]]
                spec = by_folder[folder]
                flex = parse_versions(spec.get("flexibleVersions"))
                out.append((
                    versions[start],
                    versions[i - 1],
                    folder,
                    flex[0] if flex else None,
                    self.compile_spec(spec),
                ))
                start = i
        return out

    def run(self) -> str:
        specs = self.specs()
        apis: dict[int, dict] = {}
        data: dict[str, list] = {}
        for by_folder in specs.values():
            newest = next(by_folder[f] for f in self.releases if f in by_folder)
            kind = newest["type"]
            if kind in ("request", "response"):
                key = newest["apiKey"]
                name = newest["name"][: -len("Request")] if kind == "request" else newest["name"][: -len("Response")]
                entry = apis.setdefault(key, {"name": name})
                entry[kind] = self.variants(by_folder)
                entry.setdefault("listeners", tuple(sorted(set(newest.get("listeners", ())))))
            else:
                data[newest["name"]] = self.variants(by_folder)
        errors = {code: name for code, name, _retriable in self.facts["errors"]}
        return render(dict(sorted(apis.items())), dict(sorted(data.items())), errors)


HEADER = '''\
# GENERATED by dissector/schema/generate.py from Kafka's JSON message specs
# (Apache Kafka 4.4 for the newest versions, 3.9 for the legacy history). Do not edit;
# run `python -m dissector.schema.generate` (it reads kafka_facts.json) instead.
#
# APIS: api key -> {"name", "listeners", "request", "response"}; each direction is a
#   list of variants (first_version, last_version, spec_release, flexible_from, fields).
# DATA: embedded message name -> variants (consumer protocol, headers, control records).
# A field is (name, type, versions, nullable_versions, tagged_versions, tag, default,
#   entity_type, flexible_override, children); versions are (lo, hi) with hi=0x7fff for
#   "and later", or None for "none".
# ERRORS: error code -> name.
'''


def render(apis: dict, data: dict, errors: dict) -> str:
    fmt = pprint.PrettyPrinter(width=120, compact=True, sort_dicts=False)
    return (
        HEADER
        + "\nAPIS = " + fmt.pformat(apis) + "\n"
        + "\nDATA = " + fmt.pformat(data) + "\n"
        + "\nERRORS = " + fmt.pformat(errors) + "\n"
    )


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python -m dissector.schema.generate (it reads dissector/schema/kafka_facts.json)",
              file=sys.stderr)
        return 2
    OUTPUT.write_text(Generator(load(FACTS)).run())
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
