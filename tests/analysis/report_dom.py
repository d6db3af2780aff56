"""What a rendered report's time-series charts must show, checked from the DOM headless chromium built.

Not a test module: ``test_html_report`` and ``test_report_samples`` open reports with :data:`PROBE`
and hand what it returns, with the results the report was drawn from, to :func:`time_series_problems`.
A chart's windows are read from the page (``layout.meta.windows``) and held to the result tables:
every window of a table is drawn, the windows are consecutive except where the axis cuts out a
stretch in which no table has a row, every bar trace has one bar per window, all of one window's
width, whose stacks add up to the table's figures, and every latency line has as many separate
pieces as the api has runs of windows with a value, two vertices per window: no gap is joined.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

OVER_TIME = ("latency_over_time", "errors_over_time", "throughput_over_time")
IDLE_WINDOWS = 10  # analysis.report_charts.IDLE_WINDOWS: the least a cut-out stretch may hold

PROBE = """(function () {
  return {
    charts: Array.from(document.querySelectorAll('.kd-chart')).map(function (div) {
      var drawn = Array.from(div.querySelectorAll('g.trace')).map(function (g) {
        var cd = g.__data__, trace = cd && cd[0] && cd[0].trace;
        var lines = Array.from(g.querySelectorAll('path.js-line'));  // one path per piece
        return {index: trace ? trace.index : null, type: trace ? trace.type : null,
                bars: Array.from(g.querySelectorAll('g.point path')).map(function (p) {
                  return p.getAttribute('d') || ''; }),
                line: lines.map(function (p) { return p.getAttribute('d') || ''; }).join(' ')};
      });
      var layout = div.layout || {}, xa = layout.xaxis || {}, card = div.closest('figure');
      var caption = card && card.querySelector('p.caption');
      return {id: div.id, table: div.getAttribute('data-table'), drawn: drawn,
              meta: layout.meta || null, caption: caption ? caption.textContent : '',
              breaks: (xa.rangebreaks || []).map(function (b) { return b.bounds; }),
              data: (div.data || []).map(function (t) {
                return {name: t.name, type: t.type, x: t.x, y: t.y, meta: t.meta || null,
                        visible: t.visible === undefined ? true : t.visible}; })};
    }),
    tables: Array.from(document.querySelectorAll('table.kd-table')).filter(function (t) {
      return t.checkVisibility(); }).map(function (t) {
      var wrap = t.closest('.tablewrap');
      return {table: t.getAttribute('data-table') || '', width: t.scrollWidth,
              room: wrap ? wrap.clientWidth : 0};
    }),
    pageWidth: document.documentElement.scrollWidth, viewWidth: window.innerWidth
  };
})()"""


def ts(text: object) -> dt.datetime:
    """An ISO time of the results or a plotly time (both UTC) as an aware datetime."""
    value = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value


def _bar_box(d: str) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1) of a plotly bar path ``Mx0,y0Vy1Hx1Vy0Z``."""
    m = re.fullmatch(r"M([-\d.e]+),([-\d.e]+)V([-\d.e]+)H([-\d.e]+)V[-\d.e]+Z", d)
    assert m, d
    x0, y0, y1, x1 = map(float, m.groups())
    return x0, x1, y0, y1


