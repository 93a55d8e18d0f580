"""Drawing primitives shared by every diagram: a canvas, boxes, arrows, matrices, one colour scheme.

Coordinates are in "diagram units" on an axes with equal aspect and no ticks: ``canvas(10, 4)`` is
ten units wide and four high, and a box at ``(1, 1)`` of size ``(2, 1)`` spans x = 1..3, y = 1..2.
Every function returns the artist it drew, so that a test can find its label again; ``texts(fig)``
lists every string a figure shows. Where the boxes go (rows, columns, grids of them) is
:mod:`course_utils.diagrams.layout`'s part.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.text import Text

__all__ = ["COLORS", "canvas", "box", "arrow", "matrix", "label", "texts", "bracket"]

# One meaning per colour, in every chapter (colour-blind safe Okabe-Ito hues, light fills).
COLORS = {
    "query": "#56B4E9",  # sky blue
    "key": "#E69F00",  # orange
    "value": "#009E73",  # bluish green
    "output": "#CC79A7",  # reddish purple
    "input": "#F0E442",  # yellow
    "norm": "#D5D5D5",  # grey: LayerNorm and other bookkeeping
    "ffn": "#0072B2",  # blue
    "mask": "#D55E00",  # vermillion: what may not be attended to
    "position": "#999999",  # grey: position information
    "neutral": "#FFFFFF",
    "edge": "#333333",
}


def _fill(color: str) -> str:
    return COLORS.get(color, color)


def canvas(
    width: float, height: float, title: str | None = None, scale: float = 0.9, max_width_in: float = 11.0
) -> tuple[Figure, "object"]:
    """A figure with one tick-less axes spanning ``width`` x ``height`` diagram units.

    ``scale`` inches per unit, capped so that the figure stays inside a notebook column.
    """
    inches = min(scale, max_width_in / width)
    fig = Figure(figsize=(width * inches, height * inches + (0.4 if title else 0.0)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=12)
    return fig, ax


def box(
    ax,
    x: float,
    y: float,
    w: float,
    h: float,
    text: str = "",
    color: str = "neutral",
    fontsize: float = 10,
    alpha: float = 0.85,
    rounded: bool = True,
    **text_kwargs,
) -> FancyBboxPatch:
    """A filled box with its label centred; returns the patch (its label is ``patch.label``)."""
    style = "round,pad=0.02,rounding_size=0.12" if rounded else "square,pad=0.0"
    patch = FancyBboxPatch(
        (x, y), w, h, boxstyle=style, facecolor=_fill(color), edgecolor=COLORS["edge"], linewidth=1.0, alpha=alpha
    )
    ax.add_patch(patch)
    patch.label = (
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, **text_kwargs)
        if text
        else None
    )
    return patch


def arrow(
    ax,
    start: tuple[float, float],
    end: tuple[float, float],
    text: str = "",
    color: str = "edge",
    fontsize: float = 9,
    curve: float = 0.0,
    width: float = 1.2,
    style: str = "-|>",
    text_offset: tuple[float, float] = (0.0, 0.15),
) -> FancyArrowPatch:
    """An arrow from ``start`` to ``end`` (optionally curved), with a label at its middle."""
    patch = FancyArrowPatch(
        start,
        end,
        arrowstyle=style,
        mutation_scale=12,
        linewidth=width,
        color=_fill(color),
        connectionstyle=f"arc3,rad={curve}",
        shrinkA=2,
        shrinkB=2,
    )
    ax.add_patch(patch)
    if text:
        middle = ((start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1])
        patch.label = ax.text(*middle, text, ha="center", va="bottom", fontsize=fontsize)
    else:
        patch.label = None
    return patch


def label(ax, x: float, y: float, text: str, fontsize: float = 10, **kwargs) -> Text:
    """Free text at ``(x, y)`` (centred unless ``ha``/``va`` say otherwise)."""
    kwargs.setdefault("ha", "center")
    kwargs.setdefault("va", "center")
    return ax.text(x, y, text, fontsize=fontsize, **kwargs)


def matrix(
    ax,
    x: float,
    y: float,
    values=None,
    shape: tuple[int, int] | None = None,
    cell: float = 0.3,
    color: str = "neutral",
    cmap: str | None = None,
    highlight=None,
    highlight_color: str = "mask",
    numbers: bool = False,
    fmt: str = "{:.2f}",
    name: str = "",
    shape_label: str | None = None,
    fontsize: float = 8,
) -> Rectangle:
    """A grid of cells with its lower-left corner at ``(x, y)``; row 0 is drawn at the top.

    Give ``values`` (a 2-D array: cells coloured by ``cmap`` if given, and written out with
    ``numbers=True``) or only a ``shape``. ``highlight`` is a boolean array of the same shape whose
    True cells are filled with ``highlight_color`` (e.g. masked positions). ``name`` goes above the
    grid and ``shape_label`` (default ``"(rows, cols)"``, ``""`` for none) below it. Returns the outline.
    """
    if values is not None:
        values = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values, dtype=float)
        if values.ndim != 2:
            raise ValueError(f"matrix() draws 2-D arrays, got shape {values.shape}")
        rows, cols = values.shape
    elif shape is not None:
        rows, cols = shape
    else:
        raise ValueError("matrix() needs values or a shape")
    if highlight is not None:
        highlight = np.asarray(highlight.cpu() if hasattr(highlight, "cpu") else highlight, dtype=bool)
        if highlight.shape != (rows, cols):
            raise ValueError(f"highlight has shape {highlight.shape}, the matrix {(rows, cols)}")
    colormap = None
    if values is not None and cmap is not None:
        from matplotlib import colormaps

        colormap = colormaps[cmap]
        low, high = float(values.min()), float(values.max())
        span = high - low or 1.0
    for i in range(rows):
        for j in range(cols):
            face = _fill(color)
            if colormap is not None:
                face = colormap(0.15 + 0.7 * (values[i, j] - low) / span)
            if highlight is not None and highlight[i, j]:
                face = _fill(highlight_color)
            cx, cy = x + j * cell, y + (rows - 1 - i) * cell
            ax.add_patch(Rectangle((cx, cy), cell, cell, facecolor=face, edgecolor="white", linewidth=0.8))
            if numbers and values is not None:
                ax.text(
                    cx + cell / 2, cy + cell / 2, fmt.format(values[i, j]), ha="center", va="center", fontsize=fontsize
                )
    outline = Rectangle((x, y), cols * cell, rows * cell, fill=False, edgecolor=COLORS["edge"], linewidth=1.0)
    ax.add_patch(outline)
    if name:
        ax.text(x + cols * cell / 2, y + rows * cell + 0.12, name, ha="center", va="bottom", fontsize=fontsize + 2)
    if shape_label is None:
        shape_label = f"({rows}, {cols})"
    if shape_label:
        ax.text(x + cols * cell / 2, y - 0.12, shape_label, ha="center", va="top", fontsize=fontsize)
    return outline


def bracket(ax, x: float, y0: float, y1: float, text: str = "", fontsize: float = 9, side: str = "right") -> None:
    """A vertical bracket from ``y0`` to ``y1`` at ``x`` with a label beside it (e.g. "N x")."""
    tick = 0.12 if side == "right" else -0.12
    ax.plot([x, x + tick, x + tick, x], [y0, y0, y1, y1], color=COLORS["edge"], linewidth=1.0)
    if text:
        ax.text(
            x + 2.5 * tick,
            (y0 + y1) / 2,
            text,
            ha="left" if side == "right" else "right",
            va="center",
            fontsize=fontsize,
        )


def texts(fig: Figure) -> list[str]:
    """Every non-empty string the figure shows (titles, labels, box texts), for tests."""
    return [artist.get_text() for artist in fig.findobj(Text) if artist.get_text().strip()]
