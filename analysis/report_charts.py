"""The report's charts: plotly.js figure specs (plain dicts) built from result rows.

Each builder takes the rows of one or two result tables (``analyze --json``'s
shape: dicts, timestamps as ISO-8601 strings) and returns a figure dict
``{"data": [...], "layout": {...}}`` for ``Plotly.newPlot``, or None when the
rows hold nothing to draw. No plotly Python API and no pandas: the figures are
data, and the page ships plotly.js itself (see ``html_report``).

The ``*_over_time`` charts share a :class:`Timeline`: every window from the
first to the last, so an empty window is drawn (at zero, or as a break in a
latency line) rather than left out, with the stretches between captures far
apart cut from the axis and marked. Counts are bars one window wide, latency
steps across each window: nothing suggests a value between two windows.

Strings that come off the wire (client ids, topics, group ids, error names)
are HTML-escaped before they go into a figure: plotly.js renders labels,
legend names and hover text as a small HTML dialect (``<b>``, ``<a href>``),
and it decodes entities back, so an escaped label shows exactly as captured.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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


# --------------------------------------------------------------------------
# The time axis shared by the *_over_time charts

IDLE_WINDOWS = 10        # an idle stretch is cut from the time axis when longer than this many windows
                         # and than the windows with traffic (captures far apart, not a pause in one)
MAX_WINDOWS = 2000       # more windows than this are not drawn (a chart of them would not be readable)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def window_step(*tables: Sequence[Row]) -> dt.timedelta | None:
    """The windows' width (``window_end - window_start``), the most common one when rows disagree."""
    widths: dict[dt.timedelta, int] = {}
    starts = set()
    for rows in tables:
        for r in rows:
            a, b = parse_ts(r.get("window_start")), parse_ts(r.get("window_end"))
            if a is not None and b is not None and b > a:
                widths[b - a] = widths.get(b - a, 0) + 1
            elif a is not None:
                starts.add(a)
    if widths:
        return max(widths, key=lambda w: (widths[w], w))
    gaps = [b - a for a, b in zip(sorted(starts), sorted(starts)[1:])]  # rows without their ends
    return min(gaps) if gaps else None


def duration_label(step: dt.timedelta) -> str:
    """``1 s``, ``250 ms``, ``5 min``, ``1 h``, ``1 day``: a window's width as a reader says it."""
    s = step.total_seconds()
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if s >= size and (s / size).is_integer():
            n = int(s / size)
            return f"{n} {unit}" + ("s" if unit == "day" and n != 1 else "")
    return f"{s * 1000:g} ms" if s < 1 else f"{s:g} s"


