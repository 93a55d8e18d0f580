"""Chapters 05 and 06's pictures: encoder and decoder blocks, norms on the residual path, masks.

- :func:`encoder_decoder` the encoder and decoder stacks, joined by cross-attention (the seed's 5.0
  figure); ``highlight`` picks out the part a chapter is about.
- :func:`norm_placement` post-norm against pre-norm: where LayerNorm sits relative to the residual
  path, and so whether the gradient has an untouched way back.
- :func:`causal_mask_diagram` a real ``causal_mask(T)`` (upper triangle masked) next to the weights of
  a real masked softmax (the 6.2 figure).
- :func:`cross_attention_diagram` queries from the decoder, keys and values from the encoder, and the
  real ``T_tgt x S_src`` weight matrix between them (the 6.3 figure).

Each returns a :class:`matplotlib.figure.Figure` built without ``pyplot``.
"""

from __future__ import annotations

from itertools import pairwise

import torch
from matplotlib.figure import Figure

from . import draw

__all__ = ["encoder_decoder", "norm_placement", "causal_mask_diagram", "cross_attention_diagram"]

_SUBLAYER_COLORS = {"self": "output", "masked": "output", "cross": "query", "ffn": "value", "norm": "norm"}


def _stack(ax, x: float, y: float, width: float, sublayers: list[tuple[str, str]], faded: bool) -> list:
    """Draw one layer's sublayers bottom-up from ``(x, y)``; returns each box (for arrows)."""
    boxes = []
    alpha = 0.25 if faded else 0.8
    for text, kind in sublayers:
        height = 0.45 if kind == "norm" else 0.7
        patch = draw.box(ax, x, y, width, height, text, color=_SUBLAYER_COLORS[kind], fontsize=9, alpha=alpha)
        boxes.append((patch, x, y, width, height))
        y += height + 0.32
    for (_, x0, y0, w0, h0), (_, _, y1, _, _) in pairwise(boxes):
        draw.arrow(ax, (x0 + w0 / 2, y0 + h0), (x0 + w0 / 2, y1))
    return boxes


def _residual(ax, boxes, start: int, end: int, side: float) -> None:
    """A skip arrow from below box ``start`` to the add & norm box ``end`` on the left/right side."""
    _, x, y, w, h = boxes[start]
    _, xe, ye, we, he = boxes[end]
    edge = x + (w if side > 0 else 0)
    out = edge + 0.35 * side
    ax.plot(
        [x + w / 2, x + w / 2, out, out],
        [y - 0.16, y - 0.16, y - 0.16, ye + he / 2],
        color=draw.COLORS["edge"],
        linewidth=1.0,
    )
    draw.arrow(ax, (out, ye + he / 2), (edge, ye + he / 2))


