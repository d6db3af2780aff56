"""The report's charts: plotly.js figure specs (plain dicts) built from result rows.

Each builder takes the rows of one or two result tables (``analyze --json``'s
shape: dicts, timestamps as ISO-8601 strings) and returns a figure dict
``{"data": [...], "layout": {...}}`` for ``Plotly.newPlot``, or None when the
rows hold nothing to draw. No plotly Python API and no pandas: the figures are
data, and the page ships plotly.js itself (see ``html_report``).

Strings that come off the wire (client ids, topics, group ids, error names)
are HTML-escaped before they go into a figure: plotly.js renders labels,
legend names and hover text as a small HTML dialect (``<b>``, ``<a href>``),
and it decodes entities back, so an escaped label shows exactly as captured.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]
Figure = dict[str, Any]

# Colour-blind-safe qualitative palette (Okabe & Ito), then a few extra hues.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#8C564B", "#7F7F7F", "#17BECF", "#BCBD22")
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
MAX_SERIES = 12  # more lines than this are unreadable; the rest start hidden (legend click shows them)
MAX_TRACES = 40  # series beyond this are left out of a chart (the tables hold them): bounds the page size


def esc(value: object) -> str:
    """A wire value as safe plotly text (plotly.js decodes &lt; &gt; &amp; back, but not &quot;)."""
    return html.escape("-" if value is None else str(value), quote=False)


def number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        f = float(str(value))
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def positive(value: object) -> float | None:
    """For log axes: zero and negatives have no place on them."""
    f = number(value)
    return f if f is not None and f > 0 else None


def parse_ts(value: object) -> dt.datetime | None:
    """An ISO-8601 timestamp (``Z`` or offset, or naive meaning UTC) as an aware UTC datetime."""
    if isinstance(value, dt.datetime):
        ts = value
    elif isinstance(value, str) and value:
        try:
            ts = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return ts.replace(tzinfo=dt.timezone.utc) if ts.tzinfo is None else ts.astimezone(dt.timezone.utc)


def plotly_ts(ts: dt.datetime) -> str:
    # plotly.js date axes take naive "YYYY-MM-DD HH:MM:SS.ffffff" and would drop a zone anyway;
    # every time in the report is UTC and the axes say so.
    return ts.strftime("%Y-%m-%d %H:%M:%S.%f")


def _axis(title: str, **kw: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "automargin": True, "zeroline": False, "gridcolor": "#e8e8ee", **kw}


def _layout(y_title: str, *, x_title: str = "time (UTC)", x_type: str = "date", y_type: str = "linear",
            height: int = 360, **kw: Any) -> dict[str, Any]:
    return {
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "font": {"family": FONT, "size": 12, "color": "#222"},
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "xaxis": _axis(x_title, type=x_type),
        "yaxis": _axis(y_title, type=y_type),
        "legend": {"orientation": "v", "font": {"size": 11}},
        "hoverlabel": {"font": {"family": FONT}},
        **kw,
    }


def _series(rows: Iterable[Row], key: str, x: str) -> dict[str, list[Row]]:
    """Rows grouped by ``key`` (a column or a callable's name), each sorted by time column ``x``."""
    out: dict[str, list[Row]] = {}
    for r in rows:
        ts = parse_ts(r.get(x))
        if ts is None:
            continue
        out.setdefault(str(r.get(key)), []).append({**r, "_ts": ts})
    for v in out.values():
        v.sort(key=lambda r: r["_ts"])
    return out


def _menu(buttons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "buttons", "direction": "right", "x": 0, "xanchor": "left", "y": 1.12, "yanchor": "bottom",
             "showactive": True, "pad": {"r": 4, "t": 0}, "font": {"size": 11}, "buttons": buttons}]


