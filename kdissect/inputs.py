"""Which files a command line's INPUT arguments name."""

from __future__ import annotations

import os
from pathlib import Path

from kdissect.errors import KdissectError

# What a directory is searched for; a file named explicitly is tried whatever its name.
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")


def capture_files(inputs: list[str | os.PathLike[str]]) -> list[Path]:
    """Files named, plus capture files found under directories named; in a stable order."""
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in inputs:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(CAPTURE_SUFFIXES))
            if not found:
                raise KdissectError(f"{p}: no capture files (*{', *'.join(CAPTURE_SUFFIXES)}) in this directory")
        elif p.exists():
            found = [p]
        else:
            raise KdissectError(f"{p}: no such file or directory")
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    if not out:
        raise KdissectError("no input given")
    return out
