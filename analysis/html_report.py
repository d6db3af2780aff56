"""The analysis results as one self-contained HTML page (``kdissect analyze --report FILE.html``).

    from analysis import html_report
    html_report.write("report.html", results)     # results: the --json object, table -> list of row dicts

or from a results file that ``kdissect analyze --json`` wrote, without Spark::

    python -m analysis.html_report results.json report.html [--title TITLE]

The page needs no network: its only script besides a few lines of glue is
plotly.js, inlined once in the page head, and its styles use the system's
fonts. Why plotly.js: the ``plotly`` wheel ships the minified library as
package data (no npm, no CDN, MIT licensed, released every few weeks), it
draws everything the report needs from plain JSON specs (date and log axes,
stacked bars, horizontal bars with a base for the rebalance Gantt), and the
charts stay interactive offline (zoom, hover, legend toggles). The price is
about 4.8 MB of script per report, paid once per page rather than per chart.

The renderer only reads the result rows (no Spark, no pandas), so it can run
on any machine that has the JSON. A missing or empty table shows "no data";
rows with unexpected types are shown as text. Every value is HTML-escaped:
client ids, topics and group ids come off the wire.
"""

from __future__ import annotations

import datetime as dt
import html
import importlib.resources
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis import report_charts as charts
from analysis import report_findings

Results = Mapping[str, Sequence[Mapping[str, Any]]]
DEFAULT_TITLE = "kafka-dissect report"
TOP_ROWS = 12      # rows shown per table; the rest fold into a <details>
MAX_ROWS = 1000    # rows written per table at all, so a huge table cannot bloat the page
GANTT_GROUPS = 12  # rebalance timelines drawn; the table lists every group
GANTT_CAPTION = ("Red: each rebalance, from its first JoinGroup to its last SyncGroup answer; a coloured bar per "
                 "member: the generation it held, until the next rebalance or the group's last sighting.")


def plotly_js() -> str:
    """plotly.js as shipped in the plotly wheel, safe to inline in a <script> element."""
    try:
        source = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"
        text = source.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise RuntimeError("plotly.js not found: pip install plotly") from e
    return text.replace("</script", "<\\/script")


# --------------------------------------------------------------------------
# Reading the results defensively

def rows_of(results: object, name: str) -> list[Mapping[str, Any]]:
    """The rows of one table; anything that is not a list of objects counts as no data."""
    if not isinstance(results, Mapping):
        return []
    rows = results.get(name)
    if not isinstance(rows, (list, tuple)):
        return []
    return [r for r in rows if isinstance(r, Mapping)]


# --------------------------------------------------------------------------
# Cells

def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"


def _is_time_column(col: str) -> bool:
    return col.endswith("_ts") or col in ("ts", "window_start", "window_end")


@dataclass
class CellFormat:
    """How values print; ``day`` is the capture's first day, left out of times on that day."""

    day: dt.date | None = None

    def cell(self, col: str, value: object) -> tuple[str, str, str]:
        """(html text, css class, title attribute) of one value."""
        if value is None:
            return '<span class="none">–</span>', "", ""
        if value == "":
            return '<span class="none">(empty)</span>', "", "an empty string"
        if isinstance(value, bool):
            return ("yes" if value else "no"), "", ""
        if _is_time_column(col):
            ts = charts.parse_ts(value)
            if ts is not None:
                full = ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
                short = full[11:] if self.day == ts.date() else full
                return html.escape(short), "ts", html.escape(full + " UTC")
        if isinstance(value, (int, float)):
            if col == "share" or col.endswith("_share"):
                return f"{value:.1%}", "num", repr(value)
            if col.endswith("_bytes"):
                return _human_bytes(float(value)), "num", f"{value:,}"
            if isinstance(value, float):
                if col.endswith("_ms") or col in ("ratio", "requests_per_s"):
                    return html.escape(_ms(value)), "num", repr(value)
                return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}", "num", repr(value)
            if col in ("partition", "generation_id", "api_version", "broker_max_version", "error_code",
                       "producer_id", "producer_epoch"):
                return str(value), "num", ""
            return f"{value:,}", "num", ""
        if isinstance(value, (list, tuple)):
            text = ", ".join("–" if v is None else str(v) for v in value)
            return html.escape(_clip(text)), "list", html.escape(text) if len(text) > 80 else ""
        if isinstance(value, Mapping):
            text = json.dumps(value, default=str, sort_keys=True)
            return html.escape(_clip(text)), "", html.escape(text) if len(text) > 80 else ""
        text = str(value)
        return html.escape(_clip(text)), "", html.escape(text) if len(text) > 80 else ""