def latency_over_time(rows: Sequence[Row]) -> Figure | None:
    """One line per api; buttons switch the percentile. Log y: p50 and p99 differ by decades."""
    series = _series(rows, "api_name", "window_start")
    stats = [s for s in ("p50_ms", "p90_ms", "p99_ms", "max_ms") if any(number(r.get(s)) for r in rows)]
    if not series or not stats:
        return None
    shown = "p99_ms" if "p99_ms" in stats else stats[-1]
    # The worst apis first, so the visible ones are those worth looking at.
    order = sorted(series, key=lambda a: -max((number(r.get(shown)) or 0) for r in series[a]))[:MAX_TRACES]
    data = []
    for i, api in enumerate(order):
        pts = series[api]
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": esc(api),
            "x": [plotly_ts(r["_ts"]) for r in pts], "y": [positive(r.get(shown)) for r in pts],
            "customdata": [[number(r.get("count"))] for r in pts],
            "hovertemplate": f"{esc(api)}<br>%{{y:.3~f}} ms<br>%{{customdata[0]}} exchanges<extra></extra>",
            "line": {"width": 2, "color": PALETTE[i % len(PALETTE)]}, "marker": {"size": 5},
            "connectgaps": False, **({} if i < MAX_SERIES else {"visible": "legendonly"}),
        })
    buttons = [{"label": s.removesuffix("_ms"), "method": "restyle",
                "args": [{"y": [[positive(r.get(s)) for r in series[a]] for a in order]}]} for s in stats]
    layout = _layout("latency (ms, log)", y_type="log", updatemenus=_menu(buttons))
    layout["updatemenus"][0]["active"] = stats.index(shown)
    layout["margin"]["t"] = 40
    return {"data": data, "layout": layout}


def latency_cdf(rows: Sequence[Row]) -> Figure | None:
    """Cumulative share of exchanges under each bucket's upper edge, per api, on a log latency axis."""
    by_api: dict[str, list[tuple[float, float, float]]] = {}
    for r in rows:
        lo, hi, n = positive(r.get("bucket_low_ms")), positive(r.get("bucket_high_ms")), number(r.get("count"))
        if hi is None or not n or n <= 0:
            continue
        by_api.setdefault(str(r.get("api_name")), []).append((lo or hi, hi, n))
    if not by_api:
        return None
    order = sorted(by_api, key=lambda a: -sum(n for *_, n in by_api[a]))[:MAX_TRACES]
    data = []
    for i, api in enumerate(order):
        buckets = sorted(by_api[api], key=lambda b: b[1])
        total = sum(n for *_, n in buckets)
        xs, ys, acc = [buckets[0][0]], [0.0], 0.0
        for _lo, hi, n in buckets:
            acc += n
            xs.append(hi)
            ys.append(acc / total)
        data.append({
            "type": "scatter", "mode": "lines", "name": f"{esc(api)} ({int(total):,})", "x": xs, "y": ys,
            "line": {"width": 2, "shape": "linear", "color": PALETTE[i % len(PALETTE)]},
            "hovertemplate": f"{esc(api)}<br>%{{y:.1%}} within %{{x:.3~f}} ms<extra></extra>",
            **({} if i < MAX_SERIES else {"visible": "legendonly"}),
        })
    layout = _layout("share of exchanges", x_title="latency (ms, log scale)", x_type="log")
    layout["yaxis"].update(tickformat=".0%", range=[0, 1.02])
    return {"data": data, "layout": layout}


def errors_over_time(rows: Sequence[Row]) -> Figure | None:
    """Stacked bars: one colour per error (and the api it came from)."""
    keyed = [{**r, "_key": f"{r.get('error_name')} · {r.get('api_name')}"} for r in rows
             if number(r.get("count"))]
    series = _series(keyed, "_key", "window_start")
    if not series:
        return None
    order = sorted(series, key=lambda k: -sum(number(r.get("count")) or 0 for r in series[k]))[:MAX_TRACES]
    data = [{
        "type": "bar", "name": esc(k), "x": [plotly_ts(r["_ts"]) for r in series[k]],
        "y": [number(r.get("count")) for r in series[k]], "marker": {"color": PALETTE[i % len(PALETTE)]},
        "hovertemplate": f"{esc(k)}<br>%{{y}} at %{{x}}<extra></extra>",
    } for i, k in enumerate(order)]
    return {"data": data, "layout": _layout("errors per window", barmode="stack", bargap=0.15)}


