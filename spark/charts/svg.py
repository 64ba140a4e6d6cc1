"""SVG primitives the chart builders share: elements with coordinates to a tenth of a pixel and
text escaped, a chart's outer `<svg>` and its "no data" frame, and the stylesheet (`STYLE`) for
the classes they use.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from spark.units import trim

WIDTH, HEIGHT = 640, 280
FONT = 12

STYLE = """
svg.chart{max-width:100%;height:auto;display:block;font:12px system-ui,sans-serif}
svg.chart text{fill:var(--fg)}
svg.chart .tick,svg.chart .axis-label,svg.chart .note{fill:var(--muted)}
svg.chart .nodata{fill:var(--muted);font-size:16px}
svg.chart .frame{fill:none;stroke:var(--frame)}
svg.chart .axis{stroke:var(--frame)}
svg.chart .grid{stroke:var(--grid)}
svg.chart .s1{color:var(--s1)}svg.chart .s2{color:var(--s2)}svg.chart .s3{color:var(--s3)}
svg.chart .s4{color:var(--s4)}svg.chart .s5{color:var(--s5)}svg.chart .muted{color:var(--muted)}
svg.chart .warn{color:var(--warn)}svg.chart .bad{color:var(--bad)}
svg.chart .fill{fill:currentColor;stroke:none}
svg.chart .line{fill:none;stroke:currentColor;stroke-width:2;stroke-linejoin:round}
svg.chart .dashed{fill:none;stroke:currentColor;stroke-width:1.5;stroke-dasharray:6 4}
svg.chart .band{fill:currentColor;fill-opacity:.2;stroke:none}
svg.chart text.ref{fill:currentColor;font-weight:600}
svg.chart .note,svg.chart text.ref,svg.chart .halo{paint-order:stroke;stroke:var(--bg);
stroke-width:3px;stroke-linejoin:round}
svg.chart .cell{fill:var(--heat)}svg.chart .cell.hot{fill:var(--hot)}
svg.chart .cell.cold{fill:var(--cold)}svg.chart .cell-base{fill:var(--neutral)}
svg.chart .cells rect{stroke:var(--bg);stroke-width:1}
svg.chart .hatch-bg{fill:var(--bg)}svg.chart .hatch{stroke:var(--frame);stroke-width:1.5}
svg.chart .cell-label{font-size:11px;fill:var(--fg)}svg.chart .cell-label.strong{fill:var(--bg)}
"""


@dataclass(frozen=True)
class Plot:
    """The area inside the axes, in pixels from the chart's top left."""

    left: float
    top: float
    right: float
    bottom: float

    @property
    def middle(self) -> float:
        return (self.left + self.right) / 2


def num(v: float) -> str:
    return trim(f"{v:.1f}")


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def width_of(text: str, size: float = FONT) -> float:
    """About how wide a text is drawn, without measuring it."""
    return len(text) * size * 0.62


def text(x: float, y: float, content: str, cls: str = "", anchor: str = "start") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<text{klass} x="{num(x)}" y="{num(y)}" text-anchor="{anchor}">{esc(content)}</text>'


def line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line class="{cls}" x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}"/>'


def rect(x: float, y: float, w: float, h: float, cls: str, tip: str = "", attrs: str = "") -> str:
    geometry = f'x="{num(x)}" y="{num(y)}" width="{num(max(w, 0))}" height="{num(max(h, 0))}"'
    head = f'<rect class="{cls}"{attrs} {geometry}'
    return f"{head}><title>{esc(tip)}</title></rect>" if tip else f"{head}/>"


def dot(x: float, y: float, r: float = 3) -> str:
    return f'<circle class="fill" cx="{num(x)}" cy="{num(y)}" r="{num(r)}"/>'


def path(points: Sequence[tuple[float, float]], cls: str, close: bool = False) -> str:
    d = "M" + "L".join(f"{num(x)},{num(y)}" for x, y in points) + ("Z" if close else "")
    return f'<path class="{cls}" d="{d}"/>'


def group(cls: str, *parts: str) -> str:
    return f'<g class="{cls}">{"".join(parts)}</g>'


def chart(name: str, title: str, width: float, height: float, body: Sequence[str]) -> str:
    """The outer element every builder returns."""
    w, h = num(width), num(height)
    return (
        f'<svg class="chart" data-chart="{esc(name)}" role="img" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}"><title>{esc(title)}</title>{"".join(body)}</svg>'
    )


def empty(name: str, title: str, width: float = WIDTH, height: float = 120) -> str:
    """A chart with nothing to draw: a frame that says so."""
    frame = rect(0.5, 0.5, width - 1, height - 1, "frame")
    message = text(width / 2, height / 2 + 5, "no data", "nodata", "middle")
    return chart(name, title, width, height, [frame, message])
