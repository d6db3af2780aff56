"""Which files a command line's INPUT arguments name."""

from __future__ import annotations

import os
from pathlib import Path

from capture import capture_sets

from kdissect.errors import UsageError

Capture = tuple[Path, ...]   # one capture: a file, or the files of a rotated capture in time order

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
                raise UsageError(f"{p}: no capture files (*{', *'.join(CAPTURE_SUFFIXES)}) in this directory")
        elif p.exists():
            found = [p]
        else:
            raise UsageError(f"{p}: no such file or directory")
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    if not out:
        raise UsageError("no input given")
    return out


def captures(inputs: list[str | os.PathLike[str]], rotated: bool = True) -> list[Capture]:
    """The captures the inputs name: with ``rotated``, files that continue one another
    (:func:`capture.rotation.capture_sets`) are one capture; otherwise every file is its own."""
    files = capture_files(inputs)
    return capture_sets(files) if rotated else [(f,) for f in files]


def describe(capture: Capture) -> str:
    """A capture as messages name it: its file, or its first file and how many follow."""
    first = capture[0].name
    return first if len(capture) == 1 else f"{first} (+{len(capture) - 1} rotated files)"