def throughput_over_time(rows: Sequence[Row]) -> Figure | None:
    """Per topic: produced (solid) and fetched (dashed); buttons switch records and bytes."""
    series = _series(rows, "topic", "window_start")
    if not series:
        return None
    order = sorted(series, key=lambda t: -sum((number(r.get("produced_bytes")) or 0) +
                                              (number(r.get("fetched_bytes")) or 0) for r in series[t]))
    order = order[:MAX_TRACES // 2]  # two lines per topic
    data, cols = [], []
    for i, topic in enumerate(order):
        pts = series[topic]
        for way, dash in (("produced", "solid"), ("fetched", "dash")):
            if not any(number(r.get(f"{way}_records")) or number(r.get(f"{way}_bytes")) for r in pts):
                continue
            cols.append((topic, way))
            data.append({
                "type": "scatter", "mode": "lines+markers", "name": f"{esc(topic)} · {way}",
                "legendgroup": esc(topic), "x": [plotly_ts(r["_ts"]) for r in pts],
                "y": [number(r.get(f"{way}_records")) for r in pts],
                "line": {"width": 2, "dash": dash, "color": PALETTE[i % len(PALETTE)]}, "marker": {"size": 4},
                "hovertemplate": f"{esc(topic)} {way}<br>%{{y:,}}<extra></extra>",
                **({} if i < MAX_SERIES else {"visible": "legendonly"}),
            })
    if not data:
        return None
    buttons = [{"label": unit, "method": "update",
                "args": [{"y": [[number(r.get(f"{way}_{unit}")) for r in series[topic]] for topic, way in cols]},
                         {"yaxis.title.text": f"{unit} per window"}]} for unit in ("records", "bytes")]
    layout = _layout("records per window", updatemenus=_menu(buttons))
    layout["margin"]["t"] = 40
    return {"data": data, "layout": layout}


def group_last_seen(*tables: Sequence[Row]) -> dict[str, dt.datetime]:
    """Per group id, the latest time any of these rows saw it (rebalance ends, commits, lag readings).

    A group's last generation is drawn until then: past that the wire says nothing, and with several
    captures in one dataset the global end could be days after a group's capture stopped."""
    out: dict[str, dt.datetime] = {}
    for rows in tables:
        for r in rows:
            if r.get("group_id") is None:
                continue
            for col in ("end_ts", "start_ts", "ts", "committed_ts", "high_watermark_ts", "fetch_ts", "last_ts"):
                ts = parse_ts(r.get(col))
                g = str(r["group_id"])
                if ts is not None and (g not in out or ts > out[g]):
                    out[g] = ts
    return out


def rebalance_gantts(rebalances: Sequence[Row], members: Sequence[Row],
                     last_seen: Mapping[str, dt.datetime] | None = None,
                     limit: int = 12) -> list[tuple[str, int, Figure]]:
    """(group id, rebalances, figure) per group, the groups with the most rebalances first (at most ``limit``).

    Each figure has a "rebalancing" lane with every rebalance's span and one lane per member with a
    bar per generation it held, from the end of that rebalance to the start of the next (the last
    one to the group's last sighting). One figure per group, because groups of different captures
    can be days apart and would share no useful time axis."""
    groups: dict[str, list[Row]] = {}
    for r in rebalances:
        start = parse_ts(r.get("start_ts")) or parse_ts(r.get("end_ts"))
        if start is None:
            continue
        end = parse_ts(r.get("end_ts")) or start
        groups.setdefault(str(r.get("group_id")), []).append({**r, "_start": start, "_end": max(end, start)})
    by_gen: dict[tuple[str, str], list[Row]] = {}
    for m in members:
        by_gen.setdefault((str(m.get("group_id")), str(m.get("generation_id"))), []).append(m)
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))[:limit]
    return [(g, len(groups[g]), _gantt(g, groups[g], by_gen, (last_seen or {}).get(g))) for g in order]


