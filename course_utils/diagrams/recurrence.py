"""Chapter 01's picture: an RNN's chain of dependent steps next to self-attention's single step.

- :func:`recurrence_vs_attention` on the left an RNN reads the tokens one at a time, each hidden state
  waiting for the one before (the chain that makes recurrence sequential); on the right self-attention
  computes every output from every input at once (the seed's 2.0 figure: "every position attends
  directly to every other position"). Given the weights of a real attention layer, the lines are drawn
  as thick as the weights.

Each returns a :class:`matplotlib.figure.Figure` built without ``pyplot``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from . import draw

__all__ = ["recurrence_vs_attention"]

_PANEL_W, _BOX_H = 5.6, 0.55  # diagram units


def _layout(count: int) -> tuple[float, float]:
    """Distance between neighbouring tokens and the width of a token box, for ``count`` tokens in a panel."""
    gap = min(1.3, 5.4 / count)
    return gap, 0.73 * gap


def _token_x(left: float, count: int, index: int) -> float:
    """Left edge of token ``index`` of ``count``, centred in a panel starting at ``left``."""
    gap, box_w = _layout(count)
    row = (count - 1) * gap + box_w
    return left + (_PANEL_W - row) / 2 + index * gap


def _checked_weights(weights, count: int):
    if weights is None:
        return None
    array = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights, dtype=float)
    if array.shape != (count, count):
        raise ValueError(
            f"weights must be one head's ({count}, {count}) matrix for {count} tokens, got shape {array.shape}"
        )
    if (array < 0).any() or not np.allclose(array.sum(1), 1.0, atol=1e-3):
        raise ValueError("weights must be attention weights: non-negative, each row summing to 1")
    return array


def recurrence_vs_attention(tokens: Sequence[str] = ("x1", "x2", "x3", "x4"), weights=None) -> Figure:
    """The RNN chain (left) and one self-attention step (right) over the same ``tokens`` (2 to 8).

    ``weights`` (optional): a real ``(T, T)`` attention matrix, row ``i`` the weights output ``i`` gives
    to each input; the line from input ``j`` to output ``i`` is then drawn ``weights[i, j]`` thick.
    Each such line carries the gid ``"attention i<-j"`` (for tests).
    """
    tokens = [str(token) for token in tokens]
    count = len(tokens)
    if not 2 <= count <= 8:
        raise ValueError(f"draw 2 to 8 tokens, got {count}")
    weights = _checked_weights(weights, count)
    gap, box_w = _layout(count)
    font = 11 if count <= 5 else 9

    def step_label(t: int) -> str:
        return f"step {t}" if count <= 5 else str(t)

    fig, ax = draw.canvas(12.0, 6.0, scale=0.8)
    ax.plot([6.0, 6.0], [0.1, 5.7], color=draw.COLORS["norm"], linewidth=1.0)

    # Left: the recurrence. h_t needs x_t and h_(t-1), so the hidden states form a chain.
    draw.label(ax, 3.0, 5.55, "RNN: one step per token", fontsize=13.5, weight="bold")
    draw.label(ax, 3.0, 5.1, r"$h_t = \tanh(W_x\, x_t + W_h\, h_{t-1} + b)$", fontsize=12)
    state_y = 3.0
    for t, token in enumerate(tokens):
        x = _token_x(0.0, count, t)
        draw.box(ax, x, 0.95, box_w, _BOX_H, token, color="input", fontsize=font)
        draw.box(ax, x, state_y, box_w, _BOX_H, f"h{t + 1}", color="output", fontsize=font)
        draw.arrow(ax, (x + box_w / 2, 0.95 + _BOX_H), (x + box_w / 2, state_y))
        draw.label(
            ax,
            x + box_w / 2,
            state_y + _BOX_H + 0.22,
            step_label(t + 1),
            fontsize=font - 0.5,
            color=draw.COLORS["mask"],
            weight="bold",
        )
        if t:
            draw.arrow(ax, (x - gap + box_w, state_y + _BOX_H / 2), (x, state_y + _BOX_H / 2), color="mask", width=2.2)
    draw.label(
        ax,
        3.0,
        4.35,
        f'each step waits for the one before:\n"{tokens[0]}" reaches h{count} only after {count} steps in a row',
        fontsize=11,
    )
    draw.label(ax, 3.0, 0.45, f"sequential steps: n = {count}", fontsize=12, weight="bold")
    draw.label(ax, 3.0, 0.12, f"work: n = {count} small steps", fontsize=11, color="#444444")

    # Right: self-attention. Every output reads every input, all in the same step.
    draw.label(ax, 9.0, 5.55, "Self-attention: one step for all tokens", fontsize=13.5, weight="bold")
    draw.label(
        ax, 9.0, 5.1, r"$y_i = \sum_j a_{ij}\, v_j, \quad a = \mathrm{softmax}(QK^\top / \sqrt{d})$", fontsize=12
    )
    output_y = 3.0
    for i in range(count):
        x = _token_x(6.4, count, i)
        draw.box(ax, x, 0.95, box_w, _BOX_H, tokens[i], color="input", fontsize=font)
        draw.box(ax, x, output_y, box_w, _BOX_H, f"y{i + 1}", color="output", fontsize=font)
        draw.label(
            ax,
            x + box_w / 2,
            output_y + _BOX_H + 0.22,
            step_label(1),
            fontsize=font - 0.5,
            color=draw.COLORS["mask"],
            weight="bold",
        )
    for i in range(count):
        target = (_token_x(6.4, count, i) + box_w / 2, output_y)
        for j in range(count):
            source = (_token_x(6.4, count, j) + box_w / 2, 0.95 + _BOX_H)
            width = 0.3 + 8.0 * weights[i, j] if weights is not None else 1.0
            (line,) = ax.plot(
                *zip(source, target, strict=True),
                color=draw.COLORS["ffn"],
                linewidth=width,
                alpha=0.55,
                solid_capstyle="round",
            )
            line.set_gid(f"attention {i}<-{j}")
    note = (
        r"line width: weight $a_{ij}$ of a real attention layer"
        if weights is not None
        else "every output reads every input"
    )
    draw.label(ax, 9.0, 4.35, f"no output waits for another:\n{note}", fontsize=11)
    draw.label(ax, 9.0, 0.45, "sequential steps: 1", fontsize=12, weight="bold")
    draw.label(ax, 9.0, 0.12, f"work: n² = {count * count} pairs (i, j), all independent", fontsize=11, color="#444444")
    return fig
