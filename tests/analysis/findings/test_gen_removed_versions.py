"""The KIP-896 table is generated from Kafka's specs and up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.findings import gen_removed_versions as gen
from analysis.findings._removed_versions import MIN_VERSION_4X

PROTOCOL = Path(__file__).resolve().parents[4] / "shared" / "kafka-protocol"


def test_generated_table_matches_the_specs():
    if not (PROTOCOL / "messages" / "4.4").is_dir():
        pytest.skip("shared/kafka-protocol not present")
    assert gen.OUT.read_text() == gen.render(gen.removed(PROTOCOL))


def test_known_kip_896_removals():
    assert MIN_VERSION_4X["Produce"] == 3 and MIN_VERSION_4X["Fetch"] == 4
    assert "JoinGroup" not in MIN_VERSION_4X and "ApiVersions" not in MIN_VERSION_4X
