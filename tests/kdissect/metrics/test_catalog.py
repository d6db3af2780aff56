"""The catalog is what the README's table, the alert rules and the Grafana dashboard name."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kdissect.metrics import catalog as C

from ..conftest import REPO

DASHBOARD = REPO / "dashboards" / "kdissect-live.json"
ALERTS = REPO / "dashboards" / "kdissect-alerts.yml"
_NAME = re.compile(r"\b(kafka_\w+|kdissect_\w+)")
_SUFFIX = re.compile(r"_(bucket|sum|count|created)$")


def _exposed() -> set[str]:
    return {m.exposed for m in C.METRICS}


def _named(expr: str) -> set[str]:
    names = set()
    for n in _NAME.findall(expr):
        base = _SUFFIX.sub("", n)
        names.add(base if base in {m.name for m in C.METRICS if m.kind == C.HISTOGRAM} else n)
    return names


def _dashboard_exprs() -> list[str]:
    return [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]]


def test_readme_table_lists_every_metric() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Live metrics"):readme.index("## Python API")]
    listed = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    assert listed == _exposed()
    for m in C.METRICS:
        assert f"`{m.otel}`" in section


def test_dashboard_and_alerts_name_only_exported_metrics() -> None:
    exprs = _dashboard_exprs()
    names = set().union(*map(_named, exprs))
    assert names and names <= _exposed() | {C.DURATION.name}
    alerts = _named(ALERTS.read_text())
    assert {"kafka_request_duration_seconds", "kafka_consumer_lag_records"} <= alerts <= _exposed() | {C.DURATION.name}


def test_promtool_accepts_the_alerts_and_every_dashboard_query(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed: apt-get install prometheus")
    p = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    # Each dashboard query as a recording rule: promtool parses them all. Grafana's $__rate_interval
    # is a Grafana variable, given a value here.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"kdissect:panel_query_{i}", "expr": e.replace("$__rate_interval", "1m")}
        for i, e in enumerate(_dashboard_exprs())]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))
    p = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
