"""Decoding each sample gives exactly its expected rows (``samples/<name>.exchanges.tsv``).

The expected files were checked against the clients' own reports (test_samples)
and against Wireshark where it decodes the version (``kdissect compare``); this
test pins them, so any change in what users get shows up as a diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kdissect.golden import decode_sample, golden_path, sample_pcaps

PCAPS = sample_pcaps()


@pytest.mark.parametrize("pcap", PCAPS, ids=[p.stem for p in PCAPS])
def test_sample_decodes_to_its_expected_rows(pcap: Path, tmp_path: Path) -> None:
    expected = golden_path(pcap).read_text()
    assert decode_sample(pcap, tmp_path) == expected