def encoder_decoder(highlight: str | None = None, num_layers: str = "N") -> Figure:
    """The post-norm encoder-decoder of Vaswani et al. (2017), one layer of each drawn, ``N x`` stacked.

    ``highlight`` is ``None``, ``"encoder"``, ``"decoder"`` or ``"cross"`` (the rest is drawn faded).
    """
    if highlight not in (None, "encoder", "decoder", "cross"):
        raise ValueError(f"highlight must be None, 'encoder', 'decoder' or 'cross', got {highlight!r}")
    fig, ax = draw.canvas(12.0, 10.5, scale=0.72)
    draw.label(ax, 6.0, 10.25, "The Transformer: encoder and decoder, joined by cross-attention", fontsize=13)
    draw.label(
        ax,
        6.0,
        9.8,
        "post-norm, as in the 2017 paper; lines on the left of each stack: residual connections",
        fontsize=9,
        style="italic",
    )
    enc_x, dec_x, width = 1.6, 7.2, 3.2
    enc_faded = highlight in ("decoder", "cross")
    dec_faded = highlight == "encoder"
    # Inputs and embeddings.
    for x, text, faded in ((enc_x, "source tokens", enc_faded), (dec_x, "target tokens, shifted right", dec_faded)):
        draw.label(ax, x + width / 2, 0.25, text, fontsize=9.5)
        draw.box(
            ax,
            x,
            0.65,
            width,
            0.7,
            "embedding × √d_model\n+ positional encoding",
            color="input",
            fontsize=9,
            alpha=0.25 if faded else 0.8,
        )
        draw.arrow(ax, (x + width / 2, 0.4), (x + width / 2, 0.65))
    encoder = _stack(
        ax,
        enc_x,
        2.1,
        width,
        [
            ("multi-head self-attention", "self"),
            ("add & norm", "norm"),
            ("feed-forward", "ffn"),
            ("add & norm", "norm"),
        ],
        enc_faded,
    )
    decoder = _stack(
        ax,
        dec_x,
        2.1,
        width,
        [
            ("masked multi-head\nself-attention", "masked"),
            ("add & norm", "norm"),
            ("cross-attention\n(Q: decoder, K, V: encoder)", "cross"),
            ("add & norm", "norm"),
            ("feed-forward", "ffn"),
            ("add & norm", "norm"),
        ],
        dec_faded,
    )
    for x, boxes, side in ((enc_x, encoder, "left"), (dec_x, decoder, "right")):
        draw.arrow(ax, (x + width / 2, 1.35), (x + width / 2, 2.1))
        for start in range(0, len(boxes), 2):
            _residual(ax, boxes, start, start + 1, side=-1)
        top = boxes[-1][2] + boxes[-1][4]
        where = x - 0.6 if side == "left" else x + width + 0.25
        draw.bracket(ax, where, 1.9, top + 0.1, f"{num_layers} ×", fontsize=11, side=side)
    draw.label(ax, enc_x + width / 2, 9.3, "Encoder (Chapter 05)", fontsize=11, weight="bold")
    draw.label(ax, dec_x + width / 2, 9.3, "Decoder (Chapter 06)", fontsize=11, weight="bold")
    # Encoder output ("memory") into every decoder layer's cross-attention, through the gap between stacks.
    enc_top = encoder[-1][2] + encoder[-1][4]
    _, _, cross_y, _, cross_h = decoder[2]
    memory_color = "key" if highlight in (None, "cross") else "edge"
    gap_x = (enc_x + width + dec_x) / 2 - 0.3
    line = dict(color=draw.COLORS[memory_color], linewidth=2)
    ax.plot(
        [enc_x + width / 2, enc_x + width / 2, gap_x, gap_x],
        [enc_top, enc_top + 0.45, enc_top + 0.45, cross_y + cross_h / 2],
        **line,
    )
    draw.arrow(ax, (gap_x, cross_y + cross_h / 2), (dec_x, cross_y + cross_h / 2), color=memory_color, width=2.0)
    draw.label(
        ax,
        (enc_x + width / 2 + gap_x) / 2,
        enc_top + 1.0,
        "encoder output = memory (B, S_src, d_model):\nkeys and values of every decoder layer's cross-attention",
        fontsize=9,
    )
    _, _, below_y, _, below_h = decoder[1]
    draw.label(
        ax,
        dec_x + width / 2 + 0.12,
        (below_y + below_h + cross_y) / 2,
        "Q",
        fontsize=9,
        ha="left",
        color=draw.COLORS["edge"],
    )
    dec_top = decoder[-1][2] + decoder[-1][4]
    draw.box(
        ax,
        dec_x,
        dec_top + 0.4,
        width,
        0.5,
        "linear + softmax",
        color="output",
        fontsize=9,
        alpha=0.25 if dec_faded else 0.8,
    )
    draw.arrow(ax, (dec_x + width / 2, dec_top), (dec_x + width / 2, dec_top + 0.4))
    draw.label(ax, dec_x + width / 2, dec_top + 1.15, "next-token probabilities\n(B, T_tgt, vocab)", fontsize=9)
    return fig


