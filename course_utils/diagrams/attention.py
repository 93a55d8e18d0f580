"""Chapters 02 and 03's pictures: self-attention, Q/K/V, the scaled dot-product flow, multi-head attention.

- :func:`self_attention_links` every position attends to every position, itself included (the seed's
  2.0 figure), drawn from real attention weights: one line per (query, key) pair, as wide as its weight,
  next to the weight matrix itself;
- :func:`qkv_projections` the input multiplied by three weight matrices (the 2.2 figure), with the real
  numbers and shapes of ``X``, ``W^Q``, ``W^K``, ``W^V`` and the ``Q``, ``K``, ``V`` they give;
- :func:`scaled_dot_product_flow` MatMul, Scale, Mask (optional), SoftMax, MatMul (the 2.3 figure), with
  the real matrix after every step, computed here from real ``Q``, ``K``, ``V`` and checked against
  :func:`course_utils.attention.scaled_dot_product_attention`;
- :func:`multi_head_flow` a real :class:`course_utils.attention.MultiHeadAttention` (the 3.0 figure):
  projections, ``h`` heads in parallel, concatenation, output projection, each labelled with the shape
  its tensor really has when the module runs.

Each returns a :class:`matplotlib.figure.Figure` built without ``pyplot``.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from ..attention import MultiHeadAttention, scaled_dot_product_attention
from . import draw, layout

__all__ = ["self_attention_links", "qkv_projections", "scaled_dot_product_flow", "multi_head_flow"]

# One hue per query in the links picture (Okabe-Ito, dark enough for thin lines on white).
_QUERY_HUES = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999")
_MAX_NUMBERED = 8  # matrices larger than this are too small to write their numbers in


def _as_matrix(value, name: str) -> np.ndarray:
    """A 2-D float array from a tensor or array, or a clear error."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().numpy()
    array = np.asarray(value, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(array.shape)}")
    return array


def _fmt(values: np.ndarray) -> str:
    """Whole numbers without decimals (hand-sized examples), everything else with two."""
    finite = values[np.isfinite(values)]
    return "{:g}" if finite.size and np.allclose(finite, np.round(finite)) else "{:.2f}"


def _shape(array: np.ndarray) -> str:
    return "(" + ", ".join(str(s) for s in array.shape) + ")"


# --------------------------------------------------------------------------------------------
# 2.0 Self-attention: every position attends to every position
# --------------------------------------------------------------------------------------------


