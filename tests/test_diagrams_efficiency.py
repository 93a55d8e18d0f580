"""The pictures of chapters 11 and 12 (course_utils.diagrams.efficiency), and the tile record of
course_utils.flash.flash_attention that the FlashAttention picture and chapter 12's checks read."""

from __future__ import annotations

import io

import pytest
import torch

from course_utils.attention import MultiHeadAttention, causal_mask
from course_utils.bench import naive_attention
from course_utils.diagrams import efficiency
from course_utils.diagrams.draw import texts
from course_utils.flash import Tile, flash_attention


def _png_size(fig) -> tuple[int, int]:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=72)
    from matplotlib.image import imread

    buffer.seek(0)
    height, width = imread(buffer).shape[:2]
    assert width > 300 and height > 200, f"the PNG is only {width} x {height} pixels"
    return width, height


def _joined(fig) -> str:
    return "\n".join(texts(fig))


# --------------------------------------------------------------------------------------------
# Chapter 11: shapes through multi-head attention and the KV cache
# --------------------------------------------------------------------------------------------


def test_mha_kv_cache_picture_renders_with_the_real_shapes():
    torch.manual_seed(0)
    fig = efficiency.mha_kv_cache_shapes(MultiHeadAttention(d_model=512, num_heads=8), batch=4, prompt_len=20)
    _png_size(fig)
    shown = _joined(fig)
    assert "Multi-head attention from scratch" in shown, "the figure needs its title"
    for shape in (
        "(4, 20, 512)",
        "(4, 8, 20, 64)",
        "(4, 8, 20, 20)",  # prompt: x, heads, scores
        "(4, 1, 512)",
        "(4, 8, 1, 64)",
        "(4, 8, 21, 64)",
        "(4, 8, 1, 21)",
    ):  # one cached step
        assert shape in shown, f"shape {shape} is missing from the picture"
    for words in ("K cache", "V cache", "Kept in every layer", "Computed at this step"):
        assert words in shown, f"label {words!r} is missing"


def test_mha_kv_cache_picture_follows_the_module_and_prompt():
    torch.manual_seed(1)
    fig = efficiency.mha_kv_cache_shapes(MultiHeadAttention(d_model=64, num_heads=4), batch=2, prompt_len=7)
    shown = _joined(fig)
    assert "(2, 4, 7, 16)" in shown and "(2, 4, 8, 16)" in shown and "(2, 4, 1, 8)" in shown, shown
    assert "Generating token 8" in shown, "the step after a 7-token prompt generates token 8"


def test_mha_shapes_reproduces_the_module_and_refuses_a_module_with_active_dropout():
    torch.manual_seed(2)
    module = MultiHeadAttention(d_model=32, num_heads=4, dropout=0.0).eval()
    x = torch.randn(3, 5, 32)
    shapes = efficiency.mha_shapes(module, x)
    expected, _ = module(x, x, x)
    assert torch.allclose(shapes["out"], expected, atol=1e-6)
    assert shapes["scores"].shape == (3, 4, 5, 5) and shapes["q_heads"].shape == (3, 4, 5, 8)
    noisy = MultiHeadAttention(d_model=32, num_heads=4, dropout=0.5).train()
    with pytest.raises(RuntimeError, match="training mode"):
        efficiency.mha_shapes(noisy, x)


# --------------------------------------------------------------------------------------------
# Chapter 12: FlashAttention's tiles
# --------------------------------------------------------------------------------------------


def test_flash_tiles_picture_renders_from_the_real_tile_schedule():
    fig = efficiency.flash_tiles(n=64, block_q=8, block_k=8)
    _png_size(fig)
    shown = _joined(fig)
    assert "Tiles of the 64 x 64 score matrix" in shown and "Online softmax of query" in shown
    assert "computed: 36 of 64 tiles (8 with the mask); skipped: 28" in shown, (
        "the counts must be those of the real call"
    )
    assert shown.count("skipped") >= 28, "every skipped tile is marked"
    for name in ("Q0", "Q7", "KV0", "KV7", "running max m", "log-sum-exp", "scaled score"):
        assert name in shown, f"label {name!r} is missing"


def test_flash_tiles_picture_without_mask_and_with_ragged_blocks():
    full = _joined(efficiency.flash_tiles(n=32, block_q=8, block_k=8, causal=False))
    assert "computed: 16 of 16 tiles (0 with the mask); skipped: 0" in full and "no mask" in full
    ragged = _joined(efficiency.flash_tiles(n=37, block_q=8, block_k=5, query=30))
    assert "computed: 26 of 40 tiles" in ragged and "query 30" in ragged
    with pytest.raises(ValueError, match="query"):
        efficiency.flash_tiles(n=16, query=16)


def test_flash_attention_records_the_tiles_it_computes():
    q, k, v = torch.randn(3, 2, 3, 64, 16).unbind(0)  # (B, H, n, d)
    record: list[Tile] = []
    out = flash_attention(q, k, v, causal=True, block_q=8, block_k=8, tiles=record)
    assert torch.equal(out, flash_attention(q, k, v, causal=True, block_q=8, block_k=8)), (
        "recording the tiles must not change the result"
    )
    counts = efficiency.tile_counts(record, 64, 64, 8, 8)
    assert counts == {
        "grid": 64,
        "computed": 36,
        "masked": 8,
        "full": 28,
        "skipped": 28,
        "repeated": 0,
        "entries": 36 * 64,
    }, counts
    assert all(t.masked == (t.q_start == t.k_start) for t in record), (
        "with equal blocks the diagonal tiles need the mask"
    )
    dense: list[Tile] = []
    flash_attention(q, k, v, causal=False, block_q=16, block_k=8, tiles=dense)
    assert len(dense) == 4 * 8 and not any(t.masked for t in dense)


@pytest.mark.parametrize(
    "n_q,n_k,block_q,block_k,causal",
    [
        (37, 37, 8, 5, True),
        (37, 37, 5, 16, True),
        (100, 100, 128, 128, True),
        (13, 57, 8, 16, False),
        (61, 9, 16, 4, False),
    ],
)
def test_recorded_tiles_cover_every_visible_score_exactly_once(n_q, n_k, block_q, block_k, causal):
    q = torch.randn(1, 2, n_q, 8)
    k, v = torch.randn(2, 1, 2, n_k, 8).unbind(0)
    record: list[Tile] = []
    out = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k, tiles=record)
    assert (out - naive_attention(q, k, v, causal=causal)).abs().max() < 1e-5
    coverage = torch.zeros(n_q, n_k, dtype=torch.int64)
    for t in record:
        coverage[t.q_start : t.q_stop, t.k_start : t.k_stop] += 1
    visible = causal_mask(n_q, n_k) if causal else torch.ones(n_q, n_k, dtype=torch.bool)
    assert (coverage[visible] == 1).all(), "every score a query may see is computed exactly once"
    if causal:
        assert all(t.k_start < t.q_stop for t in record), "no tile lies entirely in the future of its queries"


def test_tiles_argument_must_be_a_list():
    q = torch.randn(1, 4, 8)
    with pytest.raises(TypeError, match="tiles must be a list"):
        flash_attention(q, q, q, tiles=())
