"""Tests for course_utils.diagrams.architecture: each picture renders, carries its labels, and shows
what the real objects are (sizes read from a model, LayerNorm placement read from a layer's calls)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from course_utils.diagrams import architecture, draw
from course_utils.layers import EncoderLayer
from course_utils.models import PRESETS, Seq2SeqTransformer

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _render(fig: Figure) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)
    assert buffer.getvalue()[:4] == b"\x89PNG", "the figure must render to PNG"


def _joined(fig: Figure) -> str:
    return "\n".join(draw.texts(fig))


def test_complete_transformer_shows_the_paper_sizes_and_every_part():
    fig = architecture.complete_transformer()
    _render(fig)
    text = _joined(fig)
    for part in (
        "Input embedding",
        "Output embedding",
        "Multi-head self-attention",
        "Masked multi-head self-attention",
        "Multi-head cross-attention",
        "Feed-forward",
        "Add & Norm",
        "Softmax",
        "Output probabilities",
        "positional",
        "memory",
        "shifted right",
    ):
        assert part in text, f"the architecture picture should show {part!r}"
    for size in (
        "d_model = 512",
        "heads h = 8",
        "d_k = d_v = 64",
        "d_ff = 2048",
        "512 -> 2048 -> 512",
        "N = 6 x",
        "37,000",
        "tied",
    ):
        assert size in text, f"the paper's size {size!r} should be labelled"
    assert text.count("Add & Norm") == 2 + 3, "two Add & Norm in the encoder layer, three in the decoder layer"


def test_complete_transformer_reads_its_sizes_from_the_model():
    big = architecture.complete_transformer(PRESETS["transformer-big"].build("meta"))
    for size in ("d_model = 1024", "heads h = 16", "1024 -> 4096 -> 1024"):
        assert size in _joined(big), f"the big model's {size!r} should be read from the model"
    small = Seq2SeqTransformer(
        40, 30, d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=3, d_ff=128, tie_output=False
    )
    text = _joined(architecture.complete_transformer(small))
    assert "N = 2 x" in text and "N = 3 x" in text, "encoder and decoder depths come from the model"
    assert "Linear 64 -> 30" in text and "tied" not in text, "an untied output layer is not labelled as tied"
    with pytest.raises(ValueError, match="pre-norm"):
        architecture.complete_transformer(
            Seq2SeqTransformer(
                10, 10, d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=1, norm_first=True
            )
        )


def test_module_call_order_follows_the_code():
    post, pre = EncoderLayer(16, 2, 32, norm_first=False), EncoderLayer(16, 2, 32, norm_first=True)
    assert architecture.module_call_order(post) == ["attention", "norm", "ffn", "norm"]
    assert architecture.module_call_order(pre) == ["norm", "attention", "norm", "ffn"]


def test_post_norm_vs_pre_norm_puts_the_layernorm_where_the_layer_calls_it():
    fig = architecture.post_norm_vs_pre_norm()
    _render(fig)
    text = draw.texts(fig)
    joined = "\n".join(text)
    for part in (
        "Post-norm",
        "Pre-norm",
        "Vaswani et al. 2017",
        "GPT-2",
        "residual path",
        "final LayerNorm",
        "Multi-head\nself-attention",
        "Feed-forward",
    ):
        assert part in joined, f"the picture should show {part!r}"
    assert text.count("LayerNorm") == 4, "two LayerNorms per layer, in each of the two layers"
    assert text.count("on the\nresidual path") == 2, (
        "post-norm's two LayerNorms sit on the residual path, pre-norm's none"
    )
    # Both layers pre-norm: nothing is drawn on the residual path.
    both_pre = architecture.post_norm_vs_pre_norm(
        EncoderLayer(16, 2, 32, norm_first=True), EncoderLayer(16, 2, 32, norm_first=True)
    )
    assert draw.texts(both_pre).count("on the\nresidual path") == 0, "the layout must follow the layer's calls"


def test_layout_rule():
    assert architecture._layout(["attention", "norm", "ffn", "norm"]) == [
        ("attention", False),
        ("norm", True),
        ("ffn", False),
        ("norm", True),
    ]
    assert architecture._layout(["norm", "attention", "norm", "ffn"]) == [
        ("norm", False),
        ("attention", False),
        ("norm", False),
        ("ffn", False),
    ]


def test_course_map_joins_exercises_and_items_to_chapters():
    chapters = architecture.chapter_titles(NOTEBOOKS)
    assert chapters["07"].startswith("The complete Transformer") and len(chapters) >= 13
    assert all("(" not in title for title in chapters.values()), "only the English part of each title"
    exercises = {"ex1_manual_attention": ["02"], "ex2_transformer": ["05", "06", "07"]}
    items = {"2.7 pre- vs post-norm (Q3)": ["08"]}
    fig = architecture.course_map(chapters, exercises, items)
    _render(fig)
    text = _joined(fig)
    for name in (
        "ex1_manual_attention",
        "ex2_transformer",
        "2.7 pre- vs post-norm (Q3)",
        "07 The complete Transformer",
        "graded exercises",
        "self-check",
    ):
        assert name in text
    lines = [line for line in fig.axes[0].get_lines()]
    assert len(lines) == 1 + 3 + 1, "one line per (exercise or item, chapter) pair"
    with pytest.raises(ValueError, match="99"):
        architecture.course_map(chapters, {"ex9": ["99"]}, {})


def test_chapter_titles_needs_notebooks(tmp_path):
    with pytest.raises(ValueError, match="no chapter notebooks"):
        architecture.chapter_titles(tmp_path)