def _gantt(g: str, rows: list[Row], by_gen: Mapping[tuple[str, str], list[Row]],
           last_seen: dt.datetime | None) -> Figure:
    gens = sorted(rows, key=lambda r: (r["_start"], number(r.get("generation_id")) or 0))
    span = (max(last_seen or gens[-1]["_end"], gens[-1]["_end"]) - gens[0]["_start"]).total_seconds()
    stub = dt.timedelta(seconds=max(span * 0.01, 0.05))  # nothing seen after a rebalance: a visible sliver
    lane = "<i>rebalancing</i>"  # markup no escaped client id can produce, so no member lane can clash
    lanes = [lane]
    reb: dict[str, list] = {"y": [], "base": [], "x": [], "text": [], "hover": []}
    mem: dict[str, list] = {"y": [], "base": [], "x": [], "text": [], "hover": [], "color": []}
    for i, r in enumerate(gens):
        gen = r.get("generation_id")
        ms = max((r["_end"] - r["_start"]).total_seconds() * 1000, 0.0)
        errs = r.get("errors") or []
        reb["y"].append(lane)
        reb["base"].append(plotly_ts(r["_start"]))
        reb["x"].append(max(ms, stub.total_seconds() * 1000 / 4))  # an instant rebalance stays visible
        reb["text"].append(f"g{esc(gen)}")
        reb["hover"].append(
            f"<b>{esc(g)}</b> generation {esc(gen)}<br>rebalance {ms:,.1f} ms, {esc(r.get('members'))} members"
            f"<br>protocol {esc(r.get('protocol'))}"
            + "".join(f"<br>{word}: {esc(', '.join(map(str, r[col])))}"
                      for col, word in (("members_joined", "joined"), ("members_left", "left"))
                      if isinstance(r.get(col), list) and r[col])
            + (f"<br>reason: {esc(r.get('reason'))}" if r.get("reason") else "")
            + (f"<br>errors: {esc(', '.join(map(str, errs)))}" if errs else ""))
        held_from = r["_end"]
        if i + 1 < len(gens):
            held_to, until = gens[i + 1]["_start"], "the next rebalance"
        elif last_seen is not None and last_seen > held_from:
            held_to, until = last_seen, "the group was last seen"
        else:
            held_to, until = held_from + stub, "nothing seen after this rebalance"
        gen_members = by_gen.get((g, str(gen)))
        if not gen_members:  # no group_members table: the client ids the rebalance row lists
            gen_members = [{"client_id": c, "member_id": f"{c}#{n}", "assigned_partitions": None}
                           for n, c in enumerate(r.get("member_client_ids") or [])]
        labels = _member_labels(gen_members)
        for m in gen_members:
            label = labels[str(m.get("member_id"))]
            if label not in lanes:
                lanes.append(label)
            parts = m.get("assigned_partitions") or []
            mem["y"].append(label)
            mem["base"].append(plotly_ts(held_from))
            mem["x"].append(max((held_to - held_from).total_seconds() * 1000, 1.0))
            mem["text"].append(f"g{esc(gen)}")
            mem["color"].append(PALETTE[i % len(PALETTE)])
            mem["hover"].append(
                f"<b>{esc(m.get('client_id'))}</b>, generation {esc(gen)}<br>member {esc(m.get('member_id'))}"
                f"<br>held until {until}"
                + (f"<br>partitions: {esc(', '.join(map(str, parts)))}" if parts else ""))
    common = {"type": "bar", "orientation": "h", "textposition": "inside", "insidetextanchor": "middle",
              "textfont": {"color": "#fff", "size": 10}, "hovertemplate": "%{hovertext}<extra></extra>"}
    data = [
        {**common, "name": "generation held", "y": mem["y"], "base": mem["base"], "x": mem["x"],
         "text": mem["text"], "hovertext": mem["hover"], "marker": {"color": mem["color"]}, "opacity": 0.85},
        {**common, "name": "rebalancing", "y": reb["y"], "base": reb["base"], "x": reb["x"], "text": reb["text"],
         "hovertext": reb["hover"], "marker": {"color": "#C62828"}},
    ]
    layout = _layout("", height=90 + 28 * len(lanes), barmode="overlay", showlegend=False)
    layout["yaxis"].update(type="category", categoryorder="array", categoryarray=lanes, autorange="reversed",
                           title={"text": ""}, gridcolor="#f2f2f6")
    layout["margin"].update(l=10, t=28, b=40)  # room for the mode bar above the first lane
    layout["xaxis"]["title"] = {"text": ""}
    return {"data": data, "layout": layout}