def norm_placement() -> Figure:
    """Two layers of post-norm and of pre-norm side by side, with the residual path drawn in colour:
    in post-norm it runs through every LayerNorm, in pre-norm it bypasses all of them."""
    fig, ax = draw.canvas(12.0, 6.3, scale=0.7)
    draw.label(ax, 6.0, 6.1, "Where LayerNorm sits decides whether the residual path is clean", fontsize=12.5)
    path = draw.COLORS["mask"]
    for x, name, pre in (
        (0.6, "post-norm (2017): x ← LN(x + F(x))", False),
        (6.6, "pre-norm (GPT-2 on): x ← x + F(LN(x))", True),
    ):
        draw.label(ax, x + 2.4, 5.6, name, fontsize=10.5, weight="bold")
        spine = x + 1.0  # the residual stream runs up this line
        y = 0.85
        draw.label(ax, spine, y - 0.2, "x (from below)", fontsize=9)
        for layer in range(2):
            if pre:
                draw.box(ax, x + 1.7, y + 0.35, 1.3, 0.5, "LayerNorm", color="norm", fontsize=9)
                draw.box(ax, x + 3.3, y + 0.3, 1.4, 0.6, f"sublayer F{layer + 1}", color="output", fontsize=9)
                ax.plot([spine, x + 1.7], [y + 0.6, y + 0.6], color=draw.COLORS["edge"], linewidth=1)
                draw.arrow(ax, (x + 3.0, y + 0.6), (x + 3.3, y + 0.6))
                ax.plot(
                    [x + 4.7, x + 4.95, x + 4.95], [y + 0.6, y + 0.6, y + 1.55], color=draw.COLORS["edge"], linewidth=1
                )
                draw.arrow(ax, (x + 4.95, y + 1.55), (spine + 0.2, y + 1.55))
                draw.label(ax, spine, y + 1.55, "⊕", fontsize=16)
                ax.plot([spine, spine], [y, y + 1.42], color=path, linewidth=3)
                y += 1.6
            else:
                draw.box(ax, x + 2.0, y + 0.3, 1.4, 0.6, f"sublayer F{layer + 1}", color="output", fontsize=9)
                ax.plot([spine, x + 2.0], [y + 0.6, y + 0.6], color=draw.COLORS["edge"], linewidth=1)
                ax.plot(
                    [x + 3.4, x + 3.65, x + 3.65], [y + 0.6, y + 0.6, y + 1.3], color=draw.COLORS["edge"], linewidth=1
                )
                draw.arrow(ax, (x + 3.65, y + 1.3), (spine + 0.2, y + 1.3))
                draw.label(ax, spine, y + 1.3, "⊕", fontsize=16)
                ax.plot([spine, spine], [y, y + 1.17], color=path, linewidth=3)
                draw.box(ax, spine - 0.65, y + 1.55, 1.3, 0.42, "LayerNorm", color="norm", fontsize=9, alpha=1.0)
                ax.plot([spine, spine], [y + 1.43, y + 1.55], color=path, linewidth=3)
                draw.label(ax, spine + 0.8, y + 1.76, "on the residual path", fontsize=8.5, color=path, ha="left")
                y += 1.97
        if pre:
            draw.box(ax, spine - 0.65, y + 0.15, 1.3, 0.42, "final LN", color="norm", fontsize=9, alpha=1.0)
            ax.plot([spine, spine], [y, y + 0.15], color=path, linewidth=3)
            draw.label(ax, spine + 0.8, y + 0.36, "once, after the stack", fontsize=8.5, ha="left")
        draw.label(
            ax,
            x + 2.4,
            0.15,
            "gradient to x passes every LayerNorm's Jacobian"
            if not pre
            else "identity path: ∂out/∂x = I + (terms through F)",
            fontsize=9,
            color=path,
        )
    return fig


def _ticks(ax, x: float, y: float, count: int, cell: float, axis: str, text: str) -> None:
    for i in range(count):
        if axis == "columns":
            draw.label(ax, x + (i + 0.5) * cell, y, str(i), fontsize=8)
        else:
            draw.label(ax, x, y - (i + 0.5) * cell, str(i), fontsize=8)
    if axis == "columns":
        draw.label(ax, x + count * cell / 2, y + 0.3, text, fontsize=9)
    else:
        draw.label(ax, x - 0.35, y - count * cell / 2, text, fontsize=9, rotation=90)


