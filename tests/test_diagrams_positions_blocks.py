"""The diagrams of chapters 04-06 (course_utils.diagrams.positions and .blocks) and the model option
they rely on (``scale_embeddings``): each figure renders to PNG and shows the labels it promises;
pictures drawn from real objects show the real numbers."""

from __future__ import annotations

import io
import math
import re

import pytest
import torch
from matplotlib.figure import Figure

from course_utils.attention import MultiHeadAttention, causal_mask
from course_utils.diagrams import blocks, positions
from course_utils.diagrams.draw import texts
from course_utils.models import DecoderOnlyLM, TransformerLM


def render(fig: Figure) -> bytes:
    """PNG bytes of the figure at the notebook's resolution; fails if drawing fails."""
    assert isinstance(fig, Figure)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    data = buffer.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, "the figure should render to a real PNG"
    return data


def joined(fig: Figure) -> str:
    return "\n".join(texts(fig))


# --------------------------------------------------------------------------------------------
# Chapter 04: positions
# --------------------------------------------------------------------------------------------


def test_wavelength_of_the_last_pair_is_about_47100_for_d64():
    last = positions.wavelength(31, 64)
    assert last == pytest.approx(2 * math.pi * 10000 ** (62 / 64))
    assert 47_000 < last < 47_200, "not 2*pi*10000 = 62,832: the exponent 2i/d stops at (d-2)/d"
    assert positions.wavelength(0, 64) == pytest.approx(2 * math.pi)


def test_sinusoidal_frequencies_renders_with_real_wavelengths():
    fig = positions.sinusoidal_frequencies(d_model=64, length=64, position=20, pairs=(0, 31))
    render(fig)
    shown = joined(fig)
    assert "wavelength 6.3" in shown and "wavelength 47,117" in shown
    assert "pos = 20" in shown and "PE[20]" in shown
    assert "different dimensions, different frequencies" in shown
    assert "position pos (token index)" in shown


def test_sinusoidal_frequencies_rejects_bad_arguments():
    with pytest.raises(ValueError, match="position=70"):
        positions.sinusoidal_frequencies(length=64, position=70)
    with pytest.raises(ValueError, match="pairs"):
        positions.sinusoidal_frequencies(d_model=16, pairs=(0, 8))


def _angles_and_scores(fig: Figure) -> list[tuple[float, float]]:
    found = re.findall(r"angle from k to q: ([+-][\d.]+)°\nscore <R_m q, R_n k> = ([+-][\d.]+)", joined(fig))
    return [(float(a), float(s)) for a, s in found]


def test_rope_rotation_angle_depends_on_the_offset_only():
    generator = torch.Generator().manual_seed(3)
    query, key = torch.randn(16, generator=generator), torch.randn(16, generator=generator)
    fig = positions.rope_rotation(query, key, position_pairs=((3, 0), (9, 6), (9, 2)))
    render(fig)
    (a1, s1), (a2, s2), (a3, s3) = _angles_and_scores(fig)
    assert (a1, s1) == (a2, s2), "equal offsets must show equal angles and scores"
    assert abs(a3 - a1) > 1 and s3 != s1, "a different offset must show a different angle"
    shown = joined(fig)
    assert "q at m = 9" in shown and "k at n = 6" in shown and "offset m − n = 7" in shown


def test_rope_rotation_rejects_mismatched_vectors():
    with pytest.raises(ValueError, match="equal, even-length"):
        positions.rope_rotation(torch.randn(8), torch.randn(6))


def test_positional_comparison_with_and_without_measurements():
    empty = positions.positional_comparison()
    render(empty)
    assert "measured in Section 5" in joined(empty)
    for label in (
        "Sinusoidal (2017)",
        "Learned (BERT, GPT-2)",
        "RoPE (LLaMA, Qwen)",
        "rotates q and k",
        "max_len × d_model",
        "relative: score is a\nfunction of m − n",
    ):
        assert label in joined(empty), label
    measured = {name: {"seen": 1.0, "near": 0.27, "far": 0.21} for name in ("sinusoidal", "learned", "rope")}
    measured["rope"]["near"] = 0.7
    fig = positions.positional_comparison(measured, train_len=16)
    render(fig)
    assert "0.70 just past, 0.21 far past" in joined(fig) and "measured past 16 training tokens:" in joined(fig)


# --------------------------------------------------------------------------------------------
# Chapters 05-06: blocks
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("highlight", [None, "encoder", "decoder", "cross"])
def test_encoder_decoder_renders_both_stacks_and_cross_attention(highlight):
    fig = blocks.encoder_decoder(highlight=highlight)
    render(fig)
    shown = joined(fig)
    for label in (
        "multi-head self-attention",
        "masked multi-head\nself-attention",
        "cross-attention\n(Q: decoder, K, V: encoder)",
        "feed-forward",
        "add & norm",
        "N ×",
        "Encoder (Chapter 05)",
        "Decoder (Chapter 06)",
        "linear + softmax",
    ):
        assert label in shown, label
    assert "memory (B, S_src, d_model)" in shown


def test_encoder_decoder_rejects_an_unknown_highlight():
    with pytest.raises(ValueError, match="highlight"):
        blocks.encoder_decoder(highlight="attention")


def test_norm_placement_shows_both_arrangements():
    fig = blocks.norm_placement()
    render(fig)
    shown = joined(fig)
    assert "post-norm (2017): x ← LN(x + F(x))" in shown and "pre-norm (GPT-2 on): x ← x + F(LN(x))" in shown
    assert shown.count("on the residual path") == 2 and "final LN" in shown


def test_causal_mask_diagram_is_drawn_from_the_real_mask_and_weights():
    length = 5
    mask = causal_mask(length)
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2, dropout=0.0).eval()
    x = torch.randn(1, length, 8)
    with torch.no_grad():
        _, weights = attention(x, x, x, mask)
    fig = blocks.causal_mask_diagram(mask, weights[0, 0])
    render(fig)
    shown = texts(fig)
    assert shown.count("−∞") == length * (length - 1) // 2, "one -inf per masked (upper-triangle) cell"
    assert f"{weights[0, 0, 1, 0].item():.2f}" in shown, "the real softmax weights are written in the cells"
    assert "Causal mask, T = 5: the upper triangle is masked" in shown
    assert "key position j" in shown and "query position i" in shown


def test_causal_mask_diagram_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="same \\(T, T\\) shape"):
        blocks.causal_mask_diagram(causal_mask(4), torch.rand(4, 5))


def test_cross_attention_diagram_shows_target_by_source_shapes():
    weights = torch.rand(5, 9)
    fig = blocks.cross_attention_diagram(weights, d_k=8, source_is_real=torch.arange(9) < 6)
    render(fig)
    shown = joined(fig)
    assert "(5, 9) = T_tgt × S_src" in shown
    assert "(T_tgt = 5, d_k = 8)" in shown and "(S_src = 9, d_v)" in shown and "(d_k, S_src = 9)" in shown
    assert "queries from the decoder, keys and values from the encoder" in shown
    assert "vermillion: padded source positions, masked" in shown


def test_cross_attention_diagram_rejects_bad_input():
    with pytest.raises(ValueError, match="one head's"):
        blocks.cross_attention_diagram(torch.rand(2, 5, 9), d_k=8)
    with pytest.raises(ValueError, match="source_is_real"):
        blocks.cross_attention_diagram(torch.rand(5, 9), d_k=8, source_is_real=torch.ones(8, dtype=torch.bool))


# --------------------------------------------------------------------------------------------
# The model option chapter 04 uses: scale_embeddings (the paper's sqrt(d_model), section 3.4)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["sinusoidal", "learned", "rope"])
def test_scale_embeddings_multiplies_token_vectors_by_sqrt_d_model(position):
    torch.manual_seed(0)
    tokens = torch.randint(0, 20, (2, 7))
    for scale in (False, True):
        model = DecoderOnlyLM(
            20, d_model=16, num_heads=2, num_layers=1, max_len=8, dropout=0.0, position=position, scale_embeddings=scale
        ).eval()
        seen = {}
        first_layer = model.layers[0]
        handle = first_layer.register_forward_pre_hook(lambda module, args, seen=seen: seen.setdefault("x", args[0]))
        with torch.no_grad():
            model(tokens)
        handle.remove()
        expected = model.token_embedding(tokens) * (math.sqrt(16) if scale else 1.0)
        if model.positions is not None:
            expected = model.positions(expected)
        assert torch.allclose(seen["x"], expected, atol=1e-6)
        assert model.lm_head.weight is model.token_embedding.weight, "the output layer stays tied"


def test_scale_embeddings_is_off_by_default_and_changes_nothing_then():
    torch.manual_seed(0)
    default = TransformerLM(20, d_model=16, num_heads=2, num_layers=1, max_len=8, dropout=0.0)
    assert default.embedding_scale == 1.0
    torch.manual_seed(0)
    explicit = TransformerLM(20, d_model=16, num_heads=2, num_layers=1, max_len=8, dropout=0.0, scale_embeddings=False)
    tokens = torch.randint(0, 20, (2, 5))
    assert torch.equal(default.eval()(tokens), explicit.eval()(tokens))
