"""Pictures of efficient attention: the shapes through multi-head attention with a KV cache
(chapter 11) and FlashAttention's tiles with its online softmax (chapter 12).

Both are drawn from the real objects, not by hand:

- :func:`mha_kv_cache_shapes` runs a :class:`course_utils.attention.MultiHeadAttention` on a prompt,
  then one decoding step with a :class:`course_utils.attention.KVCache`, and labels every box with the
  shape that tensor really had;
- :func:`flash_tiles` calls :func:`course_utils.flash.flash_attention` with ``tiles=[]`` and draws the
  tiles it computed (and, by their absence, the ones the causal mask let it skip), next to the running
  maximum and sum of the online softmax for one query, from :func:`course_utils.flash.online_softmax_steps`
  on that query's real scores.
"""

from __future__ import annotations

import math

import torch
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Polygon, Rectangle

from ..attention import KVCache, MultiHeadAttention, causal_mask
from ..flash import Tile, flash_attention, online_softmax_steps
from .draw import COLORS, arrow, box, canvas, label
from .layout import Cell, bounds, column, grid

__all__ = ["mha_shapes", "mha_kv_cache_shapes", "flash_tiles", "tile_counts"]


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


# --------------------------------------------------------------------------------------------
# Chapter 11: shapes through multi-head attention, and what a KV cache keeps
# --------------------------------------------------------------------------------------------


def mha_shapes(module: MultiHeadAttention, x: torch.Tensor, cache: KVCache | None = None) -> dict[str, torch.Tensor]:
    """Every intermediate tensor of ``module(x, x, x, cache=cache)`` (self-attention, causal when a
    cache is given), computed with the module's own layers and checked against its output.

    Returns a dict with ``x, q, k, v`` (projections, ``(B, T, d_model)``), ``q_heads, k_heads,
    v_heads`` (``(B, H, T_keys, d_k)`` for keys and values: with a cache they include the past),
    ``scores`` (``(B, H, T, T_keys)``), ``heads`` (``(B, H, T, d_k)``), ``merged`` and ``out``.
    """
    with torch.no_grad():
        past = len(cache) if cache is not None else 0
        q, k, v = module.W_q(x), module.W_k(x), module.W_v(x)  # (B, T, d_model) each
        q_heads = module.split_heads(q)  # (B, H, T, d_k)
        k_new, v_new = module.split_heads(k), module.split_heads(v)  # (B, H, T, d_k)
        if cache is not None:
            k_past = cache.k if cache.is_filled else k_new[..., :0, :]
            v_past = cache.v if cache.is_filled else v_new[..., :0, :]
            k_heads, v_heads = torch.cat([k_past, k_new], -2), torch.cat([v_past, v_new], -2)
        else:
            k_heads, v_heads = k_new, v_new
        scores = q_heads @ k_heads.transpose(-2, -1) / math.sqrt(module.d_k)  # (B, H, T, T_keys)
        mask = causal_mask(x.shape[1], past + x.shape[1]) if cache is not None else None
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        heads = scores.softmax(-1) @ v_heads  # (B, H, T, d_k)
        merged = module.merge_heads(heads)  # (B, T, d_model)
        out = module.W_o(merged)
        real, _ = module(x, x, x, mask=mask, cache=cache)  # the module itself (fills the cache)
    if not torch.allclose(out, real, atol=1e-5):
        raise RuntimeError(
            "the step-by-step computation does not reproduce the module's output "
            "(is the module in training mode with dropout?)"
        )
    return dict(
        x=x,
        q=q,
        k=k,
        v=v,
        q_heads=q_heads,
        k_heads=k_heads,
        v_heads=v_heads,
        k_new=k_new,
        v_new=v_new,
        scores=scores,
        heads=heads,
        merged=merged,
        out=out,
    )