def causal_mask_diagram(mask: torch.Tensor, weights: torch.Tensor) -> Figure:
    """``mask`` ``(T, T)`` from ``attention.causal_mask`` (True = may attend) and the ``(T, T)`` weights
    of a real masked softmax: masked cells in the mask colour, the weights written out."""
    mask = torch.as_tensor(mask).bool().cpu()
    weights = torch.as_tensor(weights).detach().float().cpu()
    if mask.dim() != 2 or mask.shape != weights.shape or mask.shape[0] != mask.shape[1]:
        raise ValueError(
            f"mask and weights must be the same (T, T) shape, got {tuple(mask.shape)} and {tuple(weights.shape)}"
        )
    length = mask.shape[0]
    cell = min(0.62, 4.2 / length)
    width = 2 * length * cell + 4.4
    fig, ax = draw.canvas(width, length * cell + 2.4, scale=0.95)
    top = length * cell + 0.9
    draw.label(ax, width / 2, top + 1.15, f"Causal mask, T = {length}: the upper triangle is masked", fontsize=12)
    left, right = 1.0, length * cell + 3.0
    draw.matrix(
        ax, left, 0.9, values=mask.float().numpy(), cell=cell, color="neutral", highlight=~mask.numpy(), shape_label=""
    )
    draw.matrix(
        ax,
        right,
        0.9,
        values=weights.numpy(),
        cell=cell,
        cmap="Blues",
        highlight=~mask.numpy(),
        numbers=length <= 8,
        fmt="{:.2f}",
        shape_label="",
        fontsize=8,
    )
    for i in range(length):
        for j in range(length):
            if not mask[i, j]:
                draw.label(
                    ax, left + (j + 0.5) * cell, 0.9 + (length - 0.5 - i) * cell, "−∞", fontsize=10, color="white"
                )
            else:
                draw.label(ax, left + (j + 0.5) * cell, 0.9 + (length - 0.5 - i) * cell, "0", fontsize=8)
    for x, name in (
        (left, "added to the scores\n(0 = keep, −∞ = masked)"),
        (right, "weights after softmax\n(each row sums to 1)"),
    ):
        _ticks(ax, x, top + 0.2, length, cell, "columns", "key position j")
        _ticks(ax, x - 0.2, 0.9 + length * cell, length, cell, "rows", "query position i")
        draw.label(ax, x + length * cell / 2, 0.45, name, fontsize=9)
    draw.arrow(
        ax,
        (left + length * cell + 0.35, 0.9 + length * cell / 2),
        (right - 0.75, 0.9 + length * cell / 2),
        text="softmax",
        fontsize=9,
    )
    return fig


