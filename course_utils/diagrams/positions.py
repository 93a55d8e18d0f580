"""Chapter 04's pictures: how position information gets into a Transformer.

- :func:`sinusoidal_frequencies` the sinusoidal table of the 2017 paper, drawn from the real table:
  every feature pair is a wave of its own wavelength, and a position's code is the column of values
  where a vertical line at that position cuts the waves (the seed's 4.2 figure).
- :func:`rope_rotation` a real query and key rotated by :func:`course_utils.positional.apply_rotary`
  to positions ``m`` and ``n``: the angle between them depends on ``m - n`` only (the 4.4 figure).
- :func:`positional_comparison` sinusoidal, learned and rotary side by side: where the position
  enters, absolute or relative, parameters, and what the chapter measured beyond the training
  length (the 4.5 figure).

Each returns a :class:`matplotlib.figure.Figure` built without ``pyplot``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Arc, Circle

from ..positional import apply_rotary, sinusoidal_table
from . import draw

__all__ = ["wavelength", "sinusoidal_frequencies", "rope_rotation", "positional_comparison"]


def wavelength(pair: int, d_model: int, base: float = 10000.0) -> float:
    """Positions per full turn of feature pair ``pair`` (columns ``2 pair``, ``2 pair + 1``): ``2 pi base^(2 pair / d)``."""
    return 2 * math.pi * base ** (2 * pair / d_model)


def sinusoidal_frequencies(
    d_model: int = 64, length: int = 64, position: int = 20, pairs: tuple[int, ...] = (0, 1, 3, 8, 31)
) -> Figure:
    """The sine column of several feature pairs of the real ``(length, d_model)`` table, one strip
    each, with a vertical line at ``position`` and, on the right, the whole code ``PE[position]``."""
    if not 0 <= position < length:
        raise ValueError(f"position={position} is outside the drawn range 0..{length - 1}")
    if any(not 0 <= p < d_model // 2 for p in pairs):
        raise ValueError(f"pairs must lie in 0..{d_model // 2 - 1} for d_model={d_model}, got {pairs}")
    table = sinusoidal_table(length, d_model).numpy()  # (length, d_model)
    fig = Figure(figsize=(10, 4.8), layout="constrained")
    waves, code = fig.subplots(1, 2, gridspec_kw={"width_ratios": [5, 1]})
    spacing = 2.6
    positions = np.arange(length)
    fine = np.linspace(0, length - 1, 20 * length)
    for row, pair in enumerate(pairs):
        base_y = -row * spacing
        omega = 10000.0 ** (-2 * pair / d_model)
        waves.plot(fine, base_y + np.sin(fine * omega), color=draw.COLORS["position"], linewidth=1.0)
        waves.plot(positions, base_y + table[:, 2 * pair], "o", color=draw.COLORS["ffn"], markersize=2.5)
        waves.plot([position], [base_y + table[position, 2 * pair]], "o", color=draw.COLORS["mask"], markersize=6)
        span = wavelength(pair, d_model)
        waves.text(
            length + 0.5,
            base_y,
            f"wavelength {span:,.1f}" if span < 100 else f"wavelength {span:,.0f}",
            va="center",
            fontsize=9,
        )
    waves.axvline(position, color=draw.COLORS["mask"], linestyle="--", linewidth=1.2)
    waves.text(position + 0.6, 1.75, f"pos = {position}", color=draw.COLORS["mask"], ha="left", fontsize=9)
    waves.set_xlim(-1, length + 15)
    waves.set_ylim(-(len(pairs) - 1) * spacing - 1.4, 2.3)
    waves.set_xticks(range(0, length, 10))
    waves.set_yticks(
        [-row * spacing for row in range(len(pairs))], [f"dim {2 * p} (pair {p})" for p in pairs], fontsize=9
    )
    waves.set_xlabel("position pos (token index)")
    waves.set_title("Each feature pair is a wave of its own frequency (dots: the real table)", fontsize=11)
    for side in ("top", "right"):
        waves.spines[side].set_visible(False)
    image = code.imshow(
        table[position][:, None], cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
    )
    code.set_xticks([])
    code.set_ylabel("dimension (0 = fastest)")
    code.set_title(f"PE[{position}]\n({d_model} numbers)", fontsize=10)
    fig.colorbar(image, ax=code, label="value (unitless)", shrink=0.8)
    fig.suptitle(f"Sinusoidal encoding, d_model = {d_model}: different dimensions, different frequencies", fontsize=12)
    return fig


def _angle(vector: np.ndarray) -> float:
    return math.atan2(float(vector[1]), float(vector[0]))


def rope_rotation(
    query: torch.Tensor,
    key: torch.Tensor,
    position_pairs: tuple[tuple[int, int], ...] = ((3, 0), (9, 6), (9, 2)),
    pair: int = 0,
) -> Figure:
    """RoPE rotating a real ``query`` and ``key`` (each ``(head_dim,)``) to positions ``(m, n)``.

    One panel per ``(m, n)``: feature pair ``pair`` of ``R_m q`` (blue) and ``R_n k`` (orange), the
    angle between them, and the full score ``<R_m q, R_n k>`` over all pairs. The rotated vectors come
    from :func:`course_utils.positional.apply_rotary`; equal offsets give equal angles and scores.
    """
    query, key = query.detach().double().cpu(), key.detach().double().cpu()
    if query.shape != key.shape or query.dim() != 1 or query.shape[0] % 2:
        raise ValueError(
            f"query and key must be equal, even-length vectors, got {tuple(query.shape)} and {tuple(key.shape)}"
        )
    fig = Figure(figsize=(3.6 * len(position_pairs), 4.0), layout="constrained")
    axes = fig.subplots(1, len(position_pairs), squeeze=False)[0]
    for ax, (m, n) in zip(axes, position_pairs, strict=True):
        rotated_q = apply_rotary(query[None], torch.tensor([m]))[0]  # (head_dim,)
        rotated_k = apply_rotary(key[None], torch.tensor([n]))[0]
        score = float(rotated_q @ rotated_k)
        ax.add_patch(Circle((0, 0), 1.0, fill=False, color=draw.COLORS["norm"], linewidth=1))
        angles = {}
        # Directions only (query at length 1, key at 0.8): a rotation never changes a length.
        for vector, original, name, color, length in (
            (rotated_q, query, f"q at m = {m}", "query", 1.0),
            (rotated_k, key, f"k at n = {n}", "key", 0.8),
        ):
            two = vector[2 * pair : 2 * pair + 2].numpy()
            start = original[2 * pair : 2 * pair + 2].numpy()
            angles[color] = _angle(two)
            tip = length * np.array([math.cos(angles[color]), math.sin(angles[color])])
            before = length * np.array([math.cos(_angle(start)), math.sin(_angle(start))])
            ax.annotate(
                "",
                xy=before,
                xytext=(0, 0),
                arrowprops=dict(
                    arrowstyle="-|>", color=draw.COLORS[color], alpha=0.4, linestyle=":", shrinkA=0, shrinkB=0
                ),
            )
            ax.annotate(
                "",
                xy=tip,
                xytext=(0, 0),
                arrowprops=dict(arrowstyle="-|>", color=draw.COLORS[color], linewidth=2.2, shrinkA=0, shrinkB=0),
            )
            ax.text(
                *(1.32 * tip / length),
                name,
                color=draw.COLORS["edge"],
                fontsize=9,
                ha="center",
                va="center",
                bbox=dict(facecolor=draw.COLORS[color], alpha=0.35, edgecolor="none", pad=1.5),
            )
        a_q, a_k = math.degrees(angles["query"]), math.degrees(angles["key"])
        between = (a_q - a_k + 180) % 360 - 180  # signed, in (-180, 180]
        low, high = sorted((a_k, a_k + between))
        ax.add_patch(Arc((0, 0), 0.7, 0.7, theta1=low, theta2=high, color=draw.COLORS["mask"], linewidth=1.8))
        ax.set_title(f"m = {m}, n = {n}  (offset m − n = {m - n})", fontsize=10)
        ax.text(
            0,
            -1.4,
            f"angle from k to q: {between:+.1f}°\nscore <R_m q, R_n k> = {score:+.3f}",
            ha="center",
            va="top",
            fontsize=9.5,
        )
        ax.set_xlim(-1.75, 1.75)
        ax.set_ylim(-2.0, 1.6)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"feature {2 * pair}", fontsize=9)
        ax.set_ylabel(f"feature {2 * pair + 1}", fontsize=9)
    fig.suptitle(
        f"RoPE: q turns by m·θ, k by n·θ (pair {pair}, θ = {10000.0 ** (-2 * pair / query.shape[0]):.2f} "
        "rad per position); dotted: before rotation",
        fontsize=11,
    )
    return fig


def positional_comparison(measured: dict[str, dict[str, float]] | None = None, train_len: int = 16) -> Figure:
    """Sinusoidal, learned and rotary encodings side by side.

    ``measured`` maps ``"sinusoidal"``, ``"learned"``, ``"rope"`` to ``{"seen": acc, "near": acc,
    "far": acc}`` (accuracies on trained positions, just past and far past the training length); without
    it the last row says the chapter measures it.
    """
    fig, ax = draw.canvas(13.2, 8.2, scale=0.8)
    draw.label(ax, 6.6, 8.0, "Three ways to give attention positions", fontsize=13)
    columns = (
        ("sinusoidal", "Sinusoidal (2017)", 0.3),
        ("learned", "Learned (BERT, GPT-2)", 4.7),
        ("rope", "RoPE (LLaMA, Qwen)", 9.1),
    )
    for name, title, x in columns:
        draw.label(ax, x + 1.9, 7.15, title, fontsize=11, weight="bold")
        draw.box(ax, x + 0.2, 3.7, 1.6, 0.55, "token vector", color="input", fontsize=9)
        if name == "rope":
            draw.box(ax, x + 0.2, 4.85, 3.4, 1.95, "", color="neutral")
            draw.label(ax, x + 1.9, 6.55, "inside every attention layer", fontsize=9)
            draw.box(ax, x + 0.4, 5.7, 1.4, 0.55, "q: rotate by m", color="query", fontsize=8.5)
            draw.box(ax, x + 2.0, 5.7, 1.4, 0.55, "k: rotate by n", color="key", fontsize=8.5)
            draw.label(ax, x + 1.9, 5.2, "score depends on m − n", fontsize=8.5)
            draw.arrow(ax, (x + 1.0, 4.25), (x + 1.0, 4.83))
            draw.label(ax, x + 2.75, 3.97, "nothing added", fontsize=9, style="italic")
        else:
            table = "sin/cos table\n(fixed)" if name == "sinusoidal" else "trained table\nmax_len × d"
            draw.box(ax, x + 2.1, 3.6, 1.6, 0.75, table, color="position", fontsize=8.5)
            draw.label(ax, x + 1.95, 5.0, "+", fontsize=16)
            draw.arrow(ax, (x + 1.0, 4.25), (x + 1.8, 4.85))
            draw.arrow(ax, (x + 2.9, 4.35), (x + 2.1, 4.85))
            draw.box(ax, x + 0.9, 5.7, 2.1, 0.55, "attention layers", color="neutral", fontsize=9)
            draw.arrow(ax, (x + 1.95, 5.2), (x + 1.95, 5.68))
            draw.label(ax, x + 1.95, 6.55, "added once, at the input", fontsize=9)
    rows = (
        ("enters", {"sinusoidal": "added to the input", "learned": "added to the input", "rope": "rotates q and k"}),
        (
            "absolute / relative",
            {
                "sinusoidal": "absolute code; a shift\nis one fixed map M_k",
                "learned": "absolute; offsets\nmust be learned",
                "rope": "relative: score is a\nfunction of m − n",
            },
        ),
        ("parameters", {"sinusoidal": "0", "learned": "max_len × d_model", "rope": "0"}),
    )
    y = 2.95
    for row_name, cells in rows:
        draw.label(ax, 0.05, y, row_name + ":", fontsize=8.5, ha="left", style="italic", color="#555555")
        for name, _, x in columns:
            draw.label(ax, x + 1.9, y - 0.3, cells[name], fontsize=9)
        y -= 0.95
    draw.label(
        ax,
        0.05,
        y,
        f"measured past {train_len} training tokens:",
        fontsize=8.5,
        ha="left",
        style="italic",
        color="#555555",
    )
    for name, _, x in columns:
        if measured is None:
            text = "measured in Section 5"
        else:
            parts = measured[name]
            text = f"accuracy {parts['seen']:.2f} (trained)\n{parts['near']:.2f} just past, {parts['far']:.2f} far past"
        draw.label(ax, x + 1.9, y - 0.35, text, fontsize=9, weight="bold" if measured else "normal")
    return fig