def mha_kv_cache_shapes(
    module: MultiHeadAttention | None = None, batch: int = 4, prompt_len: int = 20, seed: int = 0
) -> Figure:
    """The shapes through multi-head attention, then one generation step with a KV cache.

    Top: one forward pass over a prompt of ``prompt_len`` tokens. Bottom: the next token, which
    needs only its own query, key and value; its key and value are appended to the cache (what the
    cache keeps, in every layer: K and V of every token so far) and its one row of scores reads the
    whole cache. Every shape printed is that of the real tensor (``module`` defaults to the seed's
    ``MultiHeadAttention(d_model=512, num_heads=8)``; it is put in eval mode).
    """
    if module is None:
        torch.manual_seed(seed)
        module = MultiHeadAttention(d_model=512, num_heads=8, dropout=0.1)
    module = module.eval()
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randn(batch, prompt_len, module.d_model, generator=gen)  # (B, T, d_model)
    new_token = torch.randn(batch, 1, module.d_model, generator=gen)  # (B, 1, d_model)
    full = mha_shapes(module, prompt)
    cache = KVCache()
    mha_shapes(module, prompt, cache)  # the prompt fills the cache
    cached_before = len(cache)
    step = mha_shapes(module, new_token, cache)  # one generated token
    B, H, T, d_k = full["q_heads"].shape

    # 1 (top): the input, a grid of Q, K, V (rows) projected and split in heads (columns), then scores,
    # heads and output. 2 (bottom): the new token, a column of its q, k, v, the K and V caches as a grid of
    # one slot per token, then its scores and output. Arrows meet the boxes 0.42 up (about their middle).
    t = step["k_heads"].shape[-2]
    x_in = Cell(0.2, 7.1, 2.0, 1.3)
    projected = grid(x=3.0, y=6.15, widths=[2.4, 2.4], heights=[0.85] * 3, gap_x=0.8, gap_y=0.3)
    scores, heads, out = Cell(9.5, 7.55, 2.6, 1.3), Cell(12.9, 6.4, 2.4, 1.3), Cell(15.8, 6.4, 2.3, 1.3)
    new_x = x_in.moved(dy=-4.4)
    v_new, k_new, q_new = column(x=3.0, y=1.8, width=2.4, heights=[0.85] * 3, gap=0.3)
    k_cache, v_cache = grid(x=6.5, y=1.85, widths=[6.4 / t] * t, heights=[0.75, 0.75], gap_y=0.4)
    new_scores, new_out = Cell(13.2, 3.65, 2.3, 1.3), Cell(15.8, 1.8, 2.3, 1.3)

    fig, ax = canvas(
        18.2,
        10.4,
        title=f"Multi-head attention from scratch: the real tensor shapes (B = {B}, "
        f"H = {H} heads, d_model = {module.d_model}, d_k = {d_k})",
    )
    fs = 9

    # 1. The forward pass over the prompt.
    label(
        ax,
        0.2,
        10.05,
        f"1. One forward pass over a prompt of T = {T} tokens",
        fontsize=11,
        ha="left",
        fontweight="bold",
    )
    box(ax, *x_in, f"input x\n{_shape(full['x'])}", color="input", fontsize=fs)
    colors = {"Q": "query", "K": "key", "V": "value"}
    for name, (projection, split) in zip("QKV", projected, strict=True):
        letter = name.lower()
        box(ax, *projection, f"{name} = x W_{letter}\n{_shape(full[letter])}", color=colors[name], fontsize=fs)
        arrow(ax, (x_in.right, x_in.center_y), (projection.left, projection.y + 0.42))
        box(ax, *split, f"{name}, split in heads\n{_shape(full[letter + '_heads'])}", color=colors[name], fontsize=fs)
        arrow(ax, (projection.right, projection.y + 0.42), (split.left, split.y + 0.42))
    (_, q_split), (_, k_split), (_, v_split) = projected
    label(ax, v_split.center_x, v_split.y - 0.3, "split = view + transpose (no data copied)", fontsize=8)
    box(ax, *scores, f"scores $QK^T/\\sqrt{{d_k}}$\n{_shape(full['scores'])}", color="neutral", fontsize=fs)
    arrow(ax, (q_split.right, q_split.y + 0.42), (scores.left, scores.y + 0.85))
    arrow(ax, (k_split.right, k_split.y + 0.42), (scores.left, scores.y + 0.4))
    box(ax, *heads, f"softmax, then\nweights @ V\n{_shape(full['heads'])}", color="value", fontsize=fs)
    arrow(ax, (scores.right, scores.center_y), (heads.left, heads.y + 0.9))
    arrow(ax, (v_split.right, v_split.y + 0.42), (heads.left, heads.y + 0.35))
    box(ax, *out, f"merge heads,\nthen W_o: out\n{_shape(full['out'])}", color="output", fontsize=fs)
    arrow(ax, (heads.right, heads.center_y), (out.left, out.center_y))
    label(ax, scores.center_x, scores.top + 0.25, "the only (T, T) tensor", fontsize=8)

    # 2. One step of generation with the cache.
    label(
        ax,
        0.2,
        5.3,
        f"2. Generating token {t} with a KV cache (the same in every layer)",
        fontsize=11,
        ha="left",
        fontweight="bold",
    )
    box(ax, *new_x, f"new token x\n{_shape(step['x'])}", color="input", fontsize=fs)
    for name, cell in (("q", q_new), ("k", k_new), ("v", v_new)):
        box(
            ax,
            *cell,
            f"{name} of the new token\n{_shape(step[name + '_heads' if name == 'q' else name + '_new'])}",
            color=colors[name.upper()],
            fontsize=fs,
        )
        arrow(ax, (new_x.right, new_x.center_y), (cell.left, cell.y + 0.42))
    for slots, source, name in ((k_cache, k_new, "key"), (v_cache, v_new, "value")):
        for slot in slots:
            new = slot is slots[-1]
            ax.add_patch(
                Rectangle(
                    (slot.x, slot.y),
                    slot.w,
                    slot.h,
                    facecolor=to_rgba(COLORS[name], 1.0 if new else 0.4),
                    edgecolor=COLORS["edge"] if new else "white",
                    linewidth=1.4 if new else 0.6,
                )
            )
        outline = bounds(slots)
        ax.add_patch(Rectangle((outline.x, outline.y), outline.w, outline.h, fill=False, edgecolor=COLORS["edge"]))
        arrow(ax, (source.right, outline.y + 0.37), (outline.left, outline.y + 0.37))
    k_outline, v_outline = bounds(k_cache), bounds(v_cache)
    label(ax, k_outline.center_x, k_outline.top + 0.23, f"K cache {_shape(step['k_heads'])}", fontsize=fs)
    label(ax, v_outline.center_x, v_outline.bottom - 0.28, f"V cache {_shape(step['v_heads'])}", fontsize=fs)
    label(
        ax,
        v_outline.center_x,
        v_outline.bottom - 0.7,
        f"{cached_before} tokens kept from earlier steps (pale) + the new one, appended now (dark)",
        fontsize=8,
    )
    box(ax, *new_scores, f"scores of the\nnew query\n{_shape(step['scores'])}", color="neutral", fontsize=fs)
    arrow(ax, (q_new.right, q_new.y + 0.42), (new_scores.left, q_new.y + 0.42))
    label(ax, 9.7, 4.7, "q goes straight to the scores", fontsize=8)
    arrow(ax, (k_outline.right, k_outline.y + 0.37), (new_scores.left, new_scores.y + 0.3))
    box(ax, *new_out, f"weights @ V,\nmerge, W_o\nout {_shape(step['out'])}", color="output", fontsize=fs)
    arrow(ax, (new_scores.center_x, new_scores.bottom), (new_out.left, new_out.y + 1.05))
    arrow(ax, (v_outline.right, v_outline.y + 0.37), (new_out.left, new_out.y + 0.5))

    per_layer = 2 * step["k_heads"].numel()
    lines = [
        f"Computed at this step: the new token's q, k, v and output, and one row of {t} scores per head: "
        "O(t d) attention work.",
        f"Kept in every layer: K and V of all t tokens, 2 x B x H x t x d_k = {per_layer:,} numbers here; "
        "it grows linearly with t.",
    ]
    for i, line in enumerate(lines):
        label(ax, 0.2, 0.6 - 0.5 * i, line, fontsize=fs, ha="left")
    return fig


