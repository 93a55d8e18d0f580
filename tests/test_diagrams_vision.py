"""Chapter 09's pictures (course_utils.diagrams.vision): each renders, carries its labels, and is drawn
from the real objects: a real digit's patches, sizes read from a real PatchEmbedding / VisionTransformer."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_utils.data import load_digits_tensors
from course_utils.diagrams import vision
from course_utils.diagrams.draw import texts
from course_utils.models import PRESETS, PatchEmbedding, VisionTransformer, patchify


def render(fig: Figure) -> None:
    assert isinstance(fig, Figure)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n", "the figure should render to PNG"


def joined(fig: Figure) -> str:
    return "\n".join(texts(fig))


@pytest.fixture(scope="module")
def digit() -> torch.Tensor:
    return load_digits_tensors(seed=0).x_test[0]  # (1, 8, 8), a real digit


def digits_vit(**changes) -> VisionTransformer:
    torch.manual_seed(0)
    sizes = dict(
        img_size=8, patch_size=2, in_channels=1, num_classes=10, d_model=32, num_heads=4, num_layers=2, d_ff=64
    )
    return VisionTransformer(**{**sizes, **changes})


def test_patch_embedding_shows_the_real_shapes_and_follows_one_patch(digit):
    embedding = digits_vit().patch_embed
    fig = vision.patch_embedding(digit, embedding)
    render(fig)
    shown = joined(fig)
    for label in (
        "image 8 x 8 pixels",
        "4 x 4 grid: N = 16 patches",
        "(N = 16, P²C = 4)",
        "(N = 16, d = 32)",
        "E: 4 x 32",
        "kernel = stride = 2",
        "flatten each",
    ):
        assert label in shown, f"the patch-embedding picture should show {label!r}"
    most_ink = int(patchify(digit[None], 2)[0].sum(1).argmax())
    assert f"patch {most_ink} becomes row {most_ink}" in shown, "by default the patch with the most ink is followed"
    assert "patch 3 becomes row 3" in joined(vision.patch_embedding(digit, embedding, highlight=3))


def test_patch_embedding_reads_patch_size_and_width_from_the_module(digit):
    fig = vision.patch_embedding(digit, PatchEmbedding(img_size=8, patch_size=4, in_channels=1, embed_dim=48))
    shown = joined(fig)
    assert "(N = 4, P²C = 16)" in shown and "(N = 4, d = 48)" in shown and "2 x 2 grid: N = 4 patches" in shown


def test_patch_embedding_draws_the_real_pixels(digit):
    # The image is drawn cell by cell: the darkest cell of the grid is the brightest pixel of the digit.
    fig = vision.patch_embedding(digit, digits_vit().patch_embed)
    cells = [
        p
        for p in fig.axes[0].patches
        if isinstance(p, Rectangle) and p.get_fill() and abs(p.get_width() - p.get_height()) < 1e-9
    ]
    image_cells = cells[:64]  # the first 64 cells drawn are the 8 x 8 image
    darkness = np.array([1 - np.mean(p.get_facecolor()[:3]) for p in image_cells]).reshape(8, 8)
    pixels = digit[0].numpy()
    assert np.corrcoef(darkness.ravel(), pixels.ravel())[0, 1] > 0.99, "cell shades should follow the pixels"


def test_patch_embedding_rejects_bad_input(digit):
    embedding = digits_vit().patch_embed
    with pytest.raises(ValueError, match="image must be"):
        vision.patch_embedding(torch.zeros(1, 16, 16), embedding)
    with pytest.raises(ValueError, match="highlight=16"):
        vision.patch_embedding(digit, embedding, highlight=16)
    with pytest.raises(ValueError, match="one-channel"):
        vision.patch_embedding(digit, PatchEmbedding(img_size=8, patch_size=2, in_channels=3, embed_dim=8))


def test_vision_transformer_labels_every_stage_with_the_model_sizes(digit):
    fig = vision.vision_transformer(digits_vit(), digit, prediction=4)
    render(fig)
    shown = joined(fig)
    for label in (
        "Linear projection of flattened patches: E (4 x 32)",
        "CLS",
        "[CLS]",
        "position embedding",
        "(learned, 17 x 32)",
        "Transformer encoder: L = 2 pre-norm layers, 4 heads, d = 32",
        "multi-head\nself-attention",
        "LayerNorm",
        "32 → 64 → 32",
        "head: Linear 32 → 10",
        "predicted class 4",
        "N = 16 patches of 2 x 2 x 1",
        "8 x 8 image",
    ):
        assert label in shown, f"the ViT picture should show {label!r}"
    positions = {t for t in texts(fig) if t.isdigit()}
    assert {str(i) for i in range(17)} <= positions, "all 17 positions ([CLS] = 0 and 16 patches) are numbered"


def test_vision_transformer_reads_vit_b16_from_the_preset():
    fig = vision.vision_transformer(PRESETS["vit-b16"].build("meta"))
    render(fig)
    shown = joined(fig)
    for label in (
        "L = 12 pre-norm layers, 12 heads, d = 768",
        "768 → 3072 → 768",
        "E (768 x 768)",
        "197 x 768",
        "N = 196 patches of 16 x 16 x 3",
        "1000 class scores",
        "…",
    ):
        assert label in shown, f"ViT-B/16's picture should show {label!r}"
    assert "195" in texts(fig) and "196" in texts(fig), "the last patches of a long sequence are drawn"


def test_vision_transformer_rejects_bad_input(digit):
    with pytest.raises(ValueError, match="prediction=10"):
        vision.vision_transformer(digits_vit(), digit, prediction=10)
    with pytest.raises(ValueError, match="image must be"):
        vision.vision_transformer(digits_vit(img_size=16), digit)