def span_label(seconds: float, short: bool = False) -> str:
    """``3.6 years``, ``145 days``, ``2.0 h``: a stretch of time (``short``: ``3.6 y``, ``145 d``)."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size or (unit in ("h", "min") and seconds >= size):
            n = seconds / size
            text = f"{n:.0f}" if n >= 10 else f"{n:.1f}"
            return f"{text} {unit[0] if short and unit in ('years', 'days') else unit}"
    return f"{seconds:.0f} s"


@dataclass(frozen=True)
class Timeline:
    """Every window the time-series charts draw, one step apart, with the idle stretches cut out.

    ``starts`` are the windows' start times; a window no table has a row for is drawn empty (zero
    for counts, no line for latency). Where nothing at all happened for more than ``IDLE_WINDOWS``
    windows (captures days apart in one dataset), the stretch is left out of the axis and marked:
    ``breaks`` holds each as (end of the window before it, start of the window after it)."""

    step: dt.timedelta
    starts: tuple[dt.datetime, ...]
    breaks: tuple[tuple[dt.datetime, dt.datetime], ...] = ()
    too_many: int = 0      # windows there would have been, when more than MAX_WINDOWS (then none is drawn)

    @property
    def label(self) -> str:
        return duration_label(self.step)

    @property
    def end(self) -> dt.datetime:
        return self.starts[-1] + self.step

    def index(self) -> dict[dt.datetime, int]:
        return {s: i for i, s in enumerate(self.starts)}

    def runs(self) -> list[list[dt.datetime]]:
        """The windows of each stretch drawn, between the cut-out ones."""
        out: list[list[dt.datetime]] = []
        for s in self.starts:
            if out and s - out[-1][-1] == self.step:
                out[-1].append(s)
            else:
                out.append([s])
        return out

    def window_of(self, ts: dt.datetime) -> dt.datetime:
        """The start of the window holding ``ts``."""
        return _floor(ts, self.step, self.starts[0])

    def window_text(self, start: dt.datetime) -> str:
        """``05:27:48 – 05:27:49`` (dates left out within one day; sub-second digits only when needed)."""
        end = start + self.step
        fine = self.step.total_seconds() % 1 or start.microsecond
        fmt = "%H:%M:%S.%f" if fine else "%H:%M:%S"
        cut = (lambda t: t.strftime(fmt)[:-3]) if fine else (lambda t: t.strftime(fmt))
        if self.step >= dt.timedelta(days=1):
            return f"{start:%Y-%m-%d}" if self.step == dt.timedelta(days=1) else f"{start:%Y-%m-%d} – {end:%Y-%m-%d}"
        head = "" if start.date() == self.starts[0].date() == self.starts[-1].date() else f"{start:%Y-%m-%d} "
        return f"{head}{cut(start)} – {cut(end)}"

    def tick_text(self, t: dt.datetime) -> str:
        if self.step >= dt.timedelta(days=1) or (t.hour, t.minute, t.second, t.microsecond) == (0, 0, 0, 0):
            return f"{t:%Y-%m-%d}"
        return f"{t:%Y-%m-%d %H:%M:%S}" if not self.step.total_seconds() % 1 else f"{t:%Y-%m-%d %H:%M:%S.%f}"[:-3]

    def caption(self) -> str:
        """What the axis shows, in one sentence: the window width, how many, and what was cut out."""
        if self.too_many:
            return (f"{self.too_many:,} windows of {self.label}: too many to draw; analyze with a larger "
                    "--window to see them.")
        n = len(self.starts)
        if n == 1:
            text = f"One {self.label} window ({self.window_text(self.starts[0])}): the whole capture falls in it."
        else:
            text = f"{n} windows of {self.label} each, {self.window_text(self.starts[0]).split(' – ')[0]} to " \
                   f"{self._at(self.end)}."
        if self.breaks:
            longest = max((b - a).total_seconds() for a, b in self.breaks)
            text += (f" {len(self.breaks)} stretch{'es' * (len(self.breaks) != 1)} without traffic "
                     f"(the longest {span_label(longest)}) {'are' if len(self.breaks) != 1 else 'is'} cut out "
                     "of the time axis at the dashed lines.")
        return text

    def _at(self, t: dt.datetime) -> str:
        if self.step >= dt.timedelta(days=1):
            return f"{t:%Y-%m-%d}"
        same_day = self.starts[0].date() == (self.end - dt.timedelta(microseconds=1)).date()
        text = t.strftime("%H:%M:%S.%f")[:-3] if self.step.total_seconds() % 1 else t.strftime("%H:%M:%S")
        return text if same_day else f"{t:%Y-%m-%d} {text}"


def _floor(ts: dt.datetime, step: dt.timedelta, origin: dt.datetime = EPOCH) -> dt.datetime:
    """The start of the window holding ``ts`` on the grid of windows ``step`` wide through ``origin``
    (Spark's are aligned to the epoch; a table's own first window says where its grid lies)."""
    us = step // dt.timedelta(microseconds=1)
    since = (ts - origin) // dt.timedelta(microseconds=1)
    return origin + dt.timedelta(microseconds=since - since % us)


def timeline(*tables: Sequence[Row], first_ts: object = None, last_ts: object = None,
             idle_windows: int = IDLE_WINDOWS, max_windows: int = MAX_WINDOWS) -> Timeline | None:
    """The windows of the ``*_over_time`` tables given, complete from the first to the last (and over
    ``first_ts``..``last_ts``, the capture span, when given). An idle stretch longer than ``idle_windows``
    and than the number of windows with traffic is cut out: that keeps a pause within a capture on the
    axis and leaves out the days between captures far apart. None when no row has a window."""
    step = window_step(*tables)
    if step is None:
        return None
    starts_seen = [ts for rows in tables for r in rows if (ts := parse_ts(r.get("window_start"))) is not None]
    origin = min(starts_seen, default=EPOCH)
    active = {_floor(ts, step, origin) for ts in starts_seen}
    for t in (parse_ts(first_ts), parse_ts(last_ts)):
        if t is not None and active:
            active.add(_floor(t, step, origin))
    ordered = sorted(active)
    starts: list[dt.datetime] = []
    breaks: list[tuple[dt.datetime, dt.datetime]] = []
    total = 0
    for prev, cur in zip([None, *ordered], ordered):
        if prev is not None:
            missing = (cur - prev) // step - 1
            if missing > max(idle_windows, len(ordered)):
                breaks.append((prev + step, cur))
            else:
                total += missing
                if total <= max_windows:
                    starts += [prev + step * k for k in range(1, missing + 1)]
        total += 1
        if total <= max_windows:
            starts.append(cur)
    if total > max_windows:
        return Timeline(step, (), (), too_many=total)
    return Timeline(step, tuple(starts), tuple(breaks))


def _time_layout(tl: Timeline, y_title: str, **kw: Any) -> dict[str, Any]:
    """A date x axis over exactly the timeline's windows (a little margin), its idle stretches cut out."""
    pad = tl.step * 0.15 if len(tl.starts) == 1 else tl.step * 0.3
    layout = _layout(y_title, **kw)
    # The windows drawn, for whoever checks the picture against the tables (the report's browser test).
    layout["meta"] = {"windows": [plotly_ts(t) for t in tl.starts], "step_ms": tl.step.total_seconds() * 1000}
    layout["xaxis"].update(range=[plotly_ts(tl.starts[0] - pad), plotly_ts(tl.end + pad)],
                           title={"text": f"time (UTC) · windows of {tl.label}"})
    if tl.breaks:
        # A break starts a hair after the window before it ends: plotly drops a point on a break's
        # lower bound, which would leave that window's step without its end.
        layout["xaxis"]["rangebreaks"] = [{"bounds": [plotly_ts(a + tl.step / 1000), plotly_ts(b)]}
                                          for a, b in tl.breaks]
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": plotly_ts(a), "x1": plotly_ts(a),
                             "y0": 0, "y1": 1, "line": {"color": "#888", "width": 1, "dash": "dot"}}
                            for a, _ in tl.breaks]
        layout["annotations"] = [{"x": plotly_ts(a), "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom",
                                  "text": f"+{span_label((b - a).total_seconds(), short=True)}", "showarrow": False,
                                  "font": {"size": 10, "color": "#666"}} for a, b in tl.breaks]
        # Plotly's own ticks fall on round dates that may be cut out: a tick at the start of each stretch
        # drawn, and at its last window when it has a few.
        ticks = []
        for run in tl.runs():
            ticks += [run[0], run[-1]] if len(run) >= 3 else [run[0]]
        every = max(1, -(-len(ticks) // 20))
        ticks = ticks[::every]
        layout["xaxis"].update(tickmode="array", tickvals=[plotly_ts(t) for t in ticks],
                               ticktext=[tl.tick_text(t) for t in ticks], tickangle=-30)
    return layout


def _page_timeline(tl: Timeline | None, *tables: Sequence[Row]) -> Timeline | None:
    tl = tl or timeline(*tables)
    return tl if tl is not None and tl.starts else None


def _window_hover(tl: Timeline) -> list[str]:
    return [tl.window_text(s) for s in tl.starts]


def latency_over_time(rows: Sequence[Row], tl: Timeline | None = None) -> Figure | None:
    """One stepped line per api across each window's width; buttons switch the percentile. A window
    without exchanges of that api breaks the line. Log y: p50 and p99 differ by decades."""
    series = _series(rows, "api_name", "window_start")
    stats = [s for s in ("p50_ms", "p90_ms", "p99_ms", "max_ms") if any(number(r.get(s)) for r in rows)]
    tl = _page_timeline(tl, rows)
    if not series or not stats or tl is None:
        return None
    shown = "p99_ms" if "p99_ms" in stats else stats[-1]
    # The worst apis first, so the visible ones are those worth looking at.
    order = sorted(series, key=lambda a: -max((number(r.get(shown)) or 0) for r in series[a]))[:MAX_TRACES]
    where = tl.index()
    hover = _window_hover(tl)

    def steps(api: str, stat: str) -> tuple[list[str | None], list[float | None], list[list[Any]]]:
        """Two points per window with a value (its start and end), None where a window has none."""
        value: dict[int, Row] = {}
        for r in series[api]:
            i = where.get(tl.window_of(r["_ts"]))
            if i is not None and positive(r.get(stat)) is not None:
                value[i] = r
        points: list[tuple[str | None, float | None, list[Any]]] = []
        gap = (None, None, [None, None])
        for i, start in enumerate(tl.starts):
            r = value.get(i)
            ended = points and points[-1][0] is not None
            if r is None:
                if ended:
                    points.append(gap)
                continue
            if ended and points[-1][0] != plotly_ts(start):  # a cut-out stretch before it
                points.append(gap)
            y = positive(r.get(stat))
            points += [(plotly_ts(t), y, [hover[i], number(r.get("count"))]) for t in (start, start + tl.step)]
        return [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]

    data = []
    for i, api in enumerate(order):
        xs, ys, info = steps(api, shown)
        data.append({
            "type": "scatter", "mode": "lines", "name": esc(api), "x": xs, "y": ys, "customdata": info,
            "hovertemplate": f"{esc(api)}<br>%{{customdata[0]}}<br>%{{y:.3~f}} ms · %{{customdata[1]}} exchanges"
                             "<extra></extra>",
            "line": {"width": 2, "color": PALETTE[i % len(PALETTE)], "simplify": False},
            "connectgaps": False, **({} if i < MAX_SERIES else {"visible": "legendonly"}),
        })
    buttons = []
    for s in stats:
        per = [steps(a, s) for a in order]
        buttons.append({"label": s.removesuffix("_ms"), "method": "restyle",
                        "args": [{"x": [p[0] for p in per], "y": [p[1] for p in per],
                                  "customdata": [p[2] for p in per]}]})
    layout = _time_layout(tl, "latency (ms, log)", y_type="log", updatemenus=_menu(buttons))
    layout["yaxis"]["dtick"] = log_ticks([positive(r.get(s)) for r in rows for s in stats])
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


def log_ticks(values: Iterable[float | None]) -> int | str:
    """Tick spacing of a log axis over ``values``: every digit within a decade or so (``D1``), 1-2-5
    over a few decades (``D2``), one label a decade beyond (minor labels would crowd it)."""
    vals = [v for v in values if v]
    decades = math.log10(max(vals) / min(vals)) if vals else 0.0
    return "D1" if decades <= 1.5 else "D2" if decades <= 3 else 1


def _top_and_rest(series: Mapping[str, list[Row]], weight: Callable[[Row], float], limit: int
                  ) -> tuple[list[str], list[str]]:
    order = sorted(series, key=lambda k: (-sum(weight(r) for r in series[k]), k))
    return order[:limit], order[limit:]


def _per_window(tl: Timeline, rows: Iterable[Row], col: str) -> list[float]:
    """``col`` summed per timeline window; 0 for a window without rows."""
    where = tl.index()
    out = [0.0] * len(tl.starts)
    for r in rows:
        i = where.get(tl.window_of(r["_ts"]))
        if i is not None:
            out[i] += number(r.get(col)) or 0.0
    return out


OTHER = "other"   # the bar of every series past the twelfth: hatched, no colour of its own


def _bars(tl: Timeline, name: str, ys: list[float], color: str, hover: list[str], **kw: Any) -> dict[str, Any]:
    """Bars exactly one window wide, from each window's start; empty windows are there, at zero."""
    marker: dict[str, Any] = {"color": color, "line": {"width": 0.5, "color": "#fff"}}
    if color == OTHER:
        marker.update(color="#e4e4ea", pattern={"shape": "/", "fgcolor": "#8a8a96", "solidity": 0.3})
    return {"type": "bar", "name": name, "x": [plotly_ts(s) for s in tl.starts], "y": ys,
            "width": tl.step.total_seconds() * 1000, "offset": 0, "customdata": hover, "marker": marker, **kw}


def errors_over_time(rows: Sequence[Row], tl: Timeline | None = None) -> Figure | None:
    """Stacked bars one window wide: one colour per error (and the api it came from); the errors past
    the twelve most frequent stack as one "other errors" bar, so each window's total stays whole."""
    keyed = [{**r, "_key": f"{r.get('error_name')} · {r.get('api_name')}"} for r in rows
             if number(r.get("count"))]
    series = _series(keyed, "_key", "window_start")
    tl = _page_timeline(tl, rows)
    if not series or tl is None:
        return None
    count = lambda r: number(r.get("count")) or 0.0  # noqa: E731
    top, rest = _top_and_rest(series, count, MAX_SERIES)
    hover = _window_hover(tl)
    data = [_bars(tl, esc(k), _per_window(tl, series[k], "count"), PALETTE[i % len(PALETTE)], hover,
                  hovertemplate=f"{esc(k)}<br>%{{customdata}}<br>%{{y:,}} errors<extra></extra>")
            for i, k in enumerate(top)]
    if rest:
        data.append(_bars(tl, f"{len(rest)} other errors", _per_window(tl, [r for k in rest for r in series[k]],
                                                                           "count"), OTHER, hover,
                          hovertemplate="other errors<br>%{customdata}<br>%{y:,}<extra></extra>"))
    layout = _time_layout(tl, "errors per window", barmode="stack")
    return {"data": data, "layout": layout}


def throughput_over_time(rows: Sequence[Row], tl: Timeline | None = None) -> Figure | None:
    """Two panels of stacked bars one window wide, produced above and fetched below, one colour per
    topic (the busiest twelve, the rest as "other topics"); buttons switch records and bytes."""
    series = _series(rows, "topic", "window_start")
    tl = _page_timeline(tl, rows)
    if not series or tl is None:
        return None
    size = lambda r: (number(r.get("produced_bytes")) or 0) + (number(r.get("fetched_bytes")) or 0)  # noqa: E731
    top, rest = _top_and_rest(series, size, MAX_SERIES)
    groups = [(esc(t), series[t], PALETTE[i % len(PALETTE)]) for i, t in enumerate(top)]
    if rest:
        groups.append((f"{len(rest)} other topics", [r for t in rest for r in series[t]], OTHER))
    hover = _window_hover(tl)
    data, cols = [], []
    ways = [way for way in ("produced", "fetched")   # a panel only for what happened
            if any(number(r.get(f"{way}_records")) or number(r.get(f"{way}_bytes")) for r in rows)]
    for way, axis in zip(ways, ("y", "y2")):
        for name, pts, color in groups:
            if not any(number(r.get(f"{way}_records")) or number(r.get(f"{way}_bytes")) for r in pts):
                continue
            cols.append((way, pts))
            data.append(_bars(tl, name, _per_window(tl, pts, f"{way}_records"), color, hover, yaxis=axis,
                              legendgroup=name, meta=way, showlegend=not any(d["name"] == name for d in data),
                              hovertemplate=f"{name} {way}<br>%{{customdata}}<br>%{{y:,}}<extra></extra>"))
    if not data:
        return None
    buttons = [{"label": unit, "method": "update",
                "args": [{"y": [_per_window(tl, pts, f"{way}_{unit}") for way, pts in cols]},
                         {f"yaxis{'' if i == 0 else 2}.title.text": f"{way} {unit}" for i, way in enumerate(ways)}]}
               for unit in ("records", "bytes")]
    layout = _time_layout(tl, f"{ways[0]} records", barmode="stack", height=460 if len(ways) == 2 else 360,
                          updatemenus=_menu(buttons))
    if len(ways) == 2:
        layout["yaxis"]["domain"] = [0.55, 1.0]
        layout["yaxis2"] = {**_axis("fetched records"), "domain": [0.0, 0.45], "anchor": "x"}
        layout["xaxis"]["anchor"] = "y2"   # the time axis under the lower panel, the upper one sharing it
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
