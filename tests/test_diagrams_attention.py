"""The diagrams of chapters 02 and 03 (course_utils.diagrams.attention): each figure renders to PNG and
shows the labels it promises; pictures drawn from real objects show the real numbers and shapes."""

from __future__ import annotations

import io
import math

import pytest
import torch
from matplotlib.figure import Figure

from course_utils.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from course_utils.diagrams import attention as pictures
from course_utils.diagrams.draw import texts

# Chapter 02's hand-sized example.
X = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
W_Q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
W_K = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
W_V = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
Q, K, V = X @ W_Q, X @ W_K, X @ W_V


def render(fig: Figure) -> bytes:
    """PNG bytes of the figure at the notebook's resolution; fails if drawing fails."""
    assert isinstance(fig, Figure)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    data = buffer.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, "the figure should render to a real PNG"
    width, height = fig.get_size_inches()
    assert 7 <= width <= 11.5 and height <= 9, f"a notebook-sized figure, got {width:.1f} x {height:.1f} inches"
    return data


def joined(fig: Figure) -> str:
    return "\n".join(texts(fig))


# --------------------------------------------------------------------------------------------
# Self-attention as links
# --------------------------------------------------------------------------------------------


def test_self_attention_links_draws_the_real_weights_and_every_link():
    _, weights = scaled_dot_product_attention(Q, K, V)
    fig = pictures.self_attention_links(weights, tokens=["token 1", "token 2", "token 3"])
    render(fig)
    shown = texts(fig)
    for i in range(3):
        for j in range(3):
            assert f"{weights[i, j].item():.2f}" in shown, "every weight is written in the matrix"
    assert "Self-attention: every position reads every position, itself included" in shown
    assert "3 × 3 = 9 links, each one step long; line width ∝ weight" in shown
    assert shown.count("token 2") == 1 and "z3" in shown and "q1" in shown and "k3" in shown
    # One line per (query, key) pair, and the widest line is the largest weight (token 3 on itself).
    ax = fig.axes[0]
    widths = [line.get_linewidth() for line in ax.get_lines()]
    assert len(widths) == 9
    assert max(widths) == pytest.approx(0.4 + 7.0 * weights.max().item())


def test_self_attention_links_rejects_weights_that_are_not_distributions():
    with pytest.raises(ValueError, match="square"):
        pictures.self_attention_links(torch.rand(3, 4))
    with pytest.raises(ValueError, match="probability distribution"):
        pictures.self_attention_links(torch.ones(3, 3))
    with pytest.raises(ValueError, match="2 token names for 3 positions"):
        pictures.self_attention_links(torch.full((3, 3), 1 / 3), tokens=["a", "b"])
    with pytest.raises(ValueError, match="1 to 8 positions"):
        pictures.self_attention_links(torch.full((9, 9), 1 / 9))


# --------------------------------------------------------------------------------------------
# Q, K, V projections
# --------------------------------------------------------------------------------------------


def test_qkv_projections_writes_the_real_matrices_and_shapes():
    fig = pictures.qkv_projections(X, W_Q, W_K, W_V, tokens=["token 1", "token 2", "token 3"])
    render(fig)
    shown = joined(fig)
    for label in (
        "$W^Q$",
        "$W^K$",
        "$W^V$",
        "Q = X$W^Q$",
        "K = X$W^K$",
        "V = X$W^V$",
        "(n = 3, d_model = 4)",
        "(4, d_k = 2)",
        "(4, d_v = 2)",
        "(3, 2)",
        "Queries, keys and values: one input, three projections",
        "Q: what each token is looking for",
    ):
        assert label in shown, label
    # Q = X W^Q's first row is [2, 0]: the numbers in the picture are computed from the inputs.
    assert texts(fig).count("2") >= int((Q == 2).sum() + (K == 2).sum())


def test_qkv_projections_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="W_K has 3 rows but X has d_model = 4"):
        pictures.qkv_projections(X, W_Q, W_K[:3], W_V)
    with pytest.raises(ValueError, match="same d_k"):
        pictures.qkv_projections(X, W_Q, torch.ones(4, 3), W_V)
    with pytest.raises(ValueError, match="2-D"):
        pictures.qkv_projections(X[None], W_Q, W_K, W_V)
    with pytest.raises(ValueError, match="at most 8"):
        pictures.qkv_projections(torch.ones(3, 9), torch.ones(9, 2), torch.ones(9, 2), torch.ones(9, 2))