def _step(tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> dt.timedelta:
    widths = {ts(r["window_end"]) - ts(r["window_start"]) for rows in tables.values() for r in rows}
    assert len(widths) == 1, widths
    return widths.pop()


def time_series_problems(results: Mapping[str, Sequence[Mapping[str, Any]]], seen: Mapping[str, Any]) -> list[str]:
    """Every way the drawn time-series charts differ from their tables (an empty list: none)."""
    problems: list[str] = []
    tables = {t: list(results.get(t) or []) for t in OVER_TIME}
    if not any(tables.values()):
        return [f"{c['id']}: drawn without rows" for c in seen["charts"] if c["table"] in OVER_TIME]
    step = _step(tables)
    busy = sorted({ts(r["window_start"]) for rows in tables.values() for r in rows})
    for chart in seen["charts"]:
        table = chart["table"]
        if table not in OVER_TIME:
            continue
        name = chart["id"]
        if not chart["caption"].strip():
            problems.append(f"{name}: no caption")
        windows = [ts(w) for w in (chart["meta"] or {}).get("windows", [])]
        breaks = [(ts(a), ts(b)) for a, b in chart["breaks"]]
        problems += _windows_problems(name, windows, breaks, step, tables[table], busy)
        at = {w: i for i, w in enumerate(windows)}
        if table == "latency_over_time":
            problems += _line_problems(name, chart, windows, at, step, tables[table])
        else:
            problems += _bar_problems(name, chart, windows, at, tables[table])
    return problems


def _windows_problems(name: str, windows: list[dt.datetime], breaks: list[tuple[dt.datetime, dt.datetime]],
                      step: dt.timedelta, rows: Sequence[Mapping[str, Any]], busy: list[dt.datetime]) -> list[str]:
    out = []
    if not windows:
        return [f"{name}: no windows"]
    missing = {ts(r["window_start"]) for r in rows} - set(windows)
    if missing:
        out.append(f"{name}: {len(missing)} windows of its table not drawn, e.g. {min(missing)}")
    for a, b in zip(windows, windows[1:]):
        if b - a == step:
            continue
        # A break starts within a thousandth of a window after the end of the one before it.
        if not any(a + step <= lo <= a + step + step / 1000 and hi == b for lo, hi in breaks):
            out.append(f"{name}: windows {a} and {b} are not consecutive and no break joins them")
            continue
        inside = [w for w in busy if a + step <= w < b]
        if inside:
            out.append(f"{name}: the stretch cut out after {a} holds windows with rows, e.g. {inside[0]}")
        if (b - a) // step - 1 <= IDLE_WINDOWS:
            out.append(f"{name}: a stretch of only {(b - a) // step - 1} windows cut out after {a}")
    return out


def _bar_problems(name: str, chart: Mapping[str, Any], windows: list[dt.datetime], at: Mapping[dt.datetime, int],
                  rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    widths = []
    for d in chart["drawn"]:
        trace = chart["data"][d["index"]]
        if len(d["bars"]) != len(windows) or len(trace["x"]) != len(windows):
            out.append(f"{name}: trace {trace['name']!r} has {len(d['bars'])} bars for {len(windows)} windows")
            continue
        if [ts(x) for x in trace["x"]] != windows:
            out.append(f"{name}: trace {trace['name']!r} is not drawn at the windows' starts")
        boxes = [_bar_box(p) for p in d["bars"]]
        widths += [x1 - x0 for x0, x1, *_ in boxes]
        if any(b[0] < a[1] - 0.5 for a, b in zip(boxes, boxes[1:])):
            out.append(f"{name}: trace {trace['name']!r} has bars overlapping the next window")
    if widths and max(widths) - min(widths) > 1.0:
        out.append(f"{name}: bars of different widths {min(widths):.1f}..{max(widths):.1f} px")
    # The stacks add up to the table, window by window (empty windows at zero).
    columns = {"errors_over_time": {None: "count"},   # throughput: a panel each, its traces' meta says which
               "throughput_over_time": {"produced": "produced_records", "fetched": "fetched_records"}}[chart["table"]]
    for way, col in columns.items():
        want = [0.0] * len(windows)
        for r in rows:
            want[at[ts(r["window_start"])]] += float(r.get(col) or 0)
        got = [0.0] * len(windows)
        for trace in chart["data"]:
            if trace["meta"] == way:
                for i, y in enumerate(trace["y"]):
                    got[i] += float(y or 0)
        if any(abs(a - b) > 1e-6 for a, b in zip(got, want)):
            out.append(f"{name}: the {col} stacks {got} are not the table's {want}")
    return out


def _line_problems(name: str, chart: Mapping[str, Any], windows: list[dt.datetime], at: Mapping[dt.datetime, int],
                   step: dt.timedelta, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for d in chart["drawn"]:
        trace = chart["data"][d["index"]]
        api = str(trace["name"])
        value = {at[ts(r["window_start"])]: float(r["p99_ms"]) for r in rows
                 if str(r.get("api_name")).replace("<", "&lt;").replace(">", "&gt;") == api.replace("&amp;", "&")
                 and r.get("p99_ms") and float(r["p99_ms"]) > 0}
        idx = sorted(value)
        runs = sum(1 for i, j in zip([None, *idx], idx) if i is None or j != i + 1
                   or windows[j] - windows[i] != step)
        path = d["line"] or ""
        pieces = path.count("M")
        vertices = len(re.findall(r"[ML]", path))
        if pieces != runs or vertices != 2 * len(idx):
            out.append(f"{name}: {api} drawn in {pieces} pieces of {vertices} points; its table has "
                       f"{len(idx)} windows in {runs} runs")
        drawn = {(ts(x), y) for x, y in zip(trace["x"], trace["y"]) if x is not None}
        want = {(windows[i] + k * step, v) for i, v in value.items() for k in (0, 1)}
        if drawn != want:
            out.append(f"{name}: {api}'s p99 per window differs from its table")
    return out


def layout_problems(seen: Mapping[str, Any]) -> list[str]:
    """Tables wider than their card, and a page wider than the window."""
    out = [f"table {t['table'] or '?'} is {t['width']} px wide in a card of {t['room']} px"
           for t in seen["tables"] if t["room"] and t["width"] > t["room"] + 1]
    if seen["pageWidth"] > seen["viewWidth"] + 1:
        out.append(f"the page is {seen['pageWidth']} px wide in a {seen['viewWidth']} px window")
    return out
