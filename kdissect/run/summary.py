"""The few lines printed when a decode or a live capture ends."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

from capture.tls.keylog import HOW_TO_GET_KEYS

from kdissect.dataset.writer import Counts

_UNPAIRED = ("no_response", "orphan_response")
# Anomalies of the capture file itself that lose packets: cut short, a corrupt block or record. The
# dataset holds what could be read, and the command says so and exits 3 (kdissect.errors.DamagedInput).
# (A record longer than the packet it claims, caplen_exceeds_wirelen, loses nothing: not counted.)
DAMAGE = ("capture_truncated", "capture_corrupt")


def damage_lines(files: Iterable[Path], anomalies: Mapping[str, int]) -> list[str]:
    """What is damaged in the captures just written, one line each (their anomalies' details, which name
    the file), read back from the anomalies files only when the counts say there is any."""
    if not any(anomalies.get(kind) for kind in DAMAGE):
        return []
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    lines: list[str] = []
    for f in files:
        if f.parent.name != "anomalies":
            continue
        table = pq.read_table(f, columns=["kind", "connection", "detail"])
        mask = pc.and_(pc.is_in(table["kind"], value_set=pa_strings(DAMAGE)), pc.is_null(table["connection"]))
        lines += [d for d in table.filter(mask)["detail"].to_pylist() if d not in lines]
    return lines


def pa_strings(values: Iterable[str]):  # type: ignore[no-untyped-def]
    import pyarrow as pa
    return pa.array(list(values), pa.string())


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def _top(c: Counter[str], limit: int = 8) -> str:
    items = c.most_common()
    text = ", ".join(f"{k} {v}" for k, v in items[:limit])
    if len(items) > limit:
        text += f", +{len(items) - limit} more"
    return f"  ({text})" if text else ""


def tls_not_decoded(counts: Counts) -> int:
    """TLS connections whose Kafka could not be read (no keys, keys that fail, or not Kafka inside): the
    TLS layer reports each once, as a ``tls`` or ``tls_decrypt_failed`` anomaly."""
    return counts.anomalies["tls"] + counts.anomalies["tls_decrypt_failed"]


def tls_advice(counts: Counts) -> str:
    """``10 TLS connections not decoded; decrypt with --tls-keylog FILE, ...``, or "" when there is none:
    the summary's ``tls`` line, and doctor's reason when it found no exchange."""
    n = tls_not_decoded(counts)
    return f"{n:,} TLS connection{'s' if n != 1 else ''} not decoded; {HOW_TO_GET_KEYS}" if n else ""


def _connections(counts: Counts) -> str:
    """``90 Kafka  (of 170 TCP connections with data; 70 TLS not decoded, 10 not taken for Kafka)``.

    ``counts.connections`` are the connections with a row: the Kafka ones, and the TLS ones not decoded
    (their ``tls`` anomaly). ``counts.flows`` has the connections not taken for Kafka, which have no row;
    its ``kafka`` and ``tls`` counts leave out TLS off Kafka ports, so the total is summed from the parts."""
    tls = tls_not_decoded(counts)
    kafka = max(len(counts.connections) - tls, 0)
    other = counts.flows["not_kafka"]
    if not (tls or other):
        return f"{kafka:,} Kafka"
    parts = [f"{tls:,} TLS not decoded"] if tls else []
    parts += [f"{other:,} not taken for Kafka"] if other else []
    return f"{kafka:,} Kafka  (of {kafka + tls + other:,} TCP connections with data; {', '.join(parts)})"


def format_summary(counts: Counts, *, packets: int, bytes_read: int, elapsed: float, outdir: str,
                   tables: list[str], source: str | None = None,
                   rotated: list[tuple[str, int]] | None = None) -> str:
    """``rotated``: (first file, files) of each rotated capture read as one."""
    rate = bytes_read / elapsed if elapsed > 0 else 0.0
    unpaired = Counter({k: counts.statuses[k] for k in _UNPAIRED if counts.statuses[k]})
    other = Counter({k: v for k, v in counts.statuses.items() if k not in _UNPAIRED and k != "ok"})
    if source is None:
        source = f"read {counts.captures} capture{'s' if counts.captures != 1 else ''}"
    lines = [
        f"{source}: {packets:,} packets, "
        f"{human_bytes(bytes_read)} in {elapsed:.1f} s ({human_bytes(rate)}/s)",
    ]
    if rotated:
        sets = ", ".join(f"{name} (+{n - 1})" for name, n in rotated[:4])
        more = f", +{len(rotated) - 4} more" if len(rotated) > 4 else ""
        lines.append(f"rotated      {sum(n for _, n in rotated):,} files read as {len(rotated):,} "
                     f"capture{'s' if len(rotated) != 1 else ''}: {sets}{more}")
    lines += [
        f"connections  {_connections(counts)}",
        f"exchanges    {counts.exchanges:,}{_top(counts.per_api)}",
        f"unpaired     {sum(unpaired.values()):,}{_top(unpaired)}",
    ]
    if other:
        lines.append(f"other status {sum(other.values()):,}{_top(other)}")
    lines += [
        f"errors       {sum(counts.errors.values()):,}{_top(counts.errors)}",
        f"anomalies    {sum(counts.anomalies.values()):,}{_top(counts.anomalies)}",
    ]
    if tls_not_decoded(counts):
        lines.append(f"tls          {tls_advice(counts)}")
    lines += [
        f"partitions   {counts.partitions:,} rows"
        + (f", records {counts.records:,} rows" if "records" in tables else ""),
        f"dataset      {outdir}  ({', '.join(t + '/' for t in tables)})",
    ]
    return "\n".join(lines)