def _ms(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}" if abs(v) >= 0.01 else f"{v:.2g}"


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------
# Tables

@dataclass(frozen=True)
class TableSpec:
    """A result table as the report shows it: the columns worth a glance, worst rows first."""

    name: str
    title: str
    columns: tuple[str, ...]
    worst: tuple[str, ...] = ()          # sort keys, descending; the first present wins ties by the next
    ascending: tuple[str, ...] = ()      # sort keys that rise (e.g. time) after the descending ones
    note: str = ""


def _sort_key(spec: TableSpec) -> Callable[[Mapping[str, Any]], tuple]:
    def key(row: Mapping[str, Any]) -> tuple:
        out: list[Any] = []
        for col in spec.worst:
            v = row.get(col)
            if isinstance(v, bool):
                v = float(v)
            n = charts.number(v)
            out += [n is None, -(n or 0.0)]
        for col in spec.ascending:
            v = row.get(col)
            n = None if isinstance(v, bool) else charts.number(v)
            out += [v is None, n if n is not None else float("inf"), str(v)]  # numbers by value, then text
        return tuple(out)
    return key


def table_html(spec: TableSpec, rows: Sequence[Mapping[str, Any]], fmt: CellFormat) -> str:
    if not rows:
        return _nodata(spec.name)
    present = [c for c in spec.columns if any(c in r for r in rows)]
    if not present:  # an older or newer producer of the results: show what is there
        present = list(dict.fromkeys(k for r in rows[:50] for k in r))
    ordered = sorted(rows, key=_sort_key(spec)) if spec.worst or spec.ascending else list(rows)

    def body(chunk: Sequence[Mapping[str, Any]]) -> str:
        lines = []
        for r in chunk:
            cells = []
            for c in present:
                text, cls, title = fmt.cell(c, r.get(c))
                attrs = (f' class="{cls}"' if cls else "") + (f' title="{title}"' if title else "")
                cells.append(f"<td{attrs}>{text}</td>")
            lines.append("<tr>" + "".join(cells) + "</tr>")
        return "\n".join(lines)

    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in present)
    top = ordered[:TOP_ROWS]
    parts = [f'<div class="tablewrap"><table class="kd-table" data-table="{html.escape(spec.name)}">'
             f"<thead><tr>{head}</tr></thead><tbody>{body(top)}</tbody></table></div>"]
    rest = ordered[TOP_ROWS:MAX_ROWS]
    if rest:
        cut = f" (first {MAX_ROWS:,} of {len(ordered):,})" if len(ordered) > MAX_ROWS else ""
        parts.append(f'<details><summary>all {len(ordered):,} rows{cut}</summary><div class="tablewrap">'
                     f'<table class="kd-table"><thead><tr>{head}</tr></thead><tbody>{body(ordered[:MAX_ROWS])}'
                     f"</tbody></table></div></details>")
    return "\n".join(parts)


def _nodata(name: str) -> str:
    return f'<div class="nodata">no data <span>({html.escape(name)} is empty or missing)</span></div>'


