"""Inline SVG charts for the HTML reports: no script, no external asset, readable without
colour (every bar and point carries its value as text or a tooltip). Drawn on a phone's width
and shown at the page's, up to MAX_WIDTH, so no text is smaller than about 10 px on a 420 px
phone nor larger than about 16 px on a desktop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 440
MAX_WIDTH = 600  # px on the page: 1.36 times the drawing
PALETTE = ("#2f6db5", "#e07b24", "#3a9a5b", "#b8433b")
BAND_FILLS = ("#fdf1d8", "#e3ecf7", "#e4f2e7")  # the windows' shading, behind the lines
_FONT = 12  # every text: about 10 px where the page is 373 px wide


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    values: Sequence[float | None]  # one per category; None: not observed


@dataclass(frozen=True, slots=True)
class Band:
    """A window over the categories it covers (hours), shaded behind the lines."""

    label: str
    categories: frozenset[str]


def _frame(name: str, title: str, height: int, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(name)}" '
        f'role="img" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">'
        f"<title>{escape(title)}</title>"
        f'<text x="0" y="16" class="chart-title" font-size="{_FONT + 2}" font-weight="bold">'
        f"{escape(title)}</text>" + "".join(body) + "</svg>"
    )


def _legend(series: Sequence[Series], y: int) -> list[str]:
    parts = []
    x = 0
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{x + 16}" y="{y}" font-size="{_FONT}">{escape(s.label)}</text>')
        x += 16 + _text_width(s.label) + 16
    return parts


def _text_width(text: str) -> int:
    """Roughly, at _FONT: a Chinese character is as wide as the font is high."""
    return sum(_FONT if ord(c) > 0x2E80 else _FONT * 6 // 10 for c in text)


def _no_data(name: str, title: str, text: str) -> str:
    body = [
        f'<text x="{WIDTH // 2}" y="60" text-anchor="middle" font-size="14" fill="#777" '
        f'class="no-data">{escape(text)}</text>'
    ]
    return _frame(name, title, 90, body)


def bars(
    name: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Callable[[float | None], str],
    no_data: str,
    labelled: Callable[[str, str], str],
) -> str:
    """Horizontal grouped bars, one group per category, one bar per series, scaled to the
    largest value."""
    values = [v for s in series for v in s.values if v is not None]
    if not categories or not values:
        return _no_data(name, title, no_data)
    top = max(values) or 1.0
    label_width = min(max(_text_width(c) for c in categories) + 12, WIDTH // 3)
    bar_height, gap = 18, 10
    group_height = bar_height * len(series) + gap
    plot = WIDTH - label_width - 80
    body = _legend(series, 40)
    y = 56
    for c, category in enumerate(categories):
        body.append(
            f'<text x="{label_width - 8}" y="{y + group_height / 2 - 2:.0f}" text-anchor="end" '
            f'font-size="{_FONT}">{escape(category)}</text>'
        )
        for i, s in enumerate(series):
            value = s.values[c]
            by = y + i * bar_height
            text = fmt(value)
            if value is not None:
                width = max(plot * value / top, 1.0)
                body.append(
                    f'<rect x="{label_width}" y="{by}" width="{width:.1f}" '
                    f'height="{bar_height - 3}" fill="{PALETTE[i % len(PALETTE)]}">'
                    f"<title>{escape(labelled(s.label, text))}</title></rect>"
                )
            else:
                width = 0.0
            body.append(
                f'<text x="{label_width + width + 4:.1f}" y="{by + bar_height - 5}" '
                f'font-size="{_FONT}" class="value">{escape(text)}</text>'
            )
        y += group_height
    return _frame(name, title, y + 10, body)


def lines(
    name: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    fmt: Callable[[float | None], str],
    no_data: str,
    labelled: Callable[[str, str], str],
    *,
    axis: str,
    bands: Sequence[Band] = (),
    y_max: float | None = None,
) -> str:
    """Lines over categories (hours of the day), scaled to `y_max` or the largest value; a
    point not observed breaks its line. `axis` names the categories (the hours' timezone);
    each band shades the categories it covers, labelled above the plot."""
    values = [v for s in series for v in s.values if v is not None]
    if not categories or not values:
        return _no_data(name, title, no_data)
    top = y_max or max(values) or 1.0
    left, right, plot_top, plot_height = 44, 8, 76, 180
    plot_width = WIDTH - left - right
    step = plot_width / max(len(categories) - 1, 1)
    body = _legend(series, 40)
    bottom = plot_top + plot_height
    for b, band in enumerate(bands):
        fill = BAND_FILLS[b % len(BAND_FILLS)]
        spans = _runs([c in band.categories for c in categories])
        for first, last in spans:
            x = left + max(first - 0.5, 0) * step
            width = left + min(last + 0.5, len(categories) - 1) * step - x
            body.append(
                f'<rect class="band" x="{x:.1f}" y="{plot_top}" width="{width:.1f}" '
                f'height="{plot_height}" fill="{fill}"><title>{escape(band.label)}</title></rect>'
            )
        if spans:  # named once, over its longest span
            first, last = max(spans, key=lambda r: r[1] - r[0])
            x = min(left + max(first - 0.5, 0) * step, WIDTH - _text_width(band.label))
            body.append(
                f'<text x="{x:.1f}" y="{plot_top - 6}" font-size="{_FONT}" '
                f'class="band-label">{escape(band.label)}</text>'
            )
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        ty = bottom - tick * plot_height
        body.append(
            f'<line x1="{left}" y1="{ty:.1f}" x2="{WIDTH - right}" y2="{ty:.1f}" '
            f'stroke="#ddd" stroke-width="1"/>'
            f'<text x="{left - 4}" y="{ty + 4:.1f}" text-anchor="end" font-size="{_FONT}">'
            f"{escape(fmt(tick * top))}</text>"
        )
    every = max(-(-len(categories) * 2 * _FONT // plot_width), 1)  # room for two digits each
    for c, category in enumerate(categories):
        if c % every == 0:
            body.append(
                f'<text x="{left + c * step:.1f}" y="{bottom + 16}" text-anchor="middle" '
                f'font-size="{_FONT}">{escape(category)}</text>'
            )
    body.append(
        f'<text x="{left + plot_width / 2:.1f}" y="{bottom + 34}" text-anchor="middle" '
        f'font-size="{_FONT}" class="axis">{escape(axis)}</text>'
    )
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        runs: list[list[str]] = [[]]
        for c, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            x, y = left + c * step, bottom - min(value / top, 1.0) * plot_height
            runs[-1].append(f"{x:.1f},{y:.1f}")
            body.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}">'
                f"<title>{escape(categories[c])} {escape(labelled(s.label, fmt(value)))}"
                "</title></circle>"
            )
        body += [
            f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" '
            f'stroke-width="2"/>'
            for points in runs
            if len(points) > 1
        ]
    return _frame(name, title, bottom + 44, body)


def _runs(marks: Sequence[bool]) -> list[tuple[int, int]]:
    """The first and last index of each run of marked categories."""
    runs: list[tuple[int, int]] = []
    for i, marked in enumerate(marks):
        if not marked:
            continue
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs
