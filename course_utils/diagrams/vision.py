"""Chapter 09's pictures: how a Vision Transformer turns an image into tokens and a class.

- :func:`patch_embedding` a real image cut into its grid of ``P x P`` patches, the patches flattened
  into the rows of a ``(N, P^2 C)`` matrix, and the ``(N, d)`` tokens that a real
  :class:`~course_utils.models.PatchEmbedding` makes of them (the seed's 9.2 figure, "Patch
  Embedding"); one patch is followed through all three.
- :func:`vision_transformer` the whole model, as in figure 1 of Dosovitskiy et al. (2020): patches ->
  one shared linear projection -> ``[CLS]`` token in front, position embeddings added -> Transformer
  encoder -> classification head on the ``[CLS]`` output (the seed's 9.0 figure, "Vision Transformer
  架构"). Every size in it is read from a real :class:`~course_utils.models.VisionTransformer`.

Both return a :class:`matplotlib.figure.Figure` built with :mod:`course_utils.diagrams.draw`; the Vision
Transformer's boxes stand in the lanes and bars of :mod:`course_utils.diagrams.layout`.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from . import draw, layout

__all__ = ["vit_sizes", "patch_embedding", "vision_transformer"]


def vit_sizes(model) -> dict:
    """The sizes of a :class:`~course_utils.models.VisionTransformer`, read from its modules."""
    embed = model.patch_embed
    layer = model.encoder.layers[0]
    return dict(
        img_size=embed.img_size,
        patch_size=embed.patch_size,
        channels=embed.in_channels,
        grid=embed.img_size // embed.patch_size,
        num_patches=embed.num_patches,
        d_model=model.cls_token.shape[-1],
        num_layers=len(model.encoder.layers),
        heads=layer.self_attn.num_heads,
        d_ff=layer.ffn.linear1.out_features,
        classes=model.head.out_features,
        norm_first=layer.norm_first,
        positions=tuple(model.pos_embedding.shape[1:]),
    )


def _image_array(image, img_size: int, channels: int) -> np.ndarray:
    """``image`` as a float ``(H, W)`` array (grey images only), checked against the model's size."""
    array = np.asarray(image.detach().cpu() if hasattr(image, "detach") else image, dtype=float)
    if array.ndim == 3 and array.shape[0] == 1:
        array = array[0]
    if channels != 1:
        raise ValueError(f"these pictures draw one-channel images; the model expects {channels} channels")
    if array.shape != (img_size, img_size):
        raise ValueError(
            f"image must be ({img_size}, {img_size}) or (1, {img_size}, {img_size}) for this model, "
            f"got shape {tuple(np.shape(image))}"
        )
    return array


def _grey_cells(ax, x: float, y: float, values: np.ndarray, cell: float, low: float, high: float) -> None:
    """``values`` as grey cells (row 0 at the top), shaded on the fixed range ``low..high`` (the whole
    image's), so that a patch looks as dark as it does in the image; :func:`draw.matrix` would
    stretch every small matrix to its own range."""
    from matplotlib import colormaps

    greys, span = colormaps["Greys"], (high - low) or 1.0
    rows, cols = values.shape
    for i in range(rows):
        for j in range(cols):
            face = greys(0.15 + 0.7 * (values[i, j] - low) / span)
            ax.add_patch(
                Rectangle(
                    (x + j * cell, y + (rows - 1 - i) * cell),
                    cell,
                    cell,
                    facecolor=face,
                    edgecolor="white",
                    linewidth=0.5,
                )
            )
    ax.add_patch(Rectangle((x, y), cols * cell, rows * cell, fill=False, edgecolor=draw.COLORS["edge"], linewidth=1.0))


