"""Every bundled sample as the analysis tests decode it: one dataset per sample (a table that holds for the
union of captures may hide a difference in one), with its records, and with its schemas and TLS keys where it
has them."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


def captures() -> list[tuple[str, list[Path], dict]]:
    """(name, inputs, write_dataset options) of every sample."""
    out = [(p.stem, [p], {}) for p in sorted(SAMPLES.glob("*.pcap"))]
    out += [(f"findings/{p.stem}", [p], {}) for p in sorted((SAMPLES / "findings").glob("*.pcap"))]
    for folder in sorted(p for p in (SAMPLES / "payloads").iterdir() if p.is_dir()):
        schemas = folder / "schemas"
        out.append((f"payloads/{folder.name}", sorted(folder.glob("*.pcap")),
                    {"schemas": str(schemas)} if schemas.is_dir() else {}))
    for p in sorted((SAMPLES / "tls").glob("*.pcap")):
        keys = p.with_suffix(".keys")
        if not p.name.endswith(".plain.pcap") and keys.exists():
            out.append((f"tls/{p.stem}", [p], {"tls_keylog": str(keys)}))
    return out


CAPTURES = captures()
NAMES = [name for name, _, _ in CAPTURES]


def decode_all(root: Path) -> dict[str, Path]:
    """Each sample of :data:`CAPTURES` decoded under ``root``: its dataset directory by name."""
    import kdissect
    out = {}
    for name, inputs, options in CAPTURES:
        out[name] = root / name.replace("/", "-")
        kdissect.write_dataset([str(p) for p in inputs], out[name], records=True, **options)
    return out
