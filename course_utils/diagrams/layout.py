"""Where the boxes of a schematic go: rows, columns and grids of cells, so that a figure states its structure.

Most schematics are boxes in a row with a gap between them, boxes stacked in a column, or a grid of
them; working out every corner by hand hides that structure in arithmetic. These functions give
:class:`Cell` geometries in diagram units (those of :mod:`course_utils.diagrams.draw`), which
``draw.box(ax, *cell, text)`` draws and whose sides and centre are where arrows start and end.

The order follows the way each shape is read: a :func:`row` left to right, a :func:`column` bottom to
top (the way a Transformer diagram is read, input first), a :func:`grid` like a matrix, row 0 at the
top (like :func:`draw.matrix <course_utils.diagrams.draw.matrix>`). ``(x, y)`` is always the lower-left
corner of the whole layout. A box can also be placed by another: :func:`above` or :func:`below` it,
centred, or :func:`across` a row of them.

>>> from course_utils.diagrams.layout import Cell, above, across, below, bounds, centered, column, grid, row
>>> q, k, v = row(x=1.0, y=2.0, widths=[2.0] * 3, height=1.0, gap=0.5)
>>> k
Cell(x=3.5, y=2.0, w=2.0, h=1.0)
>>> k.center, k.left, k.right, k.bottom, k.top
((4.5, 2.5), 3.5, 5.5, 2.0, 3.0)
>>> [cell.y for cell in column(x=0.0, y=1.0, width=3.0, heights=[0.6, 0.4, 0.6], gap=0.25)]
[1.0, 1.85, 2.5]
>>> grid(x=0.0, y=0.0, widths=[1.0, 2.0], heights=[1.0, 1.0], gap_x=0.5, gap_y=0.5)[0][1]  # row 0 is on top
Cell(x=1.5, y=1.5, w=2.0, h=1.0)
>>> above(k, width=1.0, height=0.5, gap=0.25), below(k, width=1.0, height=0.5)
(Cell(x=4.0, y=3.25, w=1.0, h=0.5), Cell(x=4.0, y=1.5, w=1.0, h=0.5))
>>> bounds([q, v])
Cell(x=1.0, y=2.0, w=7.0, h=1.0)
>>> across([q, k, v], y=0.5, height=1.0, margin=0.5)  # a bar under the row, a little wider
Cell(x=0.5, y=0.5, w=8.0, h=1.0)
>>> [cell.x for cell in centered(row(x=0.0, y=0.0, widths=[1.0, 1.0], height=1.0, gap=1.0), x=5.0)]
[3.5, 5.5]
>>> Cell(0.0, 0.0, 2.0, 1.0).inset(0.5, 0.0), Cell(0.0, 0.0, 2.0, 1.0).moved(dy=1.0)
(Cell(x=0.5, y=0.0, w=1.0, h=1.0), Cell(x=0.0, y=1.0, w=2.0, h=1.0))
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Iterator, Sequence

__all__ = ["Cell", "row", "column", "grid", "above", "below", "bounds", "across", "centered"]


@dataclass(frozen=True)
class Cell:
    """A box's place: lower-left corner ``(x, y)``, width ``w`` and height ``h``, in diagram units.

    It unpacks into the four numbers :func:`draw.box <course_utils.diagrams.draw.box>` takes:
    ``draw.box(ax, *cell, "text")``.
    """

    x: float
    y: float
    w: float
    h: float

    def __iter__(self) -> Iterator[float]:
        return iter((self.x, self.y, self.w, self.h))

    @property
    def left(self) -> float:
        return self.x

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y

    @property
    def top(self) -> float:
        return self.y + self.h

    @property
    def center_x(self) -> float:
        return self.x + self.w / 2

    @property
    def center_y(self) -> float:
        return self.y + self.h / 2

    @property
    def center(self) -> tuple[float, float]:
        return self.center_x, self.center_y

    def moved(self, dx: float = 0.0, dy: float = 0.0) -> Cell:
        """The same cell, shifted by ``(dx, dy)``."""
        return Cell(self.x + dx, self.y + dy, self.w, self.h)

    def inset(self, dx: float, dy: float | None = None) -> Cell:
        """The cell shrunk by ``dx`` on the left and right and ``dy`` (default ``dx``) at the bottom and
        top; negative values grow it (a frame around a group of boxes)."""
        dy = dx if dy is None else dy
        return Cell(self.x + dx, self.y + dy, self.w - 2 * dx, self.h - 2 * dy)


def _starts(origin: float, sizes: Sequence[float], gap: float) -> list[float]:
    """Where each of ``sizes`` begins when they are laid end to end from ``origin``, ``gap`` apart."""
    return list(accumulate((size + gap for size in sizes[:-1]), initial=origin))


def row(x: float, y: float, widths: Sequence[float], height: float, gap: float = 0.0) -> list[Cell]:
    """Cells of the given ``widths``, left to right from ``x``, ``gap`` apart, all ``height`` high."""
    return [Cell(left, y, width, height) for left, width in zip(_starts(x, widths, gap), widths, strict=True)]


def column(x: float, y: float, width: float, heights: Sequence[float], gap: float = 0.0) -> list[Cell]:
    """Cells of the given ``heights``, stacked bottom to top from ``y``, ``gap`` apart, all ``width`` wide."""
    return [Cell(x, bottom, width, height) for bottom, height in zip(_starts(y, heights, gap), heights, strict=True)]


def grid(
    x: float, y: float, widths: Sequence[float], heights: Sequence[float], gap_x: float = 0.0, gap_y: float = 0.0
) -> list[list[Cell]]:
    """``grid(...)[i][j]``: the cell in row ``i`` (row 0 at the top) and column ``j`` (column 0 on the left)
    of columns of ``widths`` and rows of ``heights`` (``heights[0]`` the top row's), ``gap_x`` and ``gap_y`` apart."""
    columns = row(x, y, widths, 0.0, gap_x)
    rows = column(x, y, 0.0, heights[::-1], gap_y)[::-1]
    return [[Cell(span.x, level.y, span.w, level.h) for span in columns] for level in rows]


def above(cell: Cell, width: float, height: float, gap: float = 0.0) -> Cell:
    """A ``width`` x ``height`` cell centred over ``cell``, ``gap`` above it (the next box up a flow)."""
    return Cell(cell.center_x - width / 2, cell.top + gap, width, height)


def below(cell: Cell, width: float, height: float, gap: float = 0.0) -> Cell:
    """A ``width`` x ``height`` cell centred under ``cell``, ``gap`` below it (e.g. a matrix under its step)."""
    return Cell(cell.center_x - width / 2, cell.bottom - gap - height, width, height)


def bounds(cells: Sequence[Cell]) -> Cell:
    """The smallest cell that holds all of ``cells`` (e.g. a frame around them, with :meth:`Cell.inset`)."""
    left, bottom = min(cell.left for cell in cells), min(cell.bottom for cell in cells)
    right, top = max(cell.right for cell in cells), max(cell.top for cell in cells)
    return Cell(left, bottom, right - left, top - bottom)


def across(cells: Sequence[Cell], y: float, height: float, margin: float = 0.0) -> Cell:
    """A cell ``height`` high at ``y`` reaching across ``cells``, from the leftmost one's left side to the
    rightmost one's right side and ``margin`` further on each side: a bar across a row of boxes."""
    around = bounds(cells)
    return Cell(around.left - margin, y, around.w + 2 * margin, height)


def centered(cells: Sequence[Cell], x: float | None = None, y: float | None = None) -> list[Cell]:
    """``cells`` moved together so that the centre of their :func:`bounds` is at ``x`` (and/or ``y``)."""
    around = bounds(cells)
    dx = 0.0 if x is None else x - around.center_x
    dy = 0.0 if y is None else y - around.center_y
    return [cell.moved(dx, dy) for cell in cells]