def self_attention_links(weights, tokens: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """The ``(n, n)`` attention weights of one sequence as links and as a matrix.

    Left: the ``n`` inputs at the bottom (as keys and values), the ``n`` outputs at the top (one per
    query); a line joins input ``j`` to output ``i`` for every pair, itself included, as wide as the
    weight ``A[i, j]``, in the colour of query ``i``. Right: the weights written out, row ``i`` = query ``i``.
    ``tokens`` names the positions (default ``x1 ... xn``).
    """
    A = _as_matrix(weights, "weights")
    n = A.shape[0]
    if A.shape != (n, n):
        raise ValueError(f"self-attention weights are square (n, n), got shape {A.shape}")
    if not 1 <= n <= _MAX_NUMBERED:
        raise ValueError(f"self_attention_links draws 1 to {_MAX_NUMBERED} positions, got {n}")
    if (A < -1e-6).any() or not np.allclose(A.sum(1), 1.0, atol=1e-3):
        raise ValueError(f"every row of the weights must be a probability distribution (row sums {A.sum(1).round(3)})")
    tokens = list(tokens) if tokens is not None else [f"x{i + 1}" for i in range(n)]
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} token names for {n} positions")

    cell = 0.75 if n <= 4 else 0.5
    width = 7.3 + n * cell + 0.6
    fig, ax = draw.canvas(width, 5.6, scale=0.95)
    draw.label(
        ax,
        width / 2,
        5.35,
        title or "Self-attention: every position reads every position, itself included",
        fontsize=12,
    )
    left, right = 0.7, 6.1
    xs = np.linspace(left + 0.6, right - 0.6, n) if n > 1 else np.array([(left + right) / 2])
    box_w, box_h, bottom_y, top_y = min(1.1, 4.0 / n), 0.5, 0.85, 3.85
    for i in range(n):
        for j in range(n):
            hue = _QUERY_HUES[i % len(_QUERY_HUES)]
            ax.plot(
                [xs[j], xs[i]],
                [bottom_y + box_h, top_y],
                color=hue,
                linewidth=0.4 + 7.0 * A[i, j],
                alpha=0.35 + 0.6 * A[i, j],
                solid_capstyle="round",
                zorder=1,
            )
    for j, name in enumerate(tokens):
        draw.box(ax, xs[j] - box_w / 2, bottom_y, box_w, box_h, name, color="input", fontsize=10)
    for i in range(len(tokens)):
        patch = draw.box(ax, xs[i] - box_w / 2, top_y, box_w, box_h, f"z{i + 1}", color="neutral", fontsize=10)
        patch.set_edgecolor(_QUERY_HUES[i % len(_QUERY_HUES)])
        patch.set_linewidth(2.0)
    draw.label(
        ax, (left + right) / 2, top_y + box_h + 0.3, "outputs z_i = Σ_j A_ij v_j  (one per query q_i)", fontsize=9.5
    )
    draw.label(
        ax, (left + right) / 2, bottom_y - 0.3, "inputs x_j  (each one gives a key k_j and a value v_j)", fontsize=9.5
    )
    draw.label(
        ax,
        (left + right) / 2,
        0.12,
        f"{n} × {n} = {n * n} links, each one step long; line width ∝ weight",
        fontsize=9,
        style="italic",
    )

    # The same weights as a matrix: row i = query i, column j = key j.
    mx = 7.3
    my = 2.55 - n * cell / 2
    draw.matrix(
        ax,
        mx,
        my,
        values=A,
        cell=cell,
        cmap="Blues",
        numbers=True,
        fmt="{:.2f}",
        name="A = softmax(QKᵀ/√d_k)",
        shape_label=f"{_shape(A)}: each row sums to 1",
        fontsize=9,
    )
    for i in range(n):
        draw.label(
            ax,
            mx - 0.12,
            my + (n - 0.5 - i) * cell,
            f"q{i + 1}",
            fontsize=9,
            ha="right",
            color=_QUERY_HUES[i % len(_QUERY_HUES)],
            weight="bold",
        )
        draw.label(ax, mx + (i + 0.5) * cell, my + n * cell + 0.5, f"k{i + 1}", fontsize=9)
    return fig


# --------------------------------------------------------------------------------------------
# 2.2 Q, K and V: three projections of the same input
# --------------------------------------------------------------------------------------------