LAT = ("count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")
LAT_SHORT = ("count", "p50_ms", "p99_ms", "max_ms")  # the side-by-side tables
TABLES = {t.name: t for t in (
    TableSpec("findings", "Findings", ("severity", "finding", "subject_kind", "subject", "first_ts", "last_ts",
                                        "evidence", "advice"), ("severity_rank",), ("first_ts",)),
    TableSpec("latency_by_api", "By api and version", ("api_name", "api_version", *LAT), ("p99_ms", "max_ms")),
    TableSpec("latency_spikes", "Windows whose p99 jumped", ("window_start", "api_name", "p99_ms",
                                                              "baseline_p99_ms", "ratio"), ("ratio",)),
    TableSpec("latency_by_client", "By client id", ("client_id", *LAT_SHORT), ("p99_ms",)),
    TableSpec("latency_by_broker", "By broker", ("broker", *LAT_SHORT), ("p99_ms",)),
    TableSpec("latency_by_topic", "By topic", ("topic", "api_name", *LAT_SHORT), ("p99_ms",)),
    TableSpec("latency_by_size", "Produce latency by request size", ("size_bucket", "count", "p50_ms", "p99_ms",
                                                                      "max_ms"), (), ("size_low_bytes", "size_bucket")),
    TableSpec("idle_fetches", "Idle fetches (long polls, left out of Fetch latency)",
              ("client_id", "broker", "count", "mean_ms"), ("count",)),
    TableSpec("errors", "Errors", ("error_name", "api_name", "client_id", "broker", "topic", "partition", "count",
                                   "share", "retriable", "first_ts", "last_ts"), ("count",)),
    TableSpec("throughput_by_topic", "By topic and partition", ("topic", "partition", "produced_records",
                                                                 "produced_bytes", "fetched_records",
                                                                 "fetched_bytes", "requests", "requests_per_s"),
              ("produced_bytes", "fetched_bytes")),
    TableSpec("top_clients", "Top clients by bytes", ("client_id", "produced_bytes", "fetched_bytes", "requests"),
              ("produced_bytes", "fetched_bytes")),
    TableSpec("produce_to_fetch", "Produce to first fetch", ("topic", "partition", "client_id", "count",
                                                              "p50_ms", "p99_ms", "max_ms"), ("max_ms",)),
    TableSpec("rebalances", "Rebalances (longest first)", ("group_id", "generation_id", "protocol", "members",
                                                            "member_client_ids", "members_joined",
                                                            "members_left", "start_ts", "duration_ms",
                                                            "reason", "errors"), ("duration_ms",)),
    TableSpec("group_members", "Members per generation", ("group_id", "generation_id", "client_id", "member_id",
                                                          "assigned_partitions"), (), ("group_id", "generation_id")),
    TableSpec("offset_commits", "Committed offsets (latest first)", ("group_id", "topic", "partition",
                                                                     "committed_offset", "client_id", "ts",
                                                                     "error_name"), ("_ts_order",)),
    TableSpec("consumer_lag", "Consumer lag", ("group_id", "client_id", "topic", "partition", "committed_offset",
                                              "fetch_position", "high_watermark", "lag", "lag_from",
                                              "committed_ts", "high_watermark_ts"), ("lag",)),
    TableSpec("share_deliveries", "Deliveries per member (records)", ("group_id", "topic", "partition", "client_id",
                                                                       "acquired", "accepted", "released",
                                                                       "rejected", "redelivered",
                                                                       "max_delivery_count"), ("acquired",)),
    TableSpec("share_groups", "Members", ("group_id", "client_id", "member_id", "joined_ts", "left_ts",
                                          "member_epoch", "group_epoch", "assignments", "heartbeat_errors"),
              (), ("group_id", "joined_ts")),
    TableSpec("share_in_flight", "Acquired, never acknowledged", ("group_id", "topic", "partition", "first_offset",
                                                                  "last_offset", "records", "client_id", "state",
                                                                  "acquired_ts", "lock_expires_ts",
                                                                  "next_client_id", "next_delivery_count"),
              ("records",),
              note="<i>in_flight</i>: nothing later in the capture took them; <i>lock_expired</i>: delivered again "
                   "once the acquisition lock ran out; <i>released</i>: delivered again before, the member's "
                   "share session having ended."),
    TableSpec("share_session_errors", "Share session errors", ("group_id", "client_id", "broker", "api_name",
                                                                "error", "level", "count", "session_epochs",
                                                                "first_ts", "last_ts"), ("count",)),
    TableSpec("producers", "Idempotent and transactional producers",
              ("client_id", "producer_id", "producer_epoch", "transactional_id", "transactions_begun",
               "transactions_committed", "transactions_aborted", "records_per_batch", "batches_per_request"),
              ("transactions_aborted", "transactions_begun")),
    TableSpec("clients", "Clients", ("client_id", "client_software_name", "client_software_version", "connections",
                                     "apis", "paired", "unpaired", "orphans"), ("unpaired", "orphans", "connections")),
    TableSpec("api_versions", "Api versions (outdated first)", ("client_id", "api_name", "api_version",
                                                                "broker_max_version", "outdated", "count"),
              ("outdated", "count"),
              note="<i>outdated</i>: older than the newest version the broker offered on the same connections, "
                   "which is usual and harmless; versions Kafka 4 no longer accepts are the finding "
                   "<code>client.old_versions</code>."),
    TableSpec("anomalies_by_kind", "Anomalies", ("kind", "count", "first_ts", "last_ts"), ("count",)),
)}