def _member_labels(members: list[Row]) -> dict[str, str]:
    """member_id -> lane label: the client id, told apart by the member id when it repeats."""
    per_client: dict[str, set[str]] = {}
    for m in members:
        per_client.setdefault(str(m.get("client_id")), set()).add(str(m.get("member_id")))
    labels = {}
    for m in members:
        cid, mid = str(m.get("client_id")), str(m.get("member_id"))
        suffix = f" ({esc(mid[-6:])})" if len(per_client[cid]) > 1 else ""
        labels[mid] = f"{esc(cid)}{suffix}"
    return labels


def lag_per_partition(rows: Sequence[Row], limit: int = 40) -> Figure | None:
    """Horizontal bars, the most lagging partition on top; one colour per consumer group (or client
    without a group). Partitions at lag 0 are counted in a note rather than drawn as empty lanes."""
    bars: list[tuple[float, str, Row]] = []
    caught_up = 0
    for r in rows:
        lag = number(r.get("lag"))
        if lag is None:
            continue
        if lag <= 0:
            caught_up += 1
            continue
        owner = r.get("group_id") or (f"client {r.get('client_id')}" if r.get("client_id") else "-")
        bars.append((lag, str(owner), r))
    if not bars:
        return None
    bars.sort(key=lambda b: (-b[0], b[1], str(b[2].get("topic")), number(b[2].get("partition")) or 0))
    hidden = len(bars) - limit
    bars = bars[:limit]
    owners = list(dict.fromkeys(o for _, o, _ in bars))
    labels = [f"{esc(r.get('topic'))}-{esc(r.get('partition'))} · {esc(o)}" for _, o, r in bars]
    data = []
    for i, owner in enumerate(owners):
        mine = [(lab, b) for lab, b in zip(labels, bars) if b[1] == owner]
        data.append({
            "type": "bar", "orientation": "h", "name": esc(owner), "y": [lab for lab, _ in mine],
            "x": [b[0] for _, b in mine], "marker": {"color": PALETTE[i % len(PALETTE)]},
            "customdata": [[esc(b[2].get("committed_offset")), esc(b[2].get("fetch_position")),
                            esc(b[2].get("high_watermark"))] for _, b in mine],
            "hovertemplate": ("%{y}<br>lag %{x:,}<br>committed %{customdata[0]}, fetch position %{customdata[1]}"
                              "<br>high watermark %{customdata[2]}<extra></extra>"),
        })
    notes = [f"{caught_up} partition rows at lag 0"] if caught_up else []
    if hidden > 0:
        notes.append(f"{hidden} smaller lags not drawn")
    layout = _layout("", x_title="lag (records)" + (f" · {'; '.join(notes)} (see the table)" if notes else ""),
                     x_type="linear", height=max(200, 90 + 22 * len(bars)), barmode="overlay")
    layout["yaxis"].update(type="category", categoryorder="array", categoryarray=labels, autorange="reversed",
                           title={"text": ""})
    layout["margin"].update(l=10, t=28)
    return {"data": data, "layout": layout}
