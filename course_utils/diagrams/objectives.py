"""Chapter 10's picture: one backbone, two objectives (GPT and BERT).

- :func:`gpt_vs_bert` the same sentence through a causal language model and a masked language model:
  for each, the attention mask (rows: the position that computes, columns: the positions it may read)
  and, beside each row, what that position is trained to predict. GPT's mask is causal and every
  position has a target (the next token); BERT's mask hides nothing, some inputs are corrupted, and only
  those positions have a target. The masks come from the real models (``model.attention_mask``) and
  BERT's corruption from a real call of :func:`course_utils.data.mask_tokens`.

Returns a :class:`matplotlib.figure.Figure` built with :mod:`course_utils.diagrams.draw`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

from . import draw

__all__ = ["gpt_vs_bert"]


def _square(mask, name: str, length: int) -> np.ndarray:
    """A ``(T, T)`` boolean array from a mask of shape ``(T, T)`` or broadcastable ``(1, 1, T, T)`` /
    ``(1, 1, 1, T)`` (a model's ``attention_mask``), True = may attend."""
    mask = torch.as_tensor(mask).bool().cpu()
    while mask.dim() > 2:
        if mask.shape[0] != 1:
            raise ValueError(f"{name} must describe one sequence, got shape {tuple(mask.shape)}")
        mask = mask[0]
    if mask.dim() != 2 or mask.shape[-1] != length or mask.shape[0] not in (1, length):
        raise ValueError(f"{name} must be ({length}, {length}) or broadcast to it, got shape {tuple(mask.shape)}")
    return mask.expand(length, length).numpy()


def _panel(
    ax,
    x0: float,
    top: float,
    inputs: Sequence[str],
    mask: np.ndarray,
    targets: Sequence[str | None],
    heading: str,
    note: str,
    corrupted: Sequence[bool],
) -> None:
    length, cell = len(inputs), 0.48
    grid_x, grid_y = x0 + 1.5, top - 1.75 - length * cell
    draw.label(ax, grid_x + length * cell / 2 + 0.4, top - 0.2, heading, fontsize=11.5, fontweight="bold")
    draw.matrix(
        ax, grid_x, grid_y, values=mask.astype(float), cell=cell, color="query", highlight=~mask, shape_label=""
    )
    for j, word in enumerate(inputs):  # columns: the keys a position may read
        draw.label(
            ax,
            grid_x + (j + 0.5) * cell,
            grid_y + length * cell + 0.1,
            word,
            fontsize=8.5,
            rotation=60,
            ha="left",
            va="bottom",
            color=draw.COLORS["mask"] if corrupted[j] else "black",
        )
    supervised = 0
    for i, (word, target) in enumerate(zip(inputs, targets, strict=True)):  # rows: the position that computes
        y = grid_y + (length - 0.5 - i) * cell
        draw.label(
            ax, grid_x - 0.1, y, word, fontsize=8.5, ha="right", color=draw.COLORS["mask"] if corrupted[i] else "black"
        )
        if target is None:
            draw.label(ax, grid_x + length * cell + 0.35, y, "no loss", fontsize=8, ha="left", color="#888888")
        else:
            supervised += 1
            draw.box(ax, grid_x + length * cell + 0.3, y - 0.19, 1.25, 0.38, target, color="value", fontsize=8.5)
    draw.label(
        ax, grid_x + length * cell + 0.93, grid_y + length * cell + 0.25, "target", fontsize=9, fontweight="bold"
    )
    draw.label(ax, grid_x - 0.75, grid_y + length * cell + 0.25, "input", fontsize=9, fontweight="bold")
    draw.label(
        ax,
        grid_x + length * cell / 2 + 0.4,
        grid_y - 0.35,
        f"{note}\n{supervised} of {length} positions give a loss",
        fontsize=9,
        va="top",
    )


def gpt_vs_bert(
    inputs: Sequence[str],
    causal_mask,
    bidirectional_mask,
    masked_inputs: Sequence[str],
    masked_targets: Sequence[str | None],
) -> Figure:
    """GPT (left) and BERT (right) on one sentence.

    ``inputs`` are the sentence's tokens (``<bos>`` first), ``causal_mask`` and ``bidirectional_mask``
    the two models' attention masks for it (``(T, T)`` or a model's broadcastable mask; True = may
    attend). ``masked_inputs`` is BERT's corrupted input and ``masked_targets`` the original token at
    each chosen position and ``None`` elsewhere. GPT's targets are the next tokens, shown for every
    position but the last.
    """
    length = len(inputs)
    if length < 2:
        raise ValueError("need a sentence of at least two tokens")
    if len(masked_inputs) != length or len(masked_targets) != length:
        raise ValueError(
            f"masked_inputs and masked_targets must have {length} entries like inputs, got "
            f"{len(masked_inputs)} and {len(masked_targets)}"
        )
    causal = _square(causal_mask, "causal_mask", length)
    bidirectional = _square(bidirectional_mask, "bidirectional_mask", length)
    if not np.array_equal(causal, np.tril(np.ones((length, length), dtype=bool))):
        raise ValueError("causal_mask is not lower-triangular: is it the causal model's mask?")
    gpt_targets = list(inputs[1:]) + [None]
    corrupted = [m != w for m, w in zip(masked_inputs, inputs, strict=True)]
    panel_w = 1.5 + length * 0.48 + 2.0
    width = 2 * panel_w + 0.8
    top = length * 0.48 + 3.4
    fig, ax = draw.canvas(width, top + 0.6, scale=0.8)
    draw.label(
        ax,
        width / 2,
        top + 0.3,
        "One backbone, two objectives: the mask and the targets are all that differ",
        fontsize=12.5,
    )
    _panel(
        ax,
        0.2,
        top,
        list(inputs),
        causal,
        gpt_targets,
        "GPT: causal language model",
        "orange: masked (a position cannot read its future);\ntarget: the next token",
        [False] * length,
    )
    _panel(
        ax,
        panel_w + 0.6,
        top,
        list(masked_inputs),
        bidirectional,
        list(masked_targets),
        "BERT: masked language model",
        "every position reads every position;\n"
        "orange words: corrupted input; target: the original word\nat each chosen position (10% of them stay as they are)",
        corrupted,
    )
    return fig