# --------------------------------------------------------------------------------------------
# Chapter 12: FlashAttention's tiles and the online softmax
# --------------------------------------------------------------------------------------------


def tile_counts(tiles: list[Tile], n_queries: int, n_keys: int, block_q: int, block_k: int) -> dict[str, int]:
    """What the record of ``flash_attention(..., tiles=record)`` says: tiles of the full
    ``ceil(T_q / block_q) x ceil(T_k / block_k)`` grid computed (with and without the mask) and skipped,
    tiles computed more than once, and score entries computed (a tile cut short at the causal edge
    counts only its own entries)."""
    grid = math.ceil(n_queries / block_q) * math.ceil(n_keys / block_k)
    computed = len({(t.q_start, t.k_start) for t in tiles})
    masked = sum(t.masked for t in tiles)
    entries = sum((t.q_stop - t.q_start) * (t.k_stop - t.k_start) for t in tiles)
    return {
        "grid": grid,
        "computed": computed,
        "masked": masked,
        "full": computed - masked,
        "skipped": grid - computed,
        "repeated": len(tiles) - computed,
        "entries": entries,
    }


def flash_tiles(
    n: int = 64,
    block_q: int = 8,
    block_k: int = 8,
    head_dim: int = 16,
    causal: bool = True,
    query: int | None = None,
    seed: int = 0,
) -> Figure:
    """FlashAttention's tile schedule, drawn from a real ``flash_attention`` call, with the online
    softmax of one query.

    Left: the ``n x n`` score matrix that is never stored, cut into ``block_q x block_k`` tiles.
    Every tile ``flash_attention(..., causal=causal, tiles=record)`` computed is filled (pale blue:
    computed in full; with vermillion triangles: crossing the diagonal, computed with the mask);
    tiles it never touched are white and marked "skipped". Right: for query ``query`` (default: the
    middle of the second-to-last query block), the running maximum ``m`` and the running sum ``l``
    after each key block, from :func:`online_softmax_steps` on that query's real scaled scores; the
    final ``m + log l`` is checked against the log-sum-exp the function returned.
    """
    if n < 2 or block_q < 1 or block_k < 1:
        raise ValueError(f"need n >= 2 and positive blocks; got n={n}, block_q={block_q}, block_k={block_k}")
    gen = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 1, 1, n, head_dim, generator=gen).unbind(0)  # (B=1, H=1, n, d) each
    record: list[Tile] = []
    _, lse = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k, return_lse=True, tiles=record)
    counts = tile_counts(record, n, n, block_q, block_k)
    q_blocks = math.ceil(n / block_q)
    if query is None:
        block = max(0, q_blocks - 2)
        query = min(n - 1, block * block_q + block_q // 2)
    if not 0 <= query < n:
        raise ValueError(f"query must be in [0, {n}), got {query}")
    scores = (q[0, 0, query] @ k[0, 0].T) / math.sqrt(head_dim)  # (n,) scaled scores of that query
    visible = query + 1 if causal else n
    steps = online_softmax_steps(scores[:visible], block_size=block_k)
    final = steps[-1].m + math.log(steps[-1].l)
    if not math.isclose(final, float(lse[0, 0, query]), rel_tol=1e-4, abs_tol=1e-4):
        raise RuntimeError(
            f"the online softmax of query {query} ends at {final:.5f}, flash_attention's "
            f"log-sum-exp is {float(lse[0, 0, query]):.5f}"
        )

    fig = Figure(figsize=(11.0, 5.6), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=[1.15, 1.0])
    ax = fig.add_subplot(grid[:, 0])
    side = 8.0
    unit = side / n  # diagram units per token
    ax.set_xlim(-1.3, side + 0.2)
    ax.set_ylim(-1.1, side + 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        f"Tiles of the {n} x {n} score matrix ({block_q} x {block_k} blocks, {'causal' if causal else 'no mask'})",
        fontsize=11,
    )

    def corner(q_start, k_start):  # row 0 at the top
        return k_start * unit, side - q_start * unit

    computed = {(t.q_start, t.k_start) for t in record}
    for q_start in range(0, n, block_q):  # the outline grid of tiles in white; computed ones are painted below
        height = (min(q_start + block_q, n) - q_start) * unit
        for k_start in range(0, n, block_k):
            width = (min(k_start + block_k, n) - k_start) * unit
            x, top = corner(q_start, k_start)
            ax.add_patch(
                Rectangle((x, top - height), width, height, facecolor="white", edgecolor=COLORS["edge"], linewidth=0.8)
            )
            if (q_start, k_start) not in computed and width >= 0.7:
                ax.text(
                    x + width / 2, top - height / 2, "skipped", ha="center", va="center", fontsize=7, color="#777777"
                )
    for tile in record:  # what flash_attention computed (a tile can be cut short at the causal edge)
        x, top = corner(tile.q_start, tile.k_start)
        width, height = (tile.k_stop - tile.k_start) * unit, (tile.q_stop - tile.q_start) * unit
        ax.add_patch(
            Rectangle(
                (x, top - height),
                width,
                height,
                facecolor=to_rgba(COLORS["query"], 0.35),
                edgecolor=COLORS["edge"],
                linewidth=0.8,
            )
        )
        if tile.masked:  # the part of the tile above the diagonal (key j > query i) is masked out
            ax.add_patch(
                Polygon(
                    _masked_region(tile.q_start, tile.q_stop, tile.k_start, tile.k_stop, unit, side),
                    closed=True,
                    facecolor=COLORS["mask"],
                    alpha=0.7,
                    edgecolor="none",
                )
            )
    # Highlight the query block of the chosen query and that query's row.
    block_start = (query // block_q) * block_q
    block_stop = min(block_start + block_q, n)
    ax.add_patch(
        Rectangle(
            (0, side - block_stop * unit),
            side,
            (block_stop - block_start) * unit,
            fill=False,
            edgecolor=COLORS["ffn"],
            linewidth=2.2,
        )
    )
    ax.plot([0, visible * unit], [side - (query + 0.5) * unit] * 2, color=COLORS["ffn"], linewidth=1.6)
    for q_start in range(0, n, block_q):
        label(
            ax,
            -0.1,
            side - (q_start + min(block_q, n - q_start) / 2) * unit,
            f"Q{q_start // block_q}",
            fontsize=8,
            ha="right",
        )
    for j, k_start in enumerate(range(0, n, block_k)):
        label(ax, (k_start + min(block_k, n - k_start) / 2) * unit, side + 0.22, f"KV{j}", fontsize=8)
    label(ax, side / 2, side + 0.75, "key / value blocks (inner loop, left to right)", fontsize=9)
    label(ax, -1.05, side / 2, "query blocks (outer loop)", fontsize=9, rotation=90)
    ax.text(
        0,
        -0.3,
        f"computed: {counts['computed']} of {counts['grid']} tiles ({counts['masked']} with the "
        f"mask); skipped: {counts['skipped']}",
        fontsize=9,
        ha="left",
        va="center",
    )
    ax.text(
        0,
        -0.85,
        "blue: computed   vermillion: masked (key after query)   white: never computed",
        fontsize=8,
        ha="left",
        va="center",
    )

    blocks = [s.block for s in steps]
    ax_m = fig.add_subplot(grid[0, 1])
    ax_m.plot(blocks, [s.block_max for s in steps], "o", color=COLORS["key"], label="largest score in the block")
    ax_m.plot(blocks, [s.m for s in steps], "s-", color=COLORS["ffn"], linewidth=2, label="running max m")
    ax_m.set_title(f"Online softmax of query {query} (the blue row), block by block", fontsize=11)
    ax_m.set_ylabel("scaled score")
    ax_m.legend(fontsize=8, loc="best")
    ax_m.grid(True, alpha=0.3)
    ax_l = fig.add_subplot(grid[1, 1], sharex=ax_m)
    ax_l.plot(blocks, [s.l for s in steps], "o-", color=COLORS["value"], label="running sum l = sum exp(s - m)")
    for s in steps:
        if 0 < s.alpha < 1:
            ax_l.annotate(
                f"alpha = {s.alpha:.2f}",
                (s.block, s.l),
                textcoords="offset points",
                xytext=(6, 4),
                fontsize=8,
                ha="left",
                va="bottom",
                color=COLORS["mask"],
            )
    ax_l.set_xlabel("key block consumed (KV0, KV1, ...)")
    ax_l.set_ylabel("running sum l")
    ax_l.set_xticks(blocks, [f"KV{b}" for b in blocks])
    ax_l.legend(fontsize=8, loc="best")
    ax_l.grid(True, alpha=0.3)
    ax_l.set_title("running sum, rescaled by alpha = exp(m_old - m) when m grows", fontsize=9)
    ax_l.text(
        0.98,
        0.05,
        f"after the last block: m + log l = {final:.3f},\nthe log-sum-exp flash_attention returned",
        transform=ax_l.transAxes,
        ha="right",
        va="bottom",
        fontsize=8,
        bbox=dict(facecolor="white", edgecolor="none", alpha=0.8),
    )
    return fig


def _masked_region(i0: int, i1: int, j0: int, j1: int, unit: float, side: float) -> list[tuple[float, float]]:
    """Outline of the cells (i, j) with j > i inside the tile rows [i0, i1) x columns [j0, j1),
    as a staircase polygon in diagram coordinates (row 0 at the top)."""
    points = []
    # Walk the staircase: for each row i, the masked cells are columns max(j0, i + 1) .. j1.
    for i in range(i0, i1):
        start = max(j0, i + 1)
        if start >= j1:
            continue
        points.append((start, i))
        points.append((start, i + 1))
    if not points:
        return [(0, 0)]
    last_row = points[-1][1]
    outline = points + [(j1, last_row), (j1, points[0][1])]
    return [(j * unit, side - i * unit) for j, i in outline]