def _prepared(name: str, rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Sort helpers that are not plain columns."""
    if name == "offset_commits":
        return [{**r, "_ts_order": (charts.parse_ts(r.get("ts")) or dt.datetime.min.replace(
            tzinfo=dt.timezone.utc)).timestamp()} for r in rows]
    if name == "findings":
        rank = {"critical": 4, "high": 3, "error": 3, "warning": 2, "medium": 2, "low": 1, "info": 0}
        return [{**r, "severity_rank": rank.get(str(r.get("severity", "")).lower(), 0)} for r in rows]
    return rows


# --------------------------------------------------------------------------
# Page

@dataclass
class Page:
    """Collects sections, their charts (as figure specs) and navigation while rendering."""

    results: object
    fmt: CellFormat
    sections: list[str] = field(default_factory=list)
    nav: list[tuple[str, str]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    shown: set[str] = field(default_factory=set)

    def rows(self, name: str) -> list[Mapping[str, Any]]:
        return rows_of(self.results, name)

    def chart(self, chart_id: str, title: str, figure: dict | None, source: str, instead: str = "",
              caption: str = "") -> str:
        """A chart with its one-line caption, or when there is nothing to draw, "no data" (or ``instead``,
        when that says more)."""
        self.shown.add(source)
        if figure is None:
            body = f'<div class="nodata">{html.escape(instead)}</div>' if instead else _nodata(source)
            caption = ""
        else:
            self.figures[chart_id] = figure
            body = f'<div class="kd-chart" id="{chart_id}" data-table="{html.escape(source)}"></div>'
        text = f'<p class="caption">{html.escape(caption)}</p>' if caption else ""
        return f'<figure class="card"><figcaption>{html.escape(title)}</figcaption>{body}{text}</figure>'

    def table(self, name: str, title: str | None = None) -> str:
        spec = TABLES.get(name) or TableSpec(name, name.replace("_", " "), ())
        self.shown.add(name)
        rows = _prepared(name, self.rows(name))
        note = f'<p class="note">{spec.note}</p>' if spec.note and rows else ""
        return (f'<section class="card tablecard" id="t-{html.escape(name)}"><h3>{html.escape(title or spec.title)}'
                f' <code>{html.escape(name)}</code></h3>{note}{table_html(spec, rows, self.fmt)}</section>')

    def section(self, anchor: str, title: str, blurb: str, *parts: str) -> None:
        self.nav.append((anchor, title))
        self.sections.append(f'<section class="block" id="{anchor}"><h2>{html.escape(title)}</h2>'
                             f'<p class="blurb">{blurb}</p>' + "\n".join(parts) + "</section>")


def _gantts(p: Page) -> list[str]:
    """One rebalance timeline per group, the most rebalanced first."""
    rebalances, members = p.rows("rebalances"), p.rows("group_members")
    p.shown.add("group_members")
    seen = charts.group_last_seen(rebalances, p.rows("offset_commits"), p.rows("consumer_lag"))
    gantts = charts.rebalance_gantts(rebalances, members, seen, limit=GANTT_GROUPS)
    if not gantts:
        return [p.chart("ch-rebalances", "Rebalance timeline per group", None, "rebalances")]
    out = []
    for i, (group, n, fig) in enumerate(gantts):
        out.append(p.chart(f"ch-rebalances-{i}", f"Rebalance timeline of {group}: {n} rebalance{'s' * (n != 1)}",
                           fig, "rebalances", caption=GANTT_CAPTION))
    more = len({str(r.get("group_id")) for r in rebalances}) - len(gantts)
    if more > 0:
        out.append(f'<p class="blurb">{more} more groups with fewer rebalances: see the table.</p>')
    return out


def _header(results: object, title: str, fmt: CellFormat) -> str:
    summary = rows_of(results, "summary")
    s = summary[0] if summary else {}
    first, last = charts.parse_ts(s.get("first_ts")), charts.parse_ts(s.get("last_ts"))
    if first and last:
        span = f"{first:%Y-%m-%d %H:%M:%S} → {last:%H:%M:%S} UTC" if first.date() == last.date() else \
            f"{first:%Y-%m-%d %H:%M:%S} → {last:%Y-%m-%d %H:%M:%S} UTC"
        span += f" · {_duration((last - first).total_seconds())}"
    else:
        span = "capture span unknown (no summary table)"

    def total(table: str, col: str) -> float | None:
        vals = [charts.number(r.get(col)) for r in rows_of(results, table)]
        vals = [v for v in vals if v is not None]
        return sum(vals) if vals else None

    groups = {str(r.get("group_id")) for r in rows_of(results, "rebalances")}
    cards = [
        ("exchanges", s.get("exchanges")), ("connections", s.get("connections")), ("clients", s.get("clients")),
        ("captures", s.get("captures")), ("brokers", s.get("brokers")),
        ("errors", s["errors"] if s.get("errors") is not None else total("errors", "count")),
        ("rebalances", len(rows_of(results, "rebalances")) if groups else None),
        ("groups", len(groups) if groups else None), ("anomalies", s.get("anomalies")),
    ]
    card_html = "".join(  # a figure the results do not carry is left out rather than shown as a dash
        f'<div class="stat"><div class="v">{_count(v)}</div><div class="k">{html.escape(k)}</div></div>'
        for k, v in cards if v is not None or k in ("exchanges", "connections", "clients"))
    return (f'<header><h1>{html.escape(title)}</h1><p class="span">{html.escape(span)}</p>'
            f'<div class="stats">{card_html}</div></header>')


def _count(v: object) -> str:
    n = charts.number(v)
    if n is None:
        return '<span class="none">–</span>'
    return f"{n:,.0f}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return charts.span_label(seconds)


def _day(results: object) -> dt.date | None:
    """The capture's day when it spans one day only (then table times leave the date out)."""
    summary = rows_of(results, "summary")
    if not summary:
        return None
    first, last = charts.parse_ts(summary[0].get("first_ts")), charts.parse_ts(summary[0].get("last_ts"))
    return first.date() if first and last and first.date() == last.date() else None


def render(results: Results, *, title: str = DEFAULT_TITLE) -> str:
    """The whole report as one HTML document (about 5 MB, nearly all of it plotly.js)."""
    p = Page(results, CellFormat(_day(results)))
    summary = p.rows("summary")
    p.shown.add("summary")
    if p.rows("findings"):
        n = len(p.rows("findings"))
        p.section("findings", "What to look at", "What the traffic says is wrong, one line per rule, the most "
                  "severe first: how many findings, the worst subjects, where it shows. Open a rule for each "
                  "finding, its figures and a <code>kdissect show</code> line listing its exchanges.",
                  report_findings.what_to_look_at(p.rows("findings")),
                  f'<details class="tablefold"><summary>the findings table ({n:,} row{"s" * (n != 1)})</summary>'
                  + p.table("findings") + "</details>")
    else:
        p.shown.add("findings")
    summary_row = summary[0] if summary else {}
    series = {name: p.rows(name) for name in ("latency_over_time", "errors_over_time", "throughput_over_time")}
    # One time axis for the three time-series charts: the same windows, complete, the same stretches cut.
    tl = charts.timeline(*series.values(), first_ts=summary_row.get("first_ts"), last_ts=summary_row.get("last_ts"))
    axis = tl.caption() if tl is not None else ""
    too_many = axis if tl is not None and tl.too_many else ""
    drawn = tl if tl is not None and not tl.too_many else None
    p.section(
        "latency", "Latency",
        "Request to response, per exchange. Idle Fetch long polls and acks=0 Produce are left out of the "
        "percentiles (see <i>idle fetches</i>).",
        p.chart("ch-latency-time", "Latency percentiles over time per api (log scale)",
                charts.latency_over_time(series["latency_over_time"], drawn) if drawn else None,
                "latency_over_time", too_many,
                caption="Each api's p99 (buttons: p50, p90, max) per window, drawn across the window; a break "
                        "is a window without answered requests of that api. " + axis),
        p.chart("ch-latency-cdf", "Latency distribution: share of exchanges within a latency (log scale)",
                charts.latency_cdf(p.rows("latency_histogram")), "latency_histogram",
                caption="For each api, the share of its answered requests (y) that took at most a latency (x): "
                        "the further right a curve climbs, the slower the api."),
        p.table("latency_by_api"), p.table("latency_spikes"),
        '<div class="grid2">' + p.table("latency_by_client") + p.table("latency_by_broker") + "</div>",
        '<div class="grid2">' + p.table("latency_by_topic") + p.table("latency_by_size") + "</div>",
        p.table("idle_fetches"))
    p.section(
        "errors", "Errors",
        "Error codes in responses, per partition where the api has them. <i>retriable</i>: whether Kafka's "
        "own client retries that error.",
        p.chart("ch-errors-time", "Errors over time",
                charts.errors_over_time(series["errors_over_time"], drawn) if drawn else None, "errors_over_time",
                too_many or ("no errors" if drawn and not series["errors_over_time"] else ""),
                caption="Error answers per window, stacked by error and api; a window without a bar had none. "
                        + axis),
        p.table("errors"))
    p.section(
        "throughput", "Throughput",
        "Records and bytes produced (accepted by the broker) and fetched, per topic.",
        p.chart("ch-throughput-time", "Throughput per topic over time",
                charts.throughput_over_time(series["throughput_over_time"], drawn) if drawn else None,
                "throughput_over_time", too_many,
                caption="Records (buttons: bytes) per window and topic, a panel for what was produced and accepted "
                        "by the broker and one for what Fetch responses carried; a window without a bar had none. "
                        + axis),
        p.table("throughput_by_topic"),
        '<div class="grid2">' + p.table("top_clients") + p.table("produce_to_fetch") + "</div>")
    p.section(
        "groups", "Consumer groups",
        "Rebalance timeline per group: red, each rebalance (from the first JoinGroup of a generation to its "
        "last SyncGroup response, or the heartbeat that delivered a KIP-848 assignment); coloured, the "
        "generation each member held until the next one (the last until the group was last seen).",
        *_gantts(p), p.table("rebalances"), p.table("group_members"), p.table("offset_commits"))
    p.section(
        "lag", "Consumer lag",
        "Per partition: the latest high watermark seen in Fetch or ListOffsets responses minus the latest "
        "committed offset (or fetch position). It is what the wire showed, not the broker's live state.",
        p.chart("ch-lag", "Lag per partition", charts.lag_per_partition(p.rows("consumer_lag")), "consumer_lag",
                "every partition is at lag 0" if any(charts.number(r.get("lag")) is not None
                                                     for r in p.rows("consumer_lag")) else "",
                caption="Per partition and group: the latest high watermark seen minus the latest committed offset "
                        "(or fetch position), the largest first; partitions at lag 0 are counted, not drawn."),
        p.table("consumer_lag"))
    shares = ("share_deliveries", "share_groups", "share_in_flight", "share_session_errors")
    # Shown when a share finding links here even if its tables came back empty (a table left out by --only).
    if any(p.rows(name) for name in shares) or any(str(f.get("finding", "")).startswith("share.")
                                                   for f in p.rows("findings")):
        p.section("shares", "Share groups",
                  "KIP-932 share groups, as their members' heartbeats, ShareFetch and ShareAcknowledge showed "
                  "them: records acquired (the acquired ranges of ShareFetch answers) and acknowledged as "
                  "accepted, released or rejected; redelivered: acquired with a delivery count above 1.",
                  *[p.table(name) for name in shares])
    else:
        p.shown.update(shares)
    p.section("producers", "Producers", "Idempotent and transactional producers and their transactions.",
              p.table("producers"))
    p.section("inventory", "Inventory", "Who spoke which api versions; what could not be decoded.",
              p.table("clients"), p.table("api_versions"), p.table("anomalies_by_kind"))
    others = sorted(k for k in results if isinstance(k, str) and k not in p.shown) \
        if isinstance(results, Mapping) else []
    if others:
        p.section("other", "Other tables", "Result tables this report has no view for.",
                  *[p.table(name) for name in others])
    return _document(title, _header(results, title, p.fmt), p)


def _document(title: str, header: str, p: Page) -> str:
    nav = "".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t in p.nav)
    # JSON inside <script>: escape what could end the element or open a comment.
    figures = (json.dumps(p.figures, separators=(",", ":"), allow_nan=False)
               .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kafka-dissect">
<title>{html.escape(title)}</title>
<style>{_CSS}</style>
<script>{plotly_js()}</script>
</head>
<body>
<nav>{nav}</nav>
<main>
{header}
{"".join(p.sections)}
<footer>kafka-dissect · generated {generated} · charts by plotly.js, inlined: this file needs no network</footer>
</main>
<script type="application/json" id="kd-figures">{figures}</script>
<script>{_GLUE}</script>
</body>
</html>
"""


# Draws every figure; marks the body when all are drawn (or failed) so a headless browser can wait for it.
_GLUE = """
(function () {
  var figures = JSON.parse(document.getElementById('kd-figures').textContent);
  var config = {displaylogo: false, responsive: true, scrollZoom: false};
  var jobs = Object.keys(figures).map(function (id) {
    return Plotly.newPlot(id, figures[id].data, figures[id].layout, config);
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute('data-kd-rendered', String(jobs.length));
  }, function (err) {
    document.body.setAttribute('data-kd-rendered', 'error');
    console.error('kafka-dissect report: a chart failed to draw', err);
  });
})();
"""

_CSS = """
:root { --ink: #1d1d24; --muted: #6b6b78; --line: #e3e3ea; --bg: #f6f6f9; --accent: #0072B2; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
nav { position: sticky; top: 0; z-index: 10; background: #1d1d24; padding: 8px 24px; display: flex; gap: 18px;
      flex-wrap: wrap; }
nav a { color: #dfe6f3; text-decoration: none; font-size: 13px; }
nav a:hover { color: #fff; text-decoration: underline; }
main { max-width: 1280px; margin: 0 auto; padding: 20px 24px 40px; }
header h1 { margin: 8px 0 2px; font-size: 24px; }
header .span { margin: 0 0 14px; color: var(--muted); }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(120px, 1fr)); gap: 10px; }
.stat { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.stat .v { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.stat .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
section.block { margin-top: 28px; }
section.block > h2 { font-size: 19px; margin: 0 0 2px; border-bottom: 2px solid var(--ink); padding-bottom: 4px; }
.blurb { color: var(--muted); margin: 6px 0 12px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; margin: 0 0 12px;
        min-width: 0; }
figure.card { margin: 0 0 12px; }
figcaption, .card h3 { font-weight: 600; font-size: 14px; margin: 0 0 6px; }
.card h3 code { font-weight: 400; color: var(--muted); font-size: 11px; margin-left: 6px; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 12px; }
.grid2 > .card { margin: 0; }
.grid2 + * { margin-top: 12px; }
.kd-chart { width: 100%; min-height: 120px; }
.nodata { color: var(--muted); padding: 18px 8px; text-align: center; font-style: italic; }
.nodata span { font-size: 12px; }
.tablewrap { overflow-x: auto; }
table.kd-table { border-collapse: collapse; width: 100%; font-size: 12.5px; font-variant-numeric: tabular-nums; }
.kd-table th { text-align: left; font-weight: 600; color: var(--muted); border-bottom: 1px solid var(--line);
               padding: 4px 8px; font-size: 11.5px; vertical-align: bottom; }
/* Text wraps inside its cell, so a table fits its card; numbers and times stay on one line. */
.kd-table td { padding: 3px 8px; border-bottom: 1px solid #f0f0f4; vertical-align: top; max-width: 26em;
               overflow-wrap: anywhere; }
.kd-table tr:hover td { background: #f3f7fc; }
.kd-table td.num { text-align: right; white-space: nowrap; }
.kd-table td.ts { color: #444; white-space: nowrap; }
.caption { color: var(--muted); font-size: 12.5px; margin: 4px 2px 0; }
.note { color: var(--muted); font-size: 12.5px; margin: 0 0 6px; }
.none { color: #b3b3bd; }
details summary { cursor: pointer; color: var(--accent); font-size: 12px; margin: 6px 0; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; text-align: center; }
"""


def write(path: str | os.PathLike[str], results: Results, *, title: str = DEFAULT_TITLE) -> None:
    """Render the report and write it to ``path`` (UTF-8)."""
    text = render(results, title=title)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m analysis.html_report",
                                 description="Render the HTML report from a results file of `kdissect analyze --json`.")
    ap.add_argument("results", help="JSON object: table name -> list of rows")
    ap.add_argument("report", help="HTML file to write")
    ap.add_argument("--title", default=DEFAULT_TITLE)
    args = ap.parse_args(argv)
    try:
        with open(args.results, encoding="utf-8") as f:
            results = json.load(f)
    except OSError as e:
        print(f"error: cannot read {args.results}: {e.strerror}", file=sys.stderr)
        return 2
    except (ValueError, UnicodeDecodeError) as e:
        print(f"error: {args.results} is not a JSON results file: {e}", file=sys.stderr)
        return 2
    if not isinstance(results, dict):
        print(f"error: {args.results} holds a JSON {type(results).__name__}, not an object of tables",
              file=sys.stderr)
        return 2
    try:
        write(args.report, results, title=args.title)
    except OSError as e:
        print(f"error: cannot write {args.report}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"report: {os.path.abspath(args.report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
