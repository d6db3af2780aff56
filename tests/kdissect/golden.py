"""Expected decoded output of each sample: ``samples/<name>.exchanges.tsv``.

One line per row of the exchanges table, rendered from the Parquet dataset that
``kdissect decode`` writes, so the files pin what users get. Regenerate after a
deliberate change, and read the diff before committing it:

    python -m tests.kdissect.golden --write
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow.dataset as ds

from kdissect import write_dataset

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
FINDINGS_SAMPLES = SAMPLES / "findings"  # misconfigured clients, recorded by samples/record_findings.py

COLUMNS = ("connection", "api_name", "api_version", "correlation_id", "client_id", "status", "error_name",
           "request_bytes", "response_bytes", "latency_ms", "inferred")


def sample_pcaps() -> list[Path]:
    return sorted(SAMPLES.glob("*.pcap")) + sorted(FINDINGS_SAMPLES.glob("*.pcap"))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render(outdir: Path) -> str:
    """The exchanges table of a decoded dataset as stable, diff-friendly text."""
    table = ds.dataset(outdir / "exchanges", format="parquet").to_table(
        columns=[*COLUMNS, "request_ts", "response_ts"])
    rows = table.to_pylist()
    rows.sort(key=lambda r: (r["request_ts"] or r["response_ts"], r["connection"], r["correlation_id"]))
    lines = ["\t".join(COLUMNS)]
    lines += ["\t".join(_cell(r[c]) for c in COLUMNS) for r in rows]
    return "\n".join(lines) + "\n"


def decode_sample(pcap: Path, outdir: Path) -> str:
    write_dataset([pcap], outdir)
    return render(outdir)


def golden_path(pcap: Path) -> Path:
    return pcap.with_suffix(".exchanges.tsv")


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for pcap in sample_pcaps():
        with tempfile.TemporaryDirectory() as tmp:
            golden_path(pcap).write_text(decode_sample(pcap, Path(tmp)))
        print(f"wrote {golden_path(pcap).relative_to(SAMPLES.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