def qkv_projections(X, W_Q, W_K, W_V, tokens: Sequence[str] | None = None) -> Figure:
    """``Q = X W^Q``, ``K = X W^K``, ``V = X W^V`` with every number of the real matrices.

    ``X`` is ``(n, d_model)`` (one token per row), ``W_Q`` and ``W_K`` are ``(d_model, d_k)`` and
    ``W_V`` is ``(d_model, d_v)``, as in the formulas (not ``nn.Linear``'s transposed storage).
    """
    X = _as_matrix(X, "X")
    weights = {"Q": _as_matrix(W_Q, "W_Q"), "K": _as_matrix(W_K, "W_K"), "V": _as_matrix(W_V, "W_V")}
    n, d_model = X.shape
    for name, W in weights.items():
        if W.shape[0] != d_model:
            raise ValueError(
                f"W_{name} has {W.shape[0]} rows but X has d_model = {d_model} columns: "
                f"X W_{name} needs W_{name} of shape ({d_model}, d)"
            )
    if weights["Q"].shape[1] != weights["K"].shape[1]:
        raise ValueError(f"W_Q and W_K must give the same d_k, got {weights['Q'].shape[1]} and {weights['K'].shape[1]}")
    if max(n, d_model, *(W.shape[1] for W in weights.values())) > _MAX_NUMBERED:
        raise ValueError(f"qkv_projections writes out every number: use at most {_MAX_NUMBERED} tokens and features")
    tokens = list(tokens) if tokens is not None else [f"x{i + 1}" for i in range(n)]
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} token names for {n} rows of X")

    cell = 0.4
    row_h = max(d_model, n) * cell + 1.05
    height = 3 * row_h + 1.0
    width = 11.4
    fig, ax = draw.canvas(width, height, scale=0.85)
    draw.label(ax, width / 2, height - 0.3, "Queries, keys and values: one input, three projections", fontsize=12)
    x_left = 0.9
    x_y = (height - 0.6) / 2 - n * cell / 2
    draw.matrix(
        ax,
        x_left,
        x_y,
        values=X,
        cell=cell,
        color="input",
        numbers=True,
        fmt=_fmt(X),
        name="X",
        shape_label=f"(n = {n}, d_model = {d_model})",
        fontsize=9,
    )
    for i, token in enumerate(tokens):
        draw.label(ax, x_left - 0.12, x_y + (n - 0.5 - i) * cell, token, fontsize=9, ha="right")
    x_right = x_left + d_model * cell
    roles = {
        "Q": ("query", "what each token is looking for"),
        "K": ("key", "the label each token offers\nto the queries"),
        "V": ("value", "what each token hands over\nwhen it is attended to"),
    }
    w_x = x_right + 1.6
    d_name = {"Q": "d_k", "K": "d_k", "V": "d_v"}
    for row, (name, W) in enumerate(weights.items()):
        color, role = roles[name]
        base = height - 0.75 - (row + 1) * row_h + 0.55  # bottom of this row's tallest matrix
        w_y = base + (max(d_model, n) - d_model) * cell / 2
        draw.arrow(
            ax, (x_right + 0.1, x_y + n * cell / 2), (w_x - 0.45, w_y + d_model * cell / 2), color=color, width=1.6
        )
        draw.label(ax, w_x - 0.25, w_y + d_model * cell / 2, "×", fontsize=13)
        draw.matrix(
            ax,
            w_x,
            w_y,
            values=W,
            cell=cell,
            color=color,
            numbers=True,
            fmt=_fmt(W),
            name=f"$W^{name}$",
            shape_label=f"({d_model}, {d_name[name]} = {W.shape[1]})",
            fontsize=9,
        )
        result = X @ W
        r_x = w_x + W.shape[1] * cell + 0.8
        r_y = base + (max(d_model, n) - n) * cell / 2
        draw.label(ax, r_x - 0.4, r_y + n * cell / 2, "=", fontsize=13)
        draw.matrix(
            ax,
            r_x,
            r_y,
            values=result,
            cell=cell,
            color=color,
            numbers=True,
            fmt=_fmt(result),
            name=f"{name} = X$W^{name}$",
            shape_label=f"({n}, {W.shape[1]})",
            fontsize=9,
        )
        draw.label(
            ax, r_x + result.shape[1] * cell + 0.3, r_y + n * cell / 2, f"{name}: {role}", fontsize=9.5, ha="left"
        )
    draw.label(
        ax,
        width / 2,
        0.25,
        "row i of Q, K and V all come from token i; the three W are learned",
        fontsize=9,
        style="italic",
    )
    return fig


# --------------------------------------------------------------------------------------------
# 2.3 Scaled dot-product attention: MatMul -> Scale -> Mask (opt.) -> SoftMax -> MatMul
# --------------------------------------------------------------------------------------------


