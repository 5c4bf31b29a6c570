"""The usage page's stacked bar chart of GPU-hours over time, as inline SVG built here (pure: no Django, no
script, no CDN): one bar per step (hour or day), one stacked segment per top group, the rest as "other",
with a legend. Every name is escaped; the caller marks the string safe."""

from html import escape

WIDTH, HEIGHT = 720, 180
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 8, 22
COLOURS = ("#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#9ca3af")


def _nice(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for factor in (1, 2, 5, 10):
        if value <= factor * magnitude:
            return float(factor * magnitude)
    return float(10 * magnitude)


def stacked_bars(labels: list[str], names: list[str], values: list[list[float]], *, title: str) -> str:
    """`values[series][step]` GPU-hours; `labels[step]` the x-axis text of each step."""
    if not labels or not names:
        return '<p class="muted" data-testid="usage-chart-empty">No usage in this period.</p>'
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    totals = [sum(series[step] for series in values) for step in range(len(labels))]
    top = _nice(max(totals))
    bar_w = plot_w / len(labels)
    parts = [f'<svg class="usage-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="{escape(title)}" data-testid="usage-chart"><title>{escape(title)}</title>',
             f'<text x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end" font-size="10">{top:g}</text>',
             f'<text x="{LEFT - 4}" y="{TOP + plot_h}" text-anchor="end" font-size="10">0</text>',
             f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" stroke="#999"/>']
    for step, label in enumerate(labels):
        base = TOP + plot_h
        x = LEFT + step * bar_w
        for index, name in enumerate(names):
            amount = values[index][step]
            if amount <= 0:
                continue
            height = amount / top * plot_h
            base -= height
            parts.append(f'<rect x="{x + 0.5:.1f}" y="{base:.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
                         f'height="{height:.1f}" fill="{COLOURS[index % len(COLOURS)]}">'
                         f'<title>{escape(label)} {escape(name)}: {amount:,.2f} GPU-hours</title></rect>')
    every = max(1, len(labels) // 8)
    for step in range(0, len(labels), every):
        parts.append(f'<text x="{LEFT + step * bar_w:.1f}" y="{HEIGHT - 6}" font-size="10">'
                     f'{escape(labels[step])}</text>')
    parts.append("</svg>")
    # Swatches as SVG (a fill attribute), since the site's CSP allows no inline style.
    legend = "".join(f'<li><svg class="swatch" viewBox="0 0 10 10" aria-hidden="true"><rect width="10" height="10" '
                     f'fill="{COLOURS[index % len(COLOURS)]}"/></svg>{escape(name or "(none)")}</li>'
                     for index, name in enumerate(names))
    return "".join(parts) + f'<ul class="usage-legend">{legend}</ul>'
