"""The report's opening section, "What to look at": the findings folded to one line per rule, worst first,
each line linked to where the rule's findings show and opening to every finding of it.

Pure HTML from the ``findings`` rows (plain dicts, as in the results JSON), so
the report stays free of Spark. Every value from the wire is escaped.
"""

from __future__ import annotations

import html
import json
import re
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
    "share.poison_records": ("t-share_deliveries", "share group deliveries"),
    "share.lock_expired": ("t-share_in_flight", "share group records never acknowledged"),
    "share.session_churn": ("t-share_session_errors", "share session errors"),
    "share.unbalanced": ("t-share_deliveries", "share group deliveries"),
    "broker.slow": ("t-latency_by_broker", "latency by broker"),
    "broker.throttling": ("t-latency_by_client", "latency by client"),
    "broker.unanswered": ("t-clients", "clients: unpaired requests"),
    "topic.hot_partition": ("t-throughput_by_topic", "throughput by topic-partition"),
}
BY_FAMILY = {"producer": ("t-producers", "producers"), "client": ("t-clients", "clients"),
             "consumer": ("lag", "consumer lag"), "group": ("groups", "rebalance timeline"),
             "broker": ("latency", "latency"), "topic": ("throughput", "throughput"),
             "share": ("shares", "share groups")}

STYLE = """<style>
.kd-look{margin:0;padding:0}
.kd-look details.rule{border-left:4px solid #999;background:#fafafa;margin:0 0 .5em;padding:.35em .8em}
.kd-look details.critical{border-color:#c62828}.kd-look details.warning{border-color:#ef6c00}
.kd-look details.info{border-color:#1565c0}
.kd-look summary{cursor:pointer;line-height:1.5}
.kd-look .sev{font-weight:bold;text-transform:uppercase;font-size:.8em;margin-right:.5em}
.kd-look .critical>summary .sev{color:#c62828}.kd-look .warning>summary .sev{color:#ef6c00}
.kd-look .info>summary .sev{color:#1565c0}
.kd-look .n{color:#555}.kd-look .who{color:#333}.kd-look .first{color:#555;margin:.15em 0 0 1.6em}
.kd-look ol{margin:.4em 0 .2em;padding-left:1.6em}.kd-look ol li{margin:0 0 .6em}
.kd-look p{margin:.2em 0}.kd-look code{font-size:.85em;word-break:break-all}
.kd-look details.infos{margin:.6em 0 0}.kd-look details.infos>summary{color:#555}
</style>"""


def where(finding: str) -> tuple[str, str]:
    return WHERE.get(finding) or BY_FAMILY.get(finding.split(".", 1)[0], ("t-findings", "findings table"))


def ordered(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Worst first, then earliest."""
    return sorted(rows, key=lambda r: (RANK.get(str(r.get("severity")), 3), str(r.get("first_ts") or ""),
                                       str(r.get("finding") or "")))


def _evidence_value(raw: object) -> Mapping[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return value if isinstance(value, Mapping) else {}


# Evidence figures that name or configure something rather than measure how much went wrong.
_NOT_A_MEASURE = re.compile(r"id$|_id|epoch|generation|sequence|version|partition|acks|timeout|max_wait|min_bytes")


def _magnitude(r: Mapping[str, Any]) -> float:
    """How much a finding weighs within its rule: its largest measured figure (requests, errors, bytes,
    milliseconds waited, ...), never an id or a setting."""
    figures = [float(v) for k, v in _evidence_value(r.get("evidence")).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and not _NOT_A_MEASURE.search(k)]
    return max(figures, default=0.0)


def subject_text(r: Mapping[str, Any]) -> str:
    """A finding's subject as a reader should see it: a blank client id is said to be blank."""
    subject = r.get("subject")
    if subject is None:
        return "(none)"
    if str(subject).strip() == "":
        return f"(empty {r.get('subject_kind') or 'subject'} id)" if r.get("subject_kind") in (
            "client", "group") else "(empty)"
    return str(subject)


def grouped(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, list[Mapping[str, Any]]]]:
    """(rule, its worst severity, its findings worst first) per rule (its info findings apart from its
    warnings and criticals); the worst first, then the ones with most findings, then the earliest. Worst
    within a rule: by severity, then by its largest measured figure."""
    by_rule: dict[tuple[str, bool], list[Mapping[str, Any]]] = {}
    for r in rows:  # a rule's info findings fold apart from its warnings, as doctor leaves them out
        by_rule.setdefault((str(r.get("finding") or ""), r.get("severity") not in ("critical", "warning")),
                           []).append(r)
    out = []
    for (rule, _), found in by_rule.items():
        found.sort(key=lambda r: (RANK.get(str(r.get("severity")), 3), -_magnitude(r), subject_text(r),
                                  str(r.get("first_ts") or "")))
        worst = min((str(r.get("severity")) for r in found), key=lambda s: RANK.get(s, 3))
        out.append((rule, worst if worst in RANK else "info", found))
    out.sort(key=lambda g: (RANK[g[1]], -len(g[2]), min(str(r.get("first_ts") or "") for r in g[2]), g[0]))
    return out


def _evidence(raw: object) -> str:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return str(raw)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={json.dumps(v) if isinstance(v, (list, dict)) else v}" for k, v in value.items())
    return str(value)


def _item(r: Mapping[str, Any]) -> str:
    e = html.escape
    ev = _evidence(r.get("evidence"))
    sev = str(r.get("severity") or "info")
    return (f'<li class="{e(sev) if sev in RANK else "info"}"><p><b>{e(subject_text(r))}</b>'
            f' <span class="n">{e(str(r.get("subject_kind") or ""))}'
            + (f' · {e(str(r["capture"]))}' if r.get("capture") else "") + "</span></p>"
            f'<p>{e(str(r.get("explanation") or ""))}</p>'
            f'<p><i>Look at:</i> {e(str(r.get("advice") or ""))}</p>'
            + (f'<p><i>Evidence:</i> {e(ev[:600])}</p>' if ev else "")
            + (f'<p><i>Exchanges:</i> <code>{e(str(r["show"]))}</code></p>' if r.get("show") else "")
            + "</li>")


def _rule(rule: str, severity: str, found: Sequence[Mapping[str, Any]], shown: int = 3,
          shown_items: int = 50) -> str:
    e = html.escape
    anchor, label = where(rule)
    subjects = list(dict.fromkeys(subject_text(r) for r in found))
    who = ", ".join(subjects[:shown]) + (f" and {len(subjects) - shown} more" if len(subjects) > shown else "")
    counts = {s: sum(1 for r in found if r.get("severity") == s) for s in RANK}
    mixed = " (" + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ")" if sum(
        1 for n in counts.values() if n) > 1 else ""
    first = str(found[0].get("explanation") or "") if len(found) == 1 else ""
    return (f'<details class="rule {e(severity)}" data-finding="{e(rule)}" data-count="{len(found)}">'
            f'<summary><span class="sev">{e(severity)}</span><b>{e(rule)}</b>'
            f' <span class="n">× {len(found)}{e(mixed)}</span> · <span class="who">{e(who)}</span>'
            f' &mdash; <a href="#{e(anchor)}">see {e(label)}</a>'
            + (f'<div class="first">{e(first)}</div>' if first else "")
            + f'</summary><ol>{"".join(_item(r) for r in found[:shown_items])}</ol>'
            + (f'<p>{len(found) - shown_items:,} more in the findings table.</p>' if len(found) > shown_items else "")
            + "</details>")


def what_to_look_at(rows: Sequence[Mapping[str, Any]]) -> str:
    """The findings grouped by rule, worst first, each group folded to one line (its count and worst
    subjects) that opens to every finding of it; info findings folded into one line, as ``kdissect
    doctor`` prints them only with ``--all``. An empty string when there are no findings."""
    if not rows:
        return ""
    groups = grouped(rows)
    alarms = [g for g in groups if g[1] != "info"]
    infos = [g for g in groups if g[1] == "info"]
    parts = [_rule(*g) for g in alarms]
    if infos:
        n = sum(len(g[2]) for g in infos)
        parts.append(f'<details class="infos"><summary>{n} info finding{"s" * (n != 1)} '
                     f'({len(infos)} rule{"s" * (len(infos) != 1)}), folded as <code>kdissect doctor</code> '
                     f'prints them only with <code>--all</code></summary>{"".join(_rule(*g) for g in infos)}</details>')
    if not alarms:
        parts.insert(0, "<p>No critical or warning finding.</p>")
    return STYLE + '<div class="kd-look">' + "".join(parts) + "</div>"
