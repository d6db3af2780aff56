"""The KIP-896 table is generated from the Kafka facts file and up to date."""

from __future__ import annotations

import json

from analysis.findings import gen_removed_versions as gen
from analysis.findings._removed_versions import MIN_VERSION_4X


def test_generated_table_is_up_to_date():
    facts = json.loads(gen.FACTS.read_text())
    assert gen.OUT.read_text() == gen.render(gen.removed(facts)), \
        "_removed_versions.py is stale: run `python -m analysis.findings.gen_removed_versions`"


def test_known_kip_896_removals():
    assert MIN_VERSION_4X["Produce"] == 3 and MIN_VERSION_4X["Fetch"] == 4
    assert "JoinGroup" not in MIN_VERSION_4X and "ApiVersions" not in MIN_VERSION_4X
