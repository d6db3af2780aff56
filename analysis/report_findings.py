"""The report's opening section, "What to look at": the findings worst first, each linked to where it shows.

Pure HTML from the ``findings`` rows (plain dicts, as in the results JSON), so
the report stays free of Spark. Every value from the wire is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

RANK = {"critical": 0, "warning": 1, "info": 2}

# Where in the report a finding can be seen: (anchor, label). Table anchors are ``t-<table>``;
# section anchors for the group timelines and the lag chart. Unlisted families fall back by prefix.
WHERE: dict[str, tuple[str, str]] = {
    "producer.tiny_batches": ("t-producers", "producers: records per batch"),
    "producer.uncompressed": ("t-throughput_by_topic", "throughput by topic"),
    "producer.large_batches": ("t-latency_by_size", "Produce latency by request size"),
    "producer.acks": ("t-producers", "producers"),
    "producer.not_idempotent": ("t-producers", "producers"),
    "producer.duplicates": ("t-throughput_by_topic", "throughput by topic"),
    "client.error_storm": ("errors", "errors over time"),
    "client.metadata_storm": ("t-clients", "clients"),
    "client.connection_churn": ("t-clients", "clients: connections"),
    "client.auth_failures": ("t-errors", "errors"),
    "client.no_client_id": ("t-clients", "clients"),
    "client.legacy_format": ("t-api_versions", "api versions"),
    "client.old_versions": ("t-api_versions", "api versions"),
    "consumer.commit_per_message": ("t-offset_commits", "committed offsets"),
    "consumer.busy_polling": ("t-idle_fetches", "idle fetches"),
    "consumer.lag_growing": ("lag", "lag per partition"),
    "broker.slow": ("t-latency_by_broker", "latency by broker"),
    "broker.throttling": ("t-latency_by_client", "latency by client"),
    "broker.unanswered": ("t-clients", "clients: unpaired requests"),
    "topic.hot_partition": ("t-throughput_by_topic", "throughput by topic-partition"),
}
BY_FAMILY = {"producer": ("t-producers", "producers"), "client": ("t-clients", "clients"),
             "consumer": ("lag", "consumer lag"), "group": ("groups", "rebalance timeline"),
             "broker": ("latency", "latency"), "topic": ("throughput", "throughput")}

STYLE = """<style>
.kd-look{list-style:none;margin:0;padding:0}
.kd-look li{border-left:4px solid #999;background:#fafafa;margin:0 0 .6em;padding:.5em .8em}
.kd-look li.critical{border-color:#c62828}.kd-look li.warning{border-color:#ef6c00}
.kd-look li.info{border-color:#1565c0}
.kd-look .sev{font-weight:bold;text-transform:uppercase;font-size:.8em;margin-right:.5em}
.kd-look li.critical .sev{color:#c62828}.kd-look li.warning .sev{color:#ef6c00}
.kd-look li.info .sev{color:#1565c0}
.kd-look p{margin:.25em 0}.kd-look code{font-size:.85em;word-break:break-all}
</style>"""


def where(finding: str) -> tuple[str, str]:
    return WHERE.get(finding) or BY_FAMILY.get(finding.split(".", 1)[0], ("t-findings", "findings table"))


def ordered(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Worst first, then earliest."""
    return sorted(rows, key=lambda r: (RANK.get(str(r.get("severity")), 3), str(r.get("first_ts") or ""),
                                       str(r.get("finding") or "")))


def _evidence(raw: object) -> str:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return str(raw)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={json.dumps(v) if isinstance(v, (list, dict)) else v}" for k, v in value.items())
    return str(value)


def what_to_look_at(rows: Sequence[Mapping[str, Any]], limit: int = 200) -> str:
    """The list, or an empty string when there are no findings."""
    if not rows:
        return ""
    e = html.escape
    items = []
    for r in ordered(rows)[:limit]:
        sev = str(r.get("severity") or "info")
        anchor, label = where(str(r.get("finding") or ""))
        ev = _evidence(r.get("evidence"))
        items.append(
            f'<li class="{e(sev) if sev in RANK else "info"}" data-finding="{e(str(r.get("finding")))}">'
            f'<p><span class="sev">{e(sev)}</span><b>{e(str(r.get("finding")))}</b> '
            f'{e(str(r.get("subject_kind") or ""))} <b>{e(str(r.get("subject") or ""))}</b>'
            f' &mdash; <a href="#{e(anchor)}">see {e(label)}</a></p>'
            f'<p>{e(str(r.get("explanation") or ""))}</p>'
            f'<p><i>Look at:</i> {e(str(r.get("advice") or ""))}</p>'
            + (f'<p><i>Evidence:</i> {e(ev[:600])}</p>' if ev else "")
            + (f'<p><i>Exchanges:</i> <code>{e(str(r["show"]))}</code></p>' if r.get("show") else "")
            + "</li>")
    more = f"<p>{len(rows) - limit} more in the table below.</p>" if len(rows) > limit else ""
    return STYLE + '<ol class="kd-look">' + "".join(items) + "</ol>" + more