# --------------------------------------------------------------------------------------------
# The scaled dot-product flow
# --------------------------------------------------------------------------------------------


def test_scaled_dot_product_flow_shows_each_step_with_its_real_matrix():
    fig = pictures.scaled_dot_product_flow(Q, K, V)
    render(fig)
    shown = texts(fig)
    for label in (
        "MatMul\nS = Q Kᵀ",
        "Scale\nS / √d_k  (d_k = 2)",
        "Mask (opt.)",
        "SoftMax\nover each row",
        "MatMul\nZ = A V",
        "no mask: unchanged",
        "S (3, 3)",
        "A (3, 3), rows sum to 1",
        "Z (3, 2)",
        "Attention(Q, K, V) = softmax(QKᵀ / √d_k) V",
    ):
        assert label in shown, label
    scaled = Q @ K.T / math.sqrt(2)
    out, weights = scaled_dot_product_attention(Q, K, V)
    assert f"{scaled[2, 2].item():.2f}" in shown and f"{weights[2, 2].item():.2f}" in shown
    assert f"{out[0, 1].item():.2f}" in shown
    assert "−∞" not in shown, "without a mask nothing is masked"


def test_scaled_dot_product_flow_with_a_causal_mask_marks_the_masked_scores():
    fig = pictures.scaled_dot_product_flow(Q, K, V, mask=causal_mask(3))
    render(fig)
    shown = texts(fig)
    assert shown.count("−∞") == 3, "the three upper-triangle scores are masked"
    assert "masked: −∞" in shown and "1.00" in shown, "query 1 can only attend to itself"


def test_scaled_dot_product_flow_rejects_bad_input():
    with pytest.raises(ValueError, match="same d_k"):
        pictures.scaled_dot_product_flow(Q, torch.ones(3, 3), V)
    with pytest.raises(ValueError, match="one row per key"):
        pictures.scaled_dot_product_flow(Q, K, V[:2])
    with pytest.raises(ValueError, match=r"mask must be \(n_q, n_k\)"):
        pictures.scaled_dot_product_flow(Q, K, V, mask=torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one key"):
        pictures.scaled_dot_product_flow(Q, K, V, mask=torch.zeros(3, 3, dtype=torch.bool))


# --------------------------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------------------------


def test_multi_head_flow_reads_heads_and_shapes_from_the_module():
    module = MultiHeadAttention(512, 8, dropout=0.1)  # in training mode: the picture must not change that
    fig = pictures.multi_head_flow(module, seq_len=10)
    render(fig)
    assert module.training, "drawing must leave the module in the mode it was in"
    shown = joined(fig)
    for label in (
        "Multi-head attention: h = 8 heads of d_k = 512 / 8 = 64 features, in parallel",
        "split each into heads: (1, 10, 512) → (B, h, T, d_k) = (1, 8, 10, 64)",
        "head 8\nsoftmax(Q8K8ᵀ/√64) V8\nfeatures 448…511\nout (1, 10, 64)",
        "…\nheads 3 to 7",
        "Concat: 8 × 64 = 512 features\n(1, 10, 512)",
        "$W^O$: Linear(512, 512)",
        "$W^Q$: Linear(512, 512)\nQ (1, 10, 512)",
        "input x (1, 10, 512)",
        "output (1, 10, 512)",
        "attention weights (1, 8, 10, 10)",
        "= 1,050,624, whatever h is",
    ):
        assert label in shown, label
    assert "head 3\n" not in shown, "with more than four heads only heads 1, 2 and h are drawn"


def test_multi_head_flow_draws_every_head_of_a_small_module():
    fig = pictures.multi_head_flow(MultiHeadAttention(12, 3, dropout=0.0, bias=False), seq_len=5)
    render(fig)
    shown = joined(fig)
    for head, features in ((1, "0…3"), (2, "4…7"), (3, "8…11")):
        assert f"head {head}\nsoftmax(Q{head}K{head}ᵀ/√4) V{head}\nfeatures {features}\nout (1, 5, 4)" in shown
    assert "parameters 4·d_model²\n= 576, whatever h is" in shown, "no biases: 4 d_model^2"


def test_multi_head_flow_rejects_other_modules():
    with pytest.raises(TypeError, match="MultiHeadAttention"):
        pictures.multi_head_flow(torch.nn.MultiheadAttention(8, 2))
    with pytest.raises(ValueError, match="seq_len"):
        pictures.multi_head_flow(MultiHeadAttention(8, 2), seq_len=0)