def _patch_grid(
    ax,
    x: float,
    y: float,
    image: np.ndarray,
    patch: int,
    cell: float,
    numbers: bool = True,
    highlight: int | None = None,
) -> None:
    """The image as grey cells (row 0 at the top) with thick lines between patches, each patch's
    index in its corner and ``highlight`` outlined."""
    size = image.shape[0]
    draw.matrix(ax, x, y, values=image, cell=cell, cmap="Greys", shape_label="")
    grid = size // patch
    for k in range(1, grid):
        offset = k * patch * cell
        ax.plot([x + offset, x + offset], [y, y + size * cell], color=draw.COLORS["ffn"], linewidth=2.2)
        ax.plot([x, x + size * cell], [y + offset, y + offset], color=draw.COLORS["ffn"], linewidth=2.2)
    for index in range(grid * grid):
        row, col = divmod(index, grid)
        left, top = x + col * patch * cell, y + (size - row * patch) * cell
        if numbers:
            draw.label(
                ax,
                left + 0.06,
                top - 0.06,
                str(index),
                fontsize=9,
                ha="left",
                va="top",
                color=draw.COLORS["ffn"],
                fontweight="bold",
                bbox=dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.8),
            )
        if index == highlight:
            ax.add_patch(
                Rectangle(
                    (left, top - patch * cell),
                    patch * cell,
                    patch * cell,
                    fill=False,
                    edgecolor=draw.COLORS["mask"],
                    linewidth=3.0,
                    zorder=5,
                )
            )


def _row_outline(ax, x: float, y: float, rows: int, row: int, cols: int, cell: float) -> None:
    """Outline row ``row`` of a matrix drawn by :func:`draw.matrix` at ``(x, y)``."""
    ax.add_patch(
        Rectangle(
            (x - 0.04, y + (rows - 1 - row) * cell - 0.02),
            cols * cell + 0.08,
            cell + 0.04,
            fill=False,
            edgecolor=draw.COLORS["mask"],
            linewidth=2.5,
            zorder=5,
        )
    )


def patch_embedding(image, embedding, highlight: int | None = None, shown_columns: int = 8) -> Figure:
    """A real ``image`` ``(H, W)`` or ``(1, H, W)``, its patches and the tokens ``embedding`` makes of them.

    ``embedding`` is a :class:`~course_utils.models.PatchEmbedding` (its patch size, width and
    weights are used); the middle matrix is :func:`~course_utils.models.patchify` of the image and
    the right one the embedding's real output, of which the first ``shown_columns`` columns are drawn.
    ``highlight`` is the patch followed through (default: the one with the most ink).
    """
    from ..models import patchify

    patch, channels = embedding.patch_size, embedding.in_channels
    pixels = _image_array(image, embedding.img_size, channels)
    batch = torch.as_tensor(pixels, dtype=torch.float32)[None, None]  # (1, 1, H, W)
    with torch.no_grad():
        patches = patchify(batch, patch)[0]  # (N, P*P*C)
        tokens = embedding(batch.to(embedding.proj.weight.device))[0].cpu()  # (N, d)
    count, width = patches.shape
    d_model = tokens.shape[1]
    if highlight is None:
        highlight = int(patches.sum(1).argmax())
    if not 0 <= highlight < count:
        raise ValueError(f"highlight={highlight} is not a patch index (0..{count - 1})")
    shown = min(shown_columns, d_model)

    cell = 0.3
    rows_h = count * cell
    image_cell = min(0.5, rows_h / pixels.shape[0])
    image_w = pixels.shape[0] * image_cell
    img_x, base_y = 0.5, 1.1
    patches_x = img_x + image_w + 2.6
    proj_x = patches_x + width * cell + 0.6
    tokens_x = proj_x + 3.0
    total_w = tokens_x + shown * cell + 1.6
    height = base_y + rows_h + 1.35
    fig, ax = draw.canvas(total_w, height, scale=0.85)
    draw.label(
        ax,
        total_w / 2,
        height - 0.3,
        f"Patch embedding: cut into {count} patches of {patch} x {patch}, flatten, one shared linear map",
        fontsize=12.5,
    )

    # The image and its patch grid.
    img_y = base_y + (rows_h - image_w) / 2
    _patch_grid(ax, img_x, img_y, pixels, patch, image_cell, highlight=highlight)
    grid = pixels.shape[0] // patch
    draw.label(
        ax,
        img_x + image_w / 2,
        img_y + image_w + 0.3,
        f"image {pixels.shape[0]} x {pixels.shape[1]} pixels, {channels} channel",
        fontsize=10.5,
    )
    draw.label(ax, img_x + image_w / 2, img_y - 0.3, f"{grid} x {grid} grid: N = {count} patches", fontsize=10.5)
    draw.arrow(
        ax,
        (img_x + image_w + 0.2, base_y + rows_h / 2),
        (patches_x - 0.55, base_y + rows_h / 2),
        text="flatten each\npatch (row-major\norder)",
        fontsize=10,
        text_offset=(0.0, 0.2),
    )

    # Flattened patches (N, P*P*C), real pixel values.
    draw.matrix(
        ax,
        patches_x,
        base_y,
        values=patches.numpy(),
        cell=cell,
        cmap="Greys",
        name="patches",
        shape_label=f"(N = {count}, P²C = {width})",
        fontsize=9.5,
    )
    for row in range(count):
        draw.label(
            ax,
            patches_x - 0.15,
            base_y + (count - 0.5 - row) * cell,
            str(row),
            fontsize=9,
            ha="right",
            color=draw.COLORS["ffn"],
        )
    _row_outline(ax, patches_x, base_y, count, highlight, width, cell)

    # The projection, then the tokens (N, d), real output values.
    weight_shape = f"E: {width} x {d_model}"
    draw.box(
        ax,
        proj_x + 0.25,
        base_y + rows_h / 2 - 0.75,
        2.1,
        1.5,
        f"× E + b\n{weight_shape}\nthe same for\nevery patch",
        color="input",
        fontsize=10.5,
    )
    draw.arrow(ax, (patches_x + width * cell + 0.05, base_y + rows_h / 2), (proj_x + 0.23, base_y + rows_h / 2))
    draw.arrow(ax, (proj_x + 2.37, base_y + rows_h / 2), (tokens_x - 0.05, base_y + rows_h / 2))
    draw.matrix(
        ax,
        tokens_x,
        base_y,
        values=tokens[:, :shown].numpy(),
        cell=cell,
        cmap="RdBu_r",
        name="tokens",
        shape_label=f"(N = {count}, d = {d_model})",
        fontsize=9.5,
    )
    if shown < d_model:
        draw.label(
            ax,
            tokens_x + shown * cell + 0.1,
            base_y + rows_h / 2,
            f"…\n{d_model - shown}\nmore\ncolumns",
            fontsize=9.5,
            ha="left",
        )
    _row_outline(ax, tokens_x, base_y, count, highlight, shown, cell)
    draw.label(
        ax,
        total_w / 2,
        0.35,
        f"outlined: patch {highlight} becomes row {highlight} of the patches and token {highlight}; "
        f"a Conv2d with kernel = stride = {patch} computes exactly this",
        fontsize=10.5,
        color=draw.COLORS["mask"],
    )
    return fig


