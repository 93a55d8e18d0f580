"""Chapter 01's picture (course_utils.diagrams.recurrence): it renders, shows the labels it promises,
counts the steps right for any number of tokens, and draws real attention weights as line widths."""

from __future__ import annotations

import io

import pytest
import torch
from matplotlib.figure import Figure

from course_utils.attention import MultiHeadAttention
from course_utils.diagrams import recurrence
from course_utils.diagrams.draw import texts


def render(fig: Figure) -> bytes:
    """PNG bytes of the figure at the notebook's resolution; fails if drawing fails."""
    assert isinstance(fig, Figure)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    data = buffer.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, "the figure should render to a real PNG"
    return data


def attention_lines(fig: Figure) -> dict[str, float]:
    """gid -> line width of every input-to-output line of the attention panel."""
    return {
        line.get_gid(): line.get_linewidth()
        for line in fig.axes[0].get_lines()
        if (line.get_gid() or "").startswith("attention ")
    }


@pytest.mark.parametrize("count", [2, 4, 8])
def test_the_chain_has_one_step_per_token_and_attention_one_in_all(count):
    tokens = [f"x{i}" for i in range(1, count + 1)]
    fig = recurrence.recurrence_vs_attention(tokens)
    render(fig)
    shown = texts(fig)
    assert "RNN: one step per token" in shown and "Self-attention: one step for all tokens" in shown
    assert f"sequential steps: n = {count}" in shown and "sequential steps: 1" in shown
    assert f"work: n² = {count * count} pairs (i, j), all independent" in shown
    for t in range(1, count + 1):
        assert f"h{t}" in shown and f"y{t}" in shown and shown.count(f"x{t}") == 2, "each token in both panels"
    step = "step {}" if count <= 5 else "{}"
    labels = {step.format(t) for t in range(1, count + 1)}
    drawn = [s for s in shown if s in labels]  # in drawing order: the RNN panel first
    assert drawn == [step.format(t) for t in range(1, count + 1)] + [step.format(1)] * count, (
        "the RNN's states are steps 1 .. n in order; every attention output is computed in step 1"
    )
    assert len(attention_lines(fig)) == count * count, "one line from every input to every output"


def test_real_weights_set_the_line_widths():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 8)
    with torch.no_grad():
        _, weights = MultiHeadAttention(8, 1, dropout=0.0)(x, x, x)
    weights = weights[0, 0]  # (4, 4)
    fig = recurrence.recurrence_vs_attention(["the", "cat", "sat", "down"], weights)
    render(fig)
    widths = attention_lines(fig)
    order = sorted(widths, key=widths.get)
    expected = sorted(
        (f"attention {i}<-{j}" for i in range(4) for j in range(4)),
        key=lambda g: weights[int(g.split()[1].split("<-")[0]), int(g.split("<-")[1])].item(),
    )
    assert order == expected, "thicker lines must be larger weights"
    assert r"line width: weight $a_{ij}$ of a real attention layer" in "\n".join(texts(fig))
    assert '"the" reaches h4 only after 4 steps in a row' in "\n".join(texts(fig))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2 to 8 tokens, got 1"):
        recurrence.recurrence_vs_attention(["x"])
    with pytest.raises(ValueError, match="2 to 8 tokens, got 9"):
        recurrence.recurrence_vs_attention([str(i) for i in range(9)])
    with pytest.raises(ValueError, match=r"\(3, 3\) matrix for 3 tokens"):
        recurrence.recurrence_vs_attention(["a", "b", "c"], torch.full((4, 4), 0.25))
    with pytest.raises(ValueError, match="each row summing to 1"):
        recurrence.recurrence_vs_attention(["a", "b"], torch.ones(2, 2))