def _numbered_matrix(
    ax,
    x: float,
    y: float,
    values: np.ndarray,
    cell: float,
    cmap: str | None,
    color: str,
    caption: str,
    masked: np.ndarray | None = None,
) -> None:
    """A matrix with its numbers written in; masked cells (-inf) in the mask colour, marked −∞."""
    finite = np.where(np.isfinite(values), values, 0.0)
    draw.matrix(
        ax,
        x,
        y,
        values=finite,
        cell=cell,
        cmap=cmap,
        color=color,
        highlight=masked,
        numbers=False,
        shape_label=caption,
        fontsize=8.5,
    )
    rows, cols = values.shape
    fmt = _fmt(values)
    for i in range(rows):
        for j in range(cols):
            text = "−∞" if not np.isfinite(values[i, j]) else fmt.format(values[i, j])
            draw.label(
                ax,
                x + (j + 0.5) * cell,
                y + (rows - 0.5 - i) * cell,
                text,
                fontsize=8,
                color="white" if masked is not None and masked[i, j] else "black",
            )


def scaled_dot_product_flow(Q, K, V, mask=None) -> Figure:
    """The five steps of ``softmax(QKᵀ/√d_k) V`` as boxes, with the real matrix after each step.

    ``Q`` is ``(n_q, d_k)``, ``K`` is ``(n_k, d_k)``, ``V`` is ``(n_k, d_v)``; ``mask`` is an optional
    boolean ``(n_q, n_k)`` matrix, ``True`` = may attend (the course's convention). Without a mask the
    Mask box is drawn dashed and its matrix is the scaled one, unchanged.
    """
    q, k, v = (torch.as_tensor(_as_matrix(t, name)) for t, name in ((Q, "Q"), (K, "K"), (V, "V")))
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"Q and K must have the same d_k, got {tuple(q.shape)} and {tuple(k.shape)}")
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"K and V must have one row per key, got {tuple(k.shape)} and {tuple(v.shape)}")
    if max(q.shape[0], k.shape[0], q.shape[1], v.shape[1]) > 6:
        raise ValueError("scaled_dot_product_flow writes out every number: use at most 6 tokens and features")
    if mask is not None:
        mask = torch.as_tensor(mask).bool().cpu()
        if mask.shape != (q.shape[0], k.shape[0]):
            raise ValueError(f"mask must be (n_q, n_k) = {(q.shape[0], k.shape[0])}, got {tuple(mask.shape)}")
        if not mask.any(-1).all():
            raise ValueError("every query must be allowed to attend to at least one key")
    d_k = q.shape[1]
    scores = q @ k.T  # (n_q, n_k)
    scaled = scores / math.sqrt(d_k)
    masked = scaled.masked_fill(~mask, -math.inf) if mask is not None else scaled
    weights = masked.softmax(-1)
    out = weights @ v  # (n_q, d_v)
    reference, reference_weights = scaled_dot_product_attention(q, k, v, mask)
    if not (torch.allclose(out, reference, atol=1e-9) and torch.allclose(weights, reference_weights, atol=1e-9)):
        raise RuntimeError("the step-by-step computation disagrees with scaled_dot_product_attention")

    # The five steps are a row of boxes, each with its matrix below it; Q and K come in from the left,
    # V from above the last step.
    cell = 0.46
    n_q, n_k, d_v = q.shape[0], k.shape[0], v.shape[1]
    steps = layout.row(x=2.5, y=max(n_q, n_k) * cell + 1.55, widths=[1.9] * 5, height=0.8, gap=0.55)
    q_area = layout.Cell(0.45, steps[0].y + 0.55, d_k * cell, n_q * cell)
    k_area = layout.Cell(0.45, steps[0].y - 0.15 - n_k * cell, d_k * cell, n_k * cell)
    v_area = layout.above(steps[-1], width=d_v * cell, height=n_k * cell, gap=0.55)
    # Q and K, the five steps and a margin: steps[-1].right + 0.75, written as the number it is (the sum
    # comes out a hair above 14.95 and moves the centred title by a pixel).
    width = 14.95
    height = v_area.top + 1.15
    fig, ax = draw.canvas(width, height, scale=0.9, max_width_in=10.0)
    draw.label(
        ax,
        width / 2,
        height - 0.3,
        "Scaled dot-product attention, step by step (the real matrices of this example)",
        fontsize=12,
    )
    # Inputs Q and K on the left, feeding the first MatMul.
    draw.matrix(
        ax,
        q_area.x,
        q_area.y,
        values=q.numpy(),
        cell=cell,
        color="query",
        numbers=True,
        fmt=_fmt(q.numpy()),
        name="",
        shape_label="",
        fontsize=8,
    )
    draw.label(ax, q_area.left - 0.15, q_area.center_y, "Q", fontsize=11, ha="right")
    draw.label(ax, q_area.center_x, q_area.top + 0.15, _shape(q.numpy()), fontsize=8.5, va="bottom")
    draw.matrix(
        ax,
        k_area.x,
        k_area.y,
        values=k.numpy(),
        cell=cell,
        color="key",
        numbers=True,
        fmt=_fmt(k.numpy()),
        name="",
        shape_label=_shape(k.numpy()),
        fontsize=8,
    )
    draw.label(ax, k_area.left - 0.15, k_area.center_y, "K", fontsize=11, ha="right")
    stages = [
        ("MatMul\nS = Q Kᵀ", scores, "Blues", f"S {_shape(scores.numpy())}"),
        (f"Scale\nS / √d_k  (d_k = {d_k})", scaled, "Blues", "scaled scores"),
        ("Mask (opt.)", masked, "Blues", "masked: −∞" if mask is not None else "no mask: unchanged"),
        ("SoftMax\nover each row", weights, "Blues", f"A {_shape(weights.numpy())}, rows sum to 1"),
        ("MatMul\nZ = A V", out, None, f"Z {_shape(out.numpy())}"),
    ]
    for index, ((text, values, cmap, caption), step) in enumerate(zip(stages, steps, strict=True)):
        optional = index == 2 and mask is None
        patch = draw.box(
            ax,
            *step,
            text,
            color="output" if index == 4 else "neutral",
            fontsize=9.5,
            alpha=0.5 if optional else 0.85,
        )
        if optional:
            patch.set_linestyle("--")
        if index == 0:
            draw.arrow(ax, (q_area.right + 0.1, q_area.center_y), (step.left, step.y + step.h * 0.7), color="query")
            draw.arrow(ax, (k_area.right + 0.1, k_area.center_y), (step.left, step.y + step.h * 0.3), color="key")
        else:
            draw.arrow(ax, (steps[index - 1].right, step.center_y), (step.left, step.center_y))
        rows, cols = values.shape
        result_area = layout.below(step, width=cols * cell, height=rows * cell, gap=0.6)
        ax.plot(
            [step.center_x] * 2,
            [step.bottom, step.bottom - 0.55],
            color=draw.COLORS["edge"],
            linewidth=0.8,
            linestyle=":",
        )
        masked_cells = (~mask).numpy() if (mask is not None and index == 2) else None
        _numbered_matrix(
            ax,
            result_area.x,
            result_area.y,
            values.numpy(),
            cell,
            cmap,
            "output" if index == 4 else "neutral",
            caption,
            masked_cells,
        )
    # V comes in from above into the last MatMul.
    draw.matrix(
        ax,
        v_area.x,
        v_area.y,
        values=v.numpy(),
        cell=cell,
        color="value",
        numbers=True,
        fmt=_fmt(v.numpy()),
        name="",
        shape_label="",
        fontsize=8,
    )
    draw.label(ax, v_area.left - 0.15, v_area.center_y, "V", fontsize=11, ha="right")
    draw.label(ax, v_area.right + 0.1, v_area.center_y, _shape(v.numpy()), fontsize=8.5, ha="left")
    draw.arrow(ax, (v_area.center_x, v_area.bottom - 0.02), (steps[-1].center_x, steps[-1].top), color="value")
    # The formula over the middle of the figure (at the third step's left edge, where it was first put).
    draw.label(ax, steps[2].left, height - 0.85, "Attention(Q, K, V) = softmax(QKᵀ / √d_k) V", fontsize=11)
    return fig