def vision_transformer(model, image=None, prediction: int | None = None) -> Figure:
    """The Vision Transformer of ``model`` (a :class:`~course_utils.models.VisionTransformer`).

    With ``image`` (``(H, W)`` or ``(1, H, W)``, one channel) the picture shows that image and its
    real patches; ``prediction`` (a class index) is written at the top. Grids of more than 16
    patches are drawn with the middle patches left out.
    """
    s = vit_sizes(model)
    count = s["num_patches"]
    pixels = None if image is None else _image_array(image, s["img_size"], s["channels"])
    if prediction is not None and not 0 <= prediction < s["classes"]:
        raise ValueError(f"prediction={prediction} is not a class index (0..{s['classes'] - 1})")
    slots = list(range(count)) if count <= 16 else [0, 1, 2, 3, 4, 5, None, count - 2, count - 1]  # None: "…"

    # One lane per token, [CLS] first: lanes[i] holds patch i's picture, and every stage above draws
    # token i on the same vertical axis. The stages are bars across the lanes, stacked bottom to top.
    lanes = layout.row(x=2.6, y=1.02, widths=[0.5] * (len(slots) + 1), height=0.5, gap=0.28)
    projection = layout.across(lanes[1:], y=2.2, height=0.6, margin=0.15)
    tokens = layout.across(lanes, y=3.35, height=0.6)
    encoder = layout.across(lanes, y=4.55, height=2.3, margin=0.25)
    head = layout.Cell(lanes[0].center_x - 0.9, encoder.top + 0.7, 2.9, 0.6)

    width = max(13.0, encoder.right + 0.58)
    fig, ax = draw.canvas(width, 9.75, scale=0.85)
    draw.label(ax, width / 2, 9.55, "Vision Transformer: an image becomes a sequence of tokens", fontsize=13)
    _draw_patches(ax, s, pixels, slots, lanes, projection)
    # 2. The linear projection, one for all patches.
    draw.box(
        ax,
        *projection,
        f"Linear projection of flattened patches: E ({s['patch_size'] ** 2 * s['channels']} x {s['d_model']}), "
        "one for all",
        color="input",
        fontsize=10.5,
    )
    _draw_tokens(ax, s, slots, lanes, projection, tokens)
    _draw_encoder(ax, s, slots, lanes, tokens, encoder)
    _draw_head(ax, s, slots, lanes, encoder, head, prediction)
    return fig


