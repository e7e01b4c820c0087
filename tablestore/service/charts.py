"""Inline SVG charts for the status page (tablestore.service.page): plain markup, no JavaScript, every label escaped.

- `timeline(rows, ...)`: marks on a shared time axis, one row per kind of event (a mark's `<title>` is its tooltip);
- `line_chart(series, ...)`: integer values over time, one polyline per series, with a legend.
Times are epoch milliseconds, shown in UTC.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from html import escape
from typing import Mapping, Sequence

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_LEFT, _RIGHT, _TOP, _BOTTOM = 200, 20, 10, 28


@dataclass(frozen=True)
class Mark:
    """One event on a timeline: when, its tooltip, its colour."""

    time_ms: int
    title: str
    color: str = PALETTE[0]


def _clock(ms: float, span_ms: float) -> str:
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%H:%M:%S" if span_ms < 86_400_000 else "%m-%d %H:%M")


def _range(times: Sequence[int], span: tuple[float, float] | None = None) -> tuple[float, float]:
    lo, hi = span if span is not None else (min(times), max(times)) if times else (0, 1)
    if hi - lo < 1000:   # one instant: a window of a few seconds around it
        lo, hi = lo - 2500, hi + 2500
    return float(lo), float(hi)


def _axis(lo: float, hi: float, x0: float, x1: float, y: float) -> list[str]:
    parts = [f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#888"/>']
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<text x="{x:.1f}" y="{y + 16}" font-size="11" text-anchor="{anchor}" fill="#555">'
                     f'{_clock(lo + (hi - lo) * i / 4, hi - lo)}</text>')
    return parts


def timeline(rows: Mapping[str, Sequence[Mark]], *, width: int = 1100, row_height: int = 26,
             label: str = "timeline", span: tuple[float, float] | None = None) -> str:
    """One row per key of `rows` (its label on the left), each mark a circle at its time; `span`: the time axis
    (epoch ms), else the marks' first to last."""
    times = [m.time_ms for marks in rows.values() for m in marks]
    lo, hi = _range(times, span)
    height = _TOP + row_height * max(1, len(rows)) + _BOTTOM
    x0, x1 = _LEFT, width - _RIGHT
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{escape(label)}" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for i, (name, marks) in enumerate(rows.items()):
        y = _TOP + row_height * i + row_height / 2
        parts.append(f'<text x="{x0 - 8}" y="{y + 4}" font-size="12" text-anchor="end">{escape(name)} '
                     f'({len(marks)})</text>')
        parts.append(f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#eee"/>')
        for m in marks:
            if not lo <= m.time_ms <= hi:
                continue
            x = x0 + (x1 - x0) * (m.time_ms - lo) / (hi - lo)
            parts.append(f'<circle cx="{x:.1f}" cy="{y}" r="5" fill="{m.color}" fill-opacity="0.8">'
                         f'<title>{escape(m.title)}</title></circle>')
    parts += _axis(lo, hi, x0, x1, _TOP + row_height * max(1, len(rows)) + 4)
    parts.append("</svg>")
    return "".join(parts)


def line_chart(series: Mapping[str, Sequence[tuple[int, float]]], *, width: int = 1100, height: int = 220,
               label: str = "chart", y_label: str = "", limit: tuple[str, float] | None = None,
               span: tuple[float, float] | None = None) -> str:
    """One polyline per series of (time_ms, value) points; the y axis from 0 to the largest value (and `limit`, a
    dashed line with its label, when given); `span` as `timeline`'s."""
    times = [t for points in series.values() for t, _ in points]
    lo, hi = _range(times, span)
    top = max([v for points in series.values() for _, v in points] + ([limit[1]] if limit else []), default=1) or 1
    top = math.ceil(top / 4) * 4   # whole ticks
    x0, x1, y0, y1 = _LEFT, width - _RIGHT, height - _BOTTOM, _TOP
    legend_h = 18 * ((len(series) + 5) // 6)
    total = height + legend_h
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{escape(label)}" '
             f'width="{width}" height="{total}" viewBox="0 0 {width} {total}">']
    for i in range(5):
        value = top * i / 4
        y = y0 + (y1 - y0) * i / 4
        parts.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#555">'
                     f'{value:g}</text>')
    if limit is not None:
        y = y0 + (y1 - y0) * limit[1] / top
        parts.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#d62728" stroke-dasharray="6 4"/>'
                     f'<text x="{x1}" y="{y + 14:.1f}" font-size="11" text-anchor="end" fill="#d62728">'
                     f'{escape(limit[0])}</text>')
    if y_label:
        parts.append(f'<text x="12" y="{(y0 + y1) / 2:.0f}" font-size="12" text-anchor="middle" '
                     f'transform="rotate(-90 12 {(y0 + y1) / 2:.0f})">{escape(y_label)}</text>')
    for i, (name, points) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        xy = [(x0 + (x1 - x0) * (t - lo) / (hi - lo), y0 + (y1 - y0) * v / top) for t, v in points if lo <= t <= hi]
        if not xy:
            pass
        elif len(xy) == 1:
            parts.append(f'<circle cx="{xy[0][0]:.1f}" cy="{xy[0][1]:.1f}" r="3" fill="{color}"/>')
        else:
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2">'
                         f'<title>{escape(name)}</title></polyline>')
        lx, ly = x0 + (i % 6) * 140, height + 4 + 18 * (i // 6)
        parts.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{lx + 16}" y="{ly + 10}" font-size="12">{escape(name)}</text>')
    parts += _axis(lo, hi, x0, x1, y0)
    parts.append("</svg>")
    return "".join(parts)