# --------------------------------------------------------------------------------------------
# 3.0 Multi-head attention: h heads in parallel, concatenated, projected
# --------------------------------------------------------------------------------------------


def _real_shapes(module: MultiHeadAttention, seq_len: int) -> dict[str, tuple[int, ...]]:
    """Run ``module`` on one random sequence and record the shape of every tensor the picture names,
    with forward hooks on its projections (so the shapes are the module's own, not recomputed)."""
    seen: dict[str, tuple[int, ...]] = {}
    hooks = [
        getattr(module, name).register_forward_hook(
            lambda _m, inputs, output, name=name: seen.update(
                {name: tuple(output.shape), name + "_in": tuple(inputs[0].shape)}
            )
        )
        for name in ("W_q", "W_k", "W_v", "W_o")
    ]
    was_training = module.training
    try:
        module.eval()
        x = torch.randn(1, seq_len, module.d_model, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            out, weights = module(x, x, x)
            heads = module.split_heads(module.W_q(x))  # (1, H, T, d_k), as the module splits
    finally:
        for hook in hooks:
            hook.remove()
        module.train(was_training)
    seen.update(x=tuple(x.shape), out=tuple(out.shape), weights=tuple(weights.shape), heads=tuple(heads.shape))
    return seen


def multi_head_flow(module: MultiHeadAttention, seq_len: int = 10) -> Figure:
    """A real :class:`~course_utils.attention.MultiHeadAttention` drawn as the paper draws it, bottom to top.

    The input ``(1, seq_len, d_model)`` goes through ``W^Q``, ``W^K``, ``W^V``, is split into ``h``
    heads of ``d_k`` features, each head attends on its own, the heads are concatenated back to
    ``d_model`` features and projected by ``W^O``. ``h``, ``d_model``, ``d_k``, the parameter count
    and every shape are read from the module (its projections are run once with hooks). Up to four
    heads are drawn; with more, heads 1, 2 and h stand for all of them.
    """
    if not isinstance(module, MultiHeadAttention):
        raise TypeError(
            f"multi_head_flow draws a course_utils.attention.MultiHeadAttention, got {type(module).__name__}"
        )
    if not 1 <= seq_len <= 4096:
        raise ValueError(f"seq_len must be between 1 and 4096, got {seq_len}")
    shapes = _real_shapes(module, seq_len)
    h, d_model, d_k = module.num_heads, module.d_model, module.d_k
    parameters = sum(p.numel() for p in module.parameters())
    fmt = lambda s: "(" + ", ".join(str(v) for v in s) + ")"  # noqa: E731

    # Bottom to top, centred: the input, the three projections side by side, the heads in parallel
    # inside one frame (each in an equal slot of it), then the concatenation, W^O and the output.
    width, height = 10.6, 9.0
    centre = width / 2
    x_in = layout.Cell(centre - 1.5, 0.25, 3.0, 0.6)
    projections = dict(zip("QKV", layout.row(x=0.35, y=1.35, widths=[3.0] * 3, height=0.85, gap=0.45), strict=True))
    frame = layout.Cell(0.2, 3.05, width - 0.4, 1.75)
    shown = list(range(h)) if h <= 4 else [0, 1, None, h - 1]
    # Equal slots across the frame, 0.1 inside it (0.3 written out: 0.2 + 0.1 is a hair more in floating
    # point, and moves one head's text by a pixel).
    slots = layout.row(x=0.3, y=frame.y, widths=[(width - 0.6) / len(shown)] * len(shown), height=frame.h)
    concat, w_o = layout.column(x=centre - 1.7, y=5.45, width=3.4, heights=[0.8, 0.65], gap=0.45)
    output = layout.above(w_o, width=3.0, height=0.5, gap=0.4)

    fig, ax = draw.canvas(width, height, scale=0.85)
    draw.label(
        ax,
        width / 2,
        height - 0.3,
        f"Multi-head attention: h = {h} heads of d_k = {d_model} / {h} = {d_k} features, in parallel",
        fontsize=12,
    )
    draw.box(ax, *x_in, f"input x {fmt(shapes['x'])}", color="input", fontsize=9.5)
    colors = {"Q": "query", "K": "key", "V": "value"}
    for name, cell in projections.items():
        linear = getattr(module, "W_" + name.lower())
        projected = fmt(shapes["W_" + name.lower()])
        draw.box(
            ax,
            *cell,
            f"$W^{name}$: Linear({linear.in_features}, {linear.out_features})\n{name} {projected}",
            color=colors[name],
            fontsize=9,
        )
        draw.arrow(ax, (x_in.center_x, x_in.top), (cell.center_x, cell.bottom))
    B, H, T, D = shapes["heads"]
    draw.label(
        ax,
        centre,
        projections["K"].top + 0.3,
        f"split each into heads: {fmt(shapes['W_q'])} → (B, h, T, d_k) = {fmt((B, H, T, D))}",
        fontsize=9,
        bbox=dict(facecolor="white", edgecolor="none", pad=1.5),
        zorder=5,
    )
    ax.add_patch(
        FancyBboxPatch(
            (frame.x, frame.y),
            frame.w,
            frame.h,
            boxstyle="round,pad=0.02,rounding_size=0.15",
            facecolor="#F4F4F4",
            edgecolor=draw.COLORS["edge"],
            linewidth=0.8,
            linestyle="--",
        )
    )
    for cell in projections.values():
        draw.arrow(ax, (cell.center_x, cell.top), (cell.center_x, frame.bottom))
    heads = []
    for slot, head in zip(slots, shown, strict=True):
        if head is None:
            draw.label(ax, *slot.center, f"…\nheads 3 to {h - 1}", fontsize=10)
            continue
        lo, hi = head * d_k, (head + 1) * d_k - 1
        i = head + 1
        heads.append(slot.inset(0.1, 0.15))
        draw.box(
            ax,
            *heads[-1],
            f"head {i}\nsoftmax(Q{i}K{i}ᵀ/√{d_k}) V{i}\nfeatures {lo}…{hi}\nout ({B}, {T}, {d_k})",
            color="neutral",
            fontsize=8.5,
        )
    draw.box(
        ax,
        *concat,
        f"Concat: {h} × {d_k} = {d_model} features\n{fmt(shapes['W_o_in'])}",
        color="output",
        fontsize=9,
        alpha=0.5,
    )
    for cell in heads:
        draw.arrow(ax, (cell.center_x, cell.top), (concat.center_x, concat.bottom))
    draw.box(
        ax, *w_o, f"$W^O$: Linear({module.W_o.in_features}, {module.W_o.out_features})", color="output", fontsize=9
    )
    draw.arrow(ax, (concat.center_x, concat.top), (w_o.center_x, w_o.bottom))
    draw.box(ax, *output, f"output {fmt(shapes['out'])}", color="neutral", fontsize=9.5)
    draw.arrow(ax, (w_o.center_x, w_o.top), (output.center_x, output.bottom))
    # What the picture implies, read from the module.
    formula = "4·d_model² + 4·d_model" if module.W_q.bias is not None else "4·d_model²"
    draw.label(
        ax,
        slots[0].left,
        concat.top + 0.1,
        f"attention weights {fmt(shapes['weights'])}:\none (T, T) matrix per head",
        fontsize=9,
        ha="left",
        style="italic",
    )
    draw.label(
        ax,
        slots[-1].right,
        concat.top + 0.1,
        f"parameters {formula}\n= {parameters:,}, whatever h is",
        fontsize=9,
        ha="right",
        style="italic",
    )
    return fig