def _draw_patches(
    ax, s: dict, pixels: np.ndarray | None, slots: list, lanes: list[layout.Cell], projection: layout.Cell
) -> None:
    """1. The image (or a box standing for it) at the bottom left, cut into the patches of ``lanes[1:]``,
    each with an arrow up into the ``projection``."""
    count, patch = s["num_patches"], s["patch_size"]
    image = layout.Cell(0.2, 0.5, 1.55, 1.55)
    pictures = None
    if pixels is not None:
        from ..models import patchify

        pictures = patchify(torch.as_tensor(pixels, dtype=torch.float32)[None, None], patch)[0]
        pictures = pictures.view(count, patch, patch).numpy()
        _patch_grid(ax, image.x, image.y, pixels, patch, image.w / pixels.shape[0], numbers=False)
        caption_x = image.x + 0.78  # under the image (0.78, not its exact half 0.775, as the figure was first drawn)
        draw.label(ax, caption_x, image.y - 0.25, f"{s['img_size']} x {s['img_size']} image", fontsize=10)
    else:
        draw.box(ax, *image, f"{s['img_size']} x {s['img_size']}\nimage", color="neutral", fontsize=9)
    draw.arrow(ax, (image.right + 0.1, lanes[1].center_y), (lanes[1].left - 0.2, lanes[1].center_y))
    draw.label(ax, (image.right + lanes[1].left + 0.05) / 2, lanes[1].top + 0.03, "cut", fontsize=9)

    for lane, index in zip(lanes[1:], slots, strict=True):
        if index is None:
            draw.label(ax, *lane.center, "…", fontsize=14)
            continue
        if pictures is not None:
            _grey_cells(ax, lane.x, lane.y, pictures[index], lane.w / patch, pixels.min(), pixels.max())
        else:
            draw.box(ax, *lane, "", color="neutral", rounded=False)
        draw.label(ax, lane.center_x, lane.y - 0.22, str(index), fontsize=9)
        draw.arrow(ax, (lane.center_x, lane.top + 0.03), (lane.center_x, projection.bottom), width=0.8)
    draw.label(ax, lanes[1].left - 0.2, lanes[1].y - 0.22, "patch", fontsize=9, ha="right")
    draw.label(
        ax,
        projection.center_x,
        0.35,
        f"N = {count} patches of {patch} x {patch} x {s['channels']}, flattened to {patch * patch * s['channels']} "
        "numbers each",
        fontsize=10.5,
    )


def _draw_tokens(
    ax, s: dict, slots: list, lanes: list[layout.Cell], projection: layout.Cell, tokens: layout.Cell
) -> None:
    """3. The tokens: the learned [CLS] in front, then one per patch from the projection, and their
    legend on the left."""
    for i, lane in enumerate(lanes):
        if i > 0 and slots[i - 1] is None:
            draw.label(ax, lane.center_x, tokens.center_y, "…", fontsize=14)
            continue
        # A position box beside its embedding (the two are added), a hair left of the lane's axis.
        position, embedding = layout.row(
            x=lane.center_x - 0.36, y=tokens.y, widths=[0.34, 0.35], height=tokens.h, gap=0.01
        )
        draw.box(ax, *position, str(0 if i == 0 else slots[i - 1] + 1), color="position", fontsize=9, rounded=False)
        draw.box(
            ax,
            *embedding,
            "CLS" if i == 0 else "",
            color="output" if i == 0 else "input",
            fontsize=7.5,
            rounded=False,
        )
        if i > 0:
            draw.arrow(ax, (lane.center_x, projection.top), (lane.center_x, tokens.bottom), width=0.8)
    draw.label(ax, lanes[0].center_x, tokens.y - 0.35, "[CLS]\nlearned", fontsize=9, va="top")
    draw.label(
        ax,
        0.15,
        tokens.center_y,
        f"position embedding\n(learned, {s['positions'][0]} x {s['positions'][1]})\n+ token embedding",
        fontsize=9.5,
        ha="left",
    )
    patch_swatch, position_swatch = layout.column(x=0.15, y=tokens.y - 1.15, width=0.25, heights=[0.3, 0.3], gap=0.1)
    for swatch, color, name in ((position_swatch, "position", "position"), (patch_swatch, "input", "patch token")):
        draw.box(ax, *swatch, "", color=color, rounded=False)
        draw.label(ax, swatch.right + 0.1, swatch.center_y, name, fontsize=9, ha="left")