def cross_attention_diagram(weights: torch.Tensor, d_k: int, source_is_real: torch.Tensor | None = None) -> Figure:
    """Cross-attention as matrices: ``Q`` from the decoder ``(T_tgt, d_k)``, ``K`` and ``V`` from the
    encoder ``(S_src, d_k)``, and the real weights ``(T_tgt, S_src)`` of one head between them.

    ``source_is_real`` ``(S_src,)`` marks the real source positions; padded ones are drawn masked.
    """
    weights = torch.as_tensor(weights).detach().float().cpu()
    if weights.dim() != 2:
        raise ValueError(f"weights must be one head's (T_tgt, S_src) matrix, got shape {tuple(weights.shape)}")
    target_len, source_len = weights.shape
    padded = None
    if source_is_real is not None:
        source_is_real = torch.as_tensor(source_is_real).bool().cpu()
        if source_is_real.shape != (source_len,):
            raise ValueError(f"source_is_real must have shape ({source_len},), got {tuple(source_is_real.shape)}")
        padded = (~source_is_real)[None, :].expand(target_len, source_len).numpy()
    cell = 0.4
    shown_dk = min(d_k, 4)  # draw at most 4 feature columns of Q, K, V
    rows_h, cols_w, dk_w = target_len * cell, source_len * cell, shown_dk * cell
    q_x, w_x = 0.8, 0.8 + dk_w + 1.0  # Q, then the weights (with K^T above them)
    v_x = w_x + cols_w + 1.0
    out_x = v_x + dk_w + 1.0
    width = out_x + dk_w + 1.6
    w_y = max(1.4, 1.1 + cols_w - rows_h)  # V (S rows) hangs down from the weights' top
    top = w_y + rows_h  # top edge of Q, weights, V, output
    k_y = top + 0.65
    height = k_y + dk_w + 2.0
    fig, ax = draw.canvas(width, height, scale=0.72)
    draw.label(
        ax,
        width / 2,
        height - 0.25,
        "Cross-attention: queries from the decoder, keys and values from the encoder",
        fontsize=12,
    )
    box_y = height - 1.3
    draw.box(
        ax, 0.2, box_y, dk_w + 1.6, 0.75, f"decoder states\n(T_tgt = {target_len}, d_model)", color="output", fontsize=9
    )
    draw.box(
        ax,
        w_x + 0.2,
        box_y,
        v_x + dk_w - w_x - 0.2,
        0.75,
        f"encoder output, the memory (S_src = {source_len}, d_model)",
        color="input",
        fontsize=9,
    )
    draw.matrix(
        ax,
        q_x,
        w_y,
        shape=(target_len, shown_dk),
        cell=cell,
        color="query",
        name="Q",
        shape_label=f"(T_tgt = {target_len}, d_k = {d_k})",
        fontsize=8,
    )
    draw.matrix(ax, w_x, k_y, shape=(shown_dk, source_len), cell=cell, color="key", name="", shape_label="", fontsize=8)
    draw.label(ax, w_x - 0.3, k_y + dk_w / 2, "Kᵀ", fontsize=11, ha="right")
    draw.label(ax, w_x + cols_w + 0.15, k_y + dk_w / 2, f"(d_k, S_src = {source_len})", fontsize=8, ha="left")
    draw.matrix(
        ax,
        w_x,
        w_y,
        values=weights.numpy(),
        cell=cell,
        cmap="Blues",
        highlight=padded,
        name="",
        shape_label=f"weights = softmax(QKᵀ/√d_k): ({target_len}, {source_len}) = T_tgt × S_src",
        fontsize=8,
    )
    draw.matrix(
        ax,
        v_x,
        top - cols_w,
        shape=(source_len, shown_dk),
        cell=cell,
        color="value",
        name="V",
        shape_label=f"(S_src = {source_len}, d_v)",
        fontsize=8,
    )
    draw.matrix(
        ax,
        out_x,
        w_y,
        shape=(target_len, shown_dk),
        cell=cell,
        color="output",
        name="output",
        shape_label=f"({target_len}, d_v)",
        fontsize=8,
    )
    draw.label(ax, v_x - 0.5, w_y + rows_h / 2, "×", fontsize=14)
    draw.label(ax, out_x - 0.5, w_y + rows_h / 2, "=", fontsize=14)
    draw.arrow(
        ax,
        (q_x + dk_w / 2, box_y),
        (q_x + dk_w / 2, top + 0.4),
        color="query",
        text="× W_Q",
        fontsize=9,
        text_offset=(0.45, -0.1),
    )
    draw.arrow(
        ax,
        (w_x + cols_w / 2, box_y),
        (w_x + cols_w / 2, k_y + dk_w + 0.05),
        color="key",
        text="× W_K",
        fontsize=9,
        text_offset=(0.45, -0.15),
    )
    draw.arrow(
        ax,
        (v_x + dk_w / 2, box_y),
        (v_x + dk_w / 2, top + 0.4),
        color="value",
        text="× W_V",
        fontsize=9,
        text_offset=(0.45, -0.1),
    )
    notes = [
        "row i of the weights: how target position i spreads its attention",
        "over the whole source (no causal mask here)",
    ]
    if padded is not None:
        notes.append("vermillion: padded source positions, masked")
    draw.label(ax, w_x + cols_w / 2, 0.55, "\n".join(notes), fontsize=8.5)
    return fig
