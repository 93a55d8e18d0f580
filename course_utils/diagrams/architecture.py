"""Architecture pictures: the complete Transformer, where the LayerNorm sits, and the course map.

- :func:`complete_transformer` the encoder-decoder of Vaswani et al. (2017), the seed's "Transformer
  完整架构" figure, labelled with the sizes read from a real model (by default the paper's base model,
  built on the ``meta`` device);
- :func:`post_norm_vs_pre_norm` one post-norm layer next to one pre-norm layer, each laid out in the
  order in which a real :class:`~course_utils.layers.EncoderLayer` calls its modules (forward hooks),
  so the picture shows where *our code* puts the LayerNorm: on the residual path or beside it;
- :func:`course_map` which chapters each graded exercise and each self-check item builds on.

Every function returns a :class:`matplotlib.figure.Figure` built with :mod:`course_utils.diagrams.draw`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import torch
from matplotlib.patches import Circle, FancyBboxPatch
from torch import nn

from . import draw

__all__ = ["complete_transformer", "module_call_order", "post_norm_vs_pre_norm", "chapter_titles", "course_map"]


# --------------------------------------------------------------------------------------------
# The complete Transformer
# --------------------------------------------------------------------------------------------


def _plus(ax, x: float, y: float, r: float = 0.22) -> Circle:
    """A small circle with a plus: addition (positions added to embeddings, a residual add)."""
    circle = Circle((x, y), r, facecolor="white", edgecolor=draw.COLORS["edge"], linewidth=1.0, zorder=3)
    ax.add_patch(circle)
    ax.plot([x - 0.6 * r, x + 0.6 * r], [y, y], color=draw.COLORS["edge"], linewidth=1.0, zorder=4)
    ax.plot([x, x], [y - 0.6 * r, y + 0.6 * r], color=draw.COLORS["edge"], linewidth=1.0, zorder=4)
    return circle


def _sizes(model: nn.Module) -> dict:
    """Sizes of a :class:`~course_utils.models.Seq2SeqTransformer`, read from its modules."""
    encoder_layer = model.encoder.layers[0]
    attention = encoder_layer.self_attn
    return dict(
        encoder_layers=len(model.encoder.layers),
        decoder_layers=len(model.decoder.layers),
        d_model=model.src_embed.weight.shape[1],
        heads=attention.num_heads,
        d_ff=encoder_layer.ffn.linear1.out_features,
        src_vocab=model.src_embed.weight.shape[0],
        tgt_vocab=model.generator.out_features,
        tied=model.generator.weight is model.tgt_embed.weight,
        shared=model.src_embed is model.tgt_embed,
        norm_first=encoder_layer.norm_first,
    )


def _sublayer(ax, x: float, y: float, w: float, text: str, color: str, skip_x: float) -> float:
    """A sublayer box and its "Add & Norm" above it, with the residual skip drawn on the left.
    Returns the y of the top of the Add & Norm box."""
    draw.box(ax, x, y, w, 0.62, text, color=color, fontsize=9.5)
    draw.box(ax, x, y + 0.9, w, 0.42, "Add & Norm", color="norm", fontsize=9)
    draw.arrow(ax, (x + w / 2, y + 0.62), (x + w / 2, y + 0.9))
    # The residual connection: from below the sublayer, around it, into the Add & Norm.
    ax.plot([x + w / 2, skip_x, skip_x], [y - 0.18, y - 0.18, y + 1.11], color=draw.COLORS["edge"], linewidth=1.0)
    draw.arrow(ax, (skip_x, y + 1.11), (x, y + 1.11))
    return y + 1.32


def complete_transformer(model: nn.Module | None = None, title: str | None = None):
    """The encoder-decoder Transformer, labelled with the sizes of ``model``.

    ``model`` is a :class:`~course_utils.models.Seq2SeqTransformer` (default: the paper's base model,
    ``PRESETS["transformer-base"]``, built on the ``meta`` device, which allocates nothing). The picture
    shows the post-norm layers of the paper ("Add & Norm" after each sublayer).
    """
    if model is None:
        from ..models import PRESETS

        model = PRESETS["transformer-base"].build("meta")
    s = _sizes(model)
    if s["norm_first"]:
        raise ValueError(
            "complete_transformer draws the paper's post-norm layers; this model is pre-norm "
            "(see post_norm_vs_pre_norm for that picture)"
        )
    d, h = s["d_model"], s["heads"]
    title = title or "The Transformer (Vaswani et al. 2017): encoder left, decoder right"
    fig, ax = draw.canvas(15.5, 12.4, title=title, scale=0.7)
    enc_x, dec_x, w = 2.2, 8.6, 3.6

    # Inputs, embeddings, positions.
    for x, name, vocab in (
        (enc_x, "Inputs: source ids (B, S)", s["src_vocab"]),
        (dec_x, "Outputs, shifted right: <bos> y1 ... (B, T)", s["tgt_vocab"]),
    ):
        draw.label(ax, x + w / 2, 0.3, name, fontsize=9.5)
        draw.arrow(ax, (x + w / 2, 0.55), (x + w / 2, 0.95))
        embed = "Input embedding" if x == enc_x else "Output embedding"
        draw.box(ax, x, 0.95, w, 0.62, f"{embed}\n{vocab:,} x {d}, times sqrt({d})", color="input", fontsize=9)
        draw.arrow(ax, (x + w / 2, 1.57), (x + w / 2, 1.98))
        _plus(ax, x + w / 2, 2.2)
        draw.label(ax, x - 0.15, 2.2, "sinusoidal positional\nencoding (no parameters)", fontsize=8.5, ha="right")
        ax.plot([x - 0.1, x + w / 2 - 0.25], [2.2, 2.2], color=draw.COLORS["position"], linewidth=1.2)
        draw.arrow(ax, (x + w / 2, 2.42), (x + w / 2, 2.95))
    if s["shared"]:
        draw.label(ax, (enc_x + w + dec_x) / 2, 1.26, "one shared\nmatrix", fontsize=8.5, style="italic")

    # Encoder stack: self-attention, feed-forward.
    stack = dict(facecolor="#F4F4F4", edgecolor=draw.COLORS["edge"], linewidth=1.0)
    enc_top = 3.1 + 2 * 1.32 + 0.5 + 0.25
    ax.add_patch(
        FancyBboxPatch(
            (enc_x - 0.3, 2.75), w + 0.6, enc_top - 2.75, boxstyle="round,pad=0.02,rounding_size=0.2", **stack, zorder=0
        )
    )
    y = 3.1
    y = _sublayer(ax, enc_x, y, w, f"Multi-head self-attention\n{h} heads, d_k = {d // h}", "query", enc_x - 0.15)
    draw.arrow(ax, (enc_x + w / 2, y), (enc_x + w / 2, y + 0.5))
    y = _sublayer(ax, enc_x, y + 0.5, w, f"Feed-forward\n{d} -> {s['d_ff']} -> {d}", "ffn", enc_x - 0.15)
    draw.bracket(ax, enc_x - 0.55, 2.8, enc_top - 0.05, "", side="left")
    draw.label(
        ax,
        enc_x - 0.8,
        (2.8 + enc_top) / 2,
        f"Encoder\nlayer\nN = {s['encoder_layers']} x",
        fontsize=11,
        ha="right",
        fontweight="bold",
    )

    # Decoder stack: masked self-attention, cross-attention, feed-forward.
    dec_top = 3.1 + 3 * 1.32 + 2 * 0.5 + 0.25
    ax.add_patch(
        FancyBboxPatch(
            (dec_x - 0.3, 2.75), w + 0.6, dec_top - 2.75, boxstyle="round,pad=0.02,rounding_size=0.2", **stack, zorder=0
        )
    )
    y = 3.1
    y = _sublayer(ax, dec_x, y, w, f"Masked multi-head self-attention\n{h} heads, causal mask", "mask", dec_x - 0.15)
    draw.arrow(ax, (dec_x + w / 2, y), (dec_x + w / 2, y + 0.5), text="Q", text_offset=(0.2, -0.12))
    cross_y = y + 0.5
    y = _sublayer(
        ax, dec_x, cross_y, w, "Multi-head cross-attention\nQ from decoder, K, V from encoder", "key", dec_x - 0.15
    )
    draw.arrow(ax, (dec_x + w / 2, y), (dec_x + w / 2, y + 0.5))
    y = _sublayer(ax, dec_x, y + 0.5, w, f"Feed-forward\n{d} -> {s['d_ff']} -> {d}", "ffn", dec_x - 0.15)
    draw.bracket(ax, dec_x + w + 0.55, 2.8, dec_top - 0.05, "", side="right")
    draw.label(
        ax,
        dec_x + w + 0.8,
        (2.8 + dec_top) / 2,
        f"Decoder\nlayer\nN = {s['decoder_layers']} x",
        fontsize=11,
        ha="left",
        fontweight="bold",
    )

    # Encoder output ("memory") to every decoder layer's cross-attention.
    memory_y = enc_top + 0.7
    ax.plot(
        [enc_x + w / 2, enc_x + w / 2, enc_x + w + 1.2, enc_x + w + 1.2],
        [enc_top - 0.03, memory_y, memory_y, cross_y + 0.31],
        color=draw.COLORS["key"],
        linewidth=2.0,
    )
    draw.arrow(ax, (enc_x + w + 1.2, cross_y + 0.31), (dec_x - 0.02, cross_y + 0.31), color="key", width=2.0)
    draw.label(
        ax,
        enc_x + w + 1.3,
        memory_y + 0.3,
        f"memory (B, S, {d}):\nK, V of every decoder layer",
        fontsize=9,
        ha="center",
    )

    # Output layer.
    draw.arrow(ax, (dec_x + w / 2, dec_top - 0.03), (dec_x + w / 2, dec_top + 0.4))
    tied = "\nweights tied to the embedding" if s["tied"] else ""
    draw.box(ax, dec_x, dec_top + 0.4, w, 0.62, f"Linear {d} -> {s['tgt_vocab']:,}{tied}", color="output", fontsize=9)
    draw.arrow(ax, (dec_x + w / 2, dec_top + 1.02), (dec_x + w / 2, dec_top + 1.35))
    draw.box(ax, dec_x, dec_top + 1.35, w, 0.5, "Softmax", color="output", fontsize=9.5)
    draw.arrow(ax, (dec_x + w / 2, dec_top + 1.85), (dec_x + w / 2, dec_top + 2.2))
    draw.label(ax, dec_x + w / 2, dec_top + 2.45, f"Output probabilities (B, T, {s['tgt_vocab']:,})", fontsize=10)

    # The sizes, as a legend in the free corner.
    lines = [
        f"d_model = {d}",
        f"heads h = {h}, d_k = d_v = {d // h}",
        f"d_ff = {s['d_ff']}",
        f"layers N = {s['encoder_layers']} + {s['decoder_layers']}",
        f"vocabulary {s['src_vocab']:,}" + (" (shared)" if s["shared"] else ""),
    ]
    draw.label(
        ax,
        0.2,
        11.6,
        "Sizes (read from the model)\n" + "\n".join(lines),
        fontsize=9.5,
        ha="left",
        va="top",
        bbox=dict(boxstyle="round,pad=0.4", facecolor="white", edgecolor=draw.COLORS["edge"]),
    )
    return fig


# --------------------------------------------------------------------------------------------
# Post-norm vs pre-norm
# --------------------------------------------------------------------------------------------

_ROLES = {"self_attn": "attention", "ffn": "ffn"}


def module_call_order(layer: nn.Module, x: torch.Tensor | None = None) -> list[str]:
    """The order in which ``layer`` (an :class:`~course_utils.layers.EncoderLayer`) calls its LayerNorms
    and sublayers during one forward pass, e.g. ``["attention", "norm", "ffn", "norm"]`` for post-norm.

    Found with forward pre-hooks on the real modules, so it describes the code, not a drawing.
    """
    calls: list[str] = []
    watched = [(module, "norm") for module in layer.children() if isinstance(module, nn.LayerNorm)]
    watched += [(getattr(layer, name), role) for name, role in _ROLES.items() if hasattr(layer, name)]
    handles = [
        module.register_forward_pre_hook(lambda m, args, role=role: calls.append(role)) for module, role in watched
    ]
    d_model = layer.norm1.normalized_shape[0]
    try:
        with torch.no_grad():
            layer(torch.randn(1, 3, d_model) if x is None else x)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def _layout(calls: Sequence[str]) -> list[tuple[str, bool]]:
    """(role, on_residual_path) per call. Each sublayer has one LayerNorm; a layer that calls a
    LayerNorm first normalises each sublayer's *input* (the norm sits on the branch, beside the
    residual path: pre-norm); a layer that calls a sublayer first normalises each residual *sum*
    (the norm sits on the residual path itself: post-norm)."""
    norms_first = bool(calls) and calls[0] == "norm"
    return [(role, role == "norm" and not norms_first) for role in calls]


def _layer_height(calls: Sequence[str]) -> float:
    """Height of the drawing of one layer, in diagram units (see :func:`_draw_layer`)."""
    height = 0.0
    for role, on_path in _layout(calls):
        height += 0.75 if on_path else (0.55 if role == "norm" else 1.65)
    return height + 0.6 * sum(role != "norm" for role in calls)


def _draw_layer(
    ax, x0: float, calls: Sequence[str], heading: str, formula: str, note: str, top: float, final_norm: bool
) -> None:
    stream_x, branch_x, bw = x0 + 0.9, x0 + 2.2, 2.6  # residual path; branch boxes of width bw
    path = dict(color=draw.COLORS["output"], linewidth=4.0, solid_capstyle="butt", zorder=1)
    draw.label(ax, x0 + 2.4, top + 1.75, heading, fontsize=11.5, fontweight="bold")
    draw.label(ax, x0 + 2.4, top + 1.05, formula, fontsize=11)
    draw.label(ax, stream_x, 0.75, "x (input of the layer)", fontsize=9.5)
    y = bottom = 1.05
    branch_open = False  # a branch has left the residual path and not yet come back
    for role, on_path in _layout(calls):
        if on_path:  # a LayerNorm on the residual path: everything the layer passes on goes through it
            ax.plot([stream_x, stream_x], [bottom, y + 0.2], **path)
            draw.box(ax, stream_x - 1.0, y + 0.2, 2.0, 0.55, "LayerNorm", color="norm", fontsize=9.5, alpha=1.0)
            draw.label(
                ax,
                stream_x + 1.15,
                y + 0.47,
                "on the\nresidual path",
                fontsize=8.5,
                ha="left",
                color=draw.COLORS["mask"],
            )
            bottom = y = y + 0.75
            continue
        if not branch_open:  # the branch leaves the residual path here
            ax.plot([stream_x, branch_x + bw / 2], [y + 0.35, y + 0.35], color=draw.COLORS["edge"], linewidth=1.2)
            y += 0.35
            branch_open = True
        if role == "norm":  # a LayerNorm on the branch: it normalises the sublayer's input only
            draw.arrow(ax, (branch_x + bw / 2, y), (branch_x + bw / 2, y + 0.25))
            draw.box(ax, branch_x, y + 0.25, bw, 0.5, "LayerNorm", color="norm", fontsize=9.5)
            y += 0.75
            continue
        text = "Multi-head\nself-attention" if role == "attention" else "Feed-forward"
        draw.arrow(ax, (branch_x + bw / 2, y), (branch_x + bw / 2, y + 0.25))
        draw.box(ax, branch_x, y + 0.25, bw, 0.7, text, color="query" if role == "attention" else "ffn", fontsize=9.5)
        y += 0.95
        # Back into the residual path: the add.
        ax.plot([branch_x + bw / 2, branch_x + bw / 2], [y, y + 0.3], color=draw.COLORS["edge"], linewidth=1.2)
        draw.arrow(ax, (branch_x + bw / 2, y + 0.3), (stream_x + 0.24, y + 0.3))
        ax.plot([stream_x, stream_x], [bottom, y + 0.08], **path)
        _plus(ax, stream_x, y + 0.3)
        bottom = y + 0.52
        y += 0.6
        branch_open = False
    ax.plot([stream_x, stream_x], [bottom, top], **path)
    draw.arrow(ax, (stream_x, top - 0.05), (stream_x, top + 0.35), color="output", width=2.0)
    draw.label(ax, stream_x, top + 0.55, "to the next layer", fontsize=9.5)
    draw.label(
        ax, stream_x + 0.2, top - 0.5, note, fontsize=9, ha="left", color=draw.COLORS["output"], fontweight="bold"
    )
    if final_norm:
        draw.label(
            ax, branch_x + bw / 2, top + 0.2, "after the last layer:\none final LayerNorm", fontsize=9, style="italic"
        )


def post_norm_vs_pre_norm(post_layer: nn.Module | None = None, pre_layer: nn.Module | None = None):
    """One post-norm and one pre-norm encoder layer side by side, the residual path drawn thick.

    Each side is laid out from :func:`module_call_order` of a real layer (default: two small
    :class:`~course_utils.layers.EncoderLayer` with ``norm_first=False`` and ``True``), so the picture
    follows the code: in post-norm every LayerNorm sits on the residual path, in pre-norm none does.
    """
    from ..layers import EncoderLayer

    post_layer = post_layer or EncoderLayer(16, 2, 32, dropout=0.0, norm_first=False)
    pre_layer = pre_layer or EncoderLayer(16, 2, 32, dropout=0.0, norm_first=True)
    post_calls, pre_calls = module_call_order(post_layer), module_call_order(pre_layer)
    top = 1.05 + max(_layer_height(post_calls), _layer_height(pre_calls)) + 0.3
    fig, ax = draw.canvas(11.0, top + 2.2, title="Where the LayerNorm sits: post-norm and pre-norm", scale=0.62)
    _draw_layer(
        ax,
        0.2,
        post_calls,
        "Post-norm\n(Vaswani et al. 2017)",
        r"$x \leftarrow \mathrm{LN}(x + F(x))$",
        "residual path",
        top,
        final_norm=False,
    )
    _draw_layer(
        ax,
        5.8,
        pre_calls,
        "Pre-norm\n(GPT-2; Xiong et al. 2020)",
        r"$x \leftarrow x + F(\mathrm{LN}(x))$",
        "residual path: no LayerNorm on it",
        top,
        final_norm=True,
    )
    ax.plot([5.6, 5.6], [0.6, top + 2.1], color=draw.COLORS["norm"], linewidth=1.0)
    draw.label(
        ax,
        5.5,
        0.05,
        "thick purple line: the residual path, from the layer's input to its output",
        fontsize=9,
        va="bottom",
    )
    return fig


# --------------------------------------------------------------------------------------------
# The course map (chapter 13)
# --------------------------------------------------------------------------------------------


def chapter_titles(folder) -> dict[str, str]:
    """``{"07": "The complete Transformer", ...}`` from the first heading of every ``NN_*.ipynb`` in
    ``folder`` (the English part, before the Chinese title in parentheses)."""
    import json
    from pathlib import Path

    titles = {}
    for path in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        heading = "".join(cells[0]["source"]).splitlines()[0] if cells else ""
        title = heading.lstrip("# ").split("·", 1)[-1].split("(", 1)[0].strip()
        titles[path.name[:2]] = title or path.stem[3:].replace("_", " ")
    if not titles:
        raise ValueError(f"no chapter notebooks (NN_name.ipynb) in {folder}")
    return titles


def course_map(
    chapters: Mapping[str, str],
    exercises: Mapping[str, Sequence[str]],
    self_check: Mapping[str, Sequence[str]],
    title: str | None = None,
):
    """Chapters in the middle, graded exercises on the left, self-check items on the right; a line
    joins each exercise or item to every chapter it builds on.

    ``chapters`` maps a chapter number (``"07"``) to its title; ``exercises`` and ``self_check`` map a
    name to the chapter numbers it needs. An unknown chapter number is an error.
    """
    for group in (exercises, self_check):
        for name, needed in group.items():
            unknown = [c for c in needed if c not in chapters]
            if unknown:
                raise ValueError(f"{name!r} refers to chapter(s) {unknown}, which are not in {sorted(chapters)}")
    rows = max(len(chapters), len(exercises), len(self_check))
    height = 0.62 * rows + 1.6
    fig, ax = draw.canvas(16.0, height, title=title or "Where each exercise and self-check item comes from", scale=0.68)
    top = height - 1.0

    def column(names, x, w, color, fontsize):
        step = (top - 0.3) / max(len(names), 1)
        centres = {}
        for i, name in enumerate(names):
            y = top - (i + 0.5) * step
            draw.box(ax, x, y - 0.22, w, 0.44, name, color=color, fontsize=fontsize)
            centres[name] = y
        return centres

    chapter_names = [f"{number} {name}" for number, name in chapters.items()]
    middle = column(chapter_names, 5.6, 4.8, "neutral", 9)
    middle = {number: middle[label] for number, label in zip(chapters, chapter_names, strict=True)}
    left = column(list(exercises), 0.2, 4.0, "value", 9)
    right = column(list(self_check), 11.8, 4.0, "query", 8.5)
    for name, needed in exercises.items():
        for number in needed:
            ax.plot([4.2, 5.6], [left[name], middle[number]], color=draw.COLORS["value"], linewidth=1.2)
    for name, needed in self_check.items():
        for number in needed:
            ax.plot([10.4, 11.8], [middle[number], right[name]], color=draw.COLORS["query"], linewidth=1.2)
    draw.label(ax, 2.2, top + 0.35, "graded exercises (part 1)", fontsize=10.5, fontweight="bold")
    draw.label(ax, 8.0, top + 0.35, "chapters", fontsize=10.5, fontweight="bold")
    draw.label(ax, 13.8, top + 0.35, "self-check items (part 2)", fontsize=10.5, fontweight="bold")
    return fig