def _draw_encoder(
    ax, s: dict, slots: list, lanes: list[layout.Cell], tokens: layout.Cell, encoder: layout.Cell
) -> None:
    """4. Every token into the encoder, drawn as its one repeated layer: a row of its parts."""
    for i, lane in enumerate(lanes):
        if i == 0 or slots[i - 1] is not None:
            draw.arrow(ax, (lane.center_x, tokens.top), (lane.center_x, encoder.bottom), width=0.8)
    draw.box(ax, *encoder, "", color="neutral")
    norm = "pre-norm" if s["norm_first"] else "post-norm"
    draw.label(
        ax,
        encoder.center_x,
        encoder.top - 0.35,
        f"Transformer encoder: L = {s['num_layers']} {norm} layers, {s['heads']} heads, d = {s['d_model']}",
        fontsize=10.5,
        fontweight="bold",
    )
    parts = (
        ("LayerNorm", "norm", 1.25),
        ("multi-head\nself-attention", "query", 1.55),
        ("⊕", "neutral", 0.45),
        ("LayerNorm", "norm", 1.25),
        (f"MLP\n{s['d_model']} → {s['d_ff']} → {s['d_model']}", "ffn", 1.55),
        ("⊕", "neutral", 0.45),
    )
    cells = layout.row(x=0.0, y=encoder.y + 0.35, widths=[w for _, _, w in parts], height=0.9, gap=0.25)
    cells = layout.centered(cells, x=encoder.center_x)
    for i, ((text, color, _), cell) in enumerate(zip(parts, cells, strict=True)):
        draw.box(ax, *cell, text, color=color, fontsize=10 if text != "⊕" else 14, alpha=0.6)
        if i < len(cells) - 1:
            draw.arrow(ax, (cell.right, cell.center_y), (cells[i + 1].left, cell.center_y), width=0.8)
    draw.label(
        ax,
        encoder.center_x,
        cells[0].y + 1.2,
        f"one layer of {s['num_layers']} (⊕ = residual add); every token attends to every token; "
        "a final LayerNorm follows the stack",
        fontsize=9.5,
        style="italic",
    )


def _draw_head(
    ax, s: dict, slots: list, lanes: list[layout.Cell], encoder: layout.Cell, head: layout.Cell, prediction: int | None
) -> None:
    """5. The classification head reads the [CLS] output only; the patch outputs stop short."""
    for lane, index in zip(lanes[1:], slots, strict=True):
        if index is not None:
            ax.plot([lane.center_x] * 2, [encoder.top, encoder.top + 0.3], color=draw.COLORS["norm"], linewidth=1.0)
    draw.label(
        ax,
        layout.bounds(lanes[1:]).center_x,
        encoder.top + 0.5,
        "patch outputs: not used by the classifier",
        fontsize=9.5,
        color="#777777",
    )
    draw.arrow(ax, (lanes[0].center_x, encoder.top), (lanes[0].center_x, head.bottom), color="output", width=2.0)
    draw.box(ax, *head, f"head: Linear {s['d_model']} → {s['classes']}", color="output", fontsize=9.5)
    draw.arrow(ax, (head.center_x, head.top), (head.center_x, head.top + 0.45), color="output", width=1.5)
    answer = f"{s['classes']} class scores" + ("" if prediction is None else f": predicted class {prediction}")
    draw.label(
        ax,
        head.center_x,
        head.top + 0.65,
        answer,
        fontsize=10,
        ha="left" if prediction is not None else "center",
        fontweight="bold",
    )
