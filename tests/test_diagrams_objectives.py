"""Chapter 10's picture (course_utils.diagrams.objectives): it renders, carries its labels, and shows the
real masks of a causal and a bidirectional TransformerLM and a real BERT corruption."""

from __future__ import annotations

import io

import pytest
import torch
from matplotlib.colors import to_rgb

from course_utils.data import LM_WORDS, PAD_ID, WordTokenizer, mask_tokens
from course_utils.diagrams import objectives
from course_utils.diagrams.draw import COLORS, texts
from course_utils.models import TransformerLM

SENTENCE = "<bos> the dog that the cats chase sleeps . <eos>".split()


def models_and_tokens():
    tokenizer = WordTokenizer(LM_WORDS)
    config = dict(
        vocab_size=tokenizer.vocab_size,
        d_model=16,
        num_heads=2,
        num_layers=1,
        d_ff=32,
        max_len=16,
        dropout=0.0,
        pad_id=PAD_ID,
    )
    tokens = torch.tensor([[tokenizer.stoi[w] for w in SENTENCE]])
    return tokenizer, TransformerLM(**config, causal=True), TransformerLM(**config, causal=False), tokens


def test_gpt_vs_bert_shows_masks_and_targets_of_the_real_models():
    tokenizer, gpt, bert, tokens = models_and_tokens()
    inputs, labels = mask_tokens(
        tokens,
        tokenizer,
        prob=1.0,
        rng=torch.Generator().manual_seed(0),
        mask_replace_prob=1.0,
        random_replace_prob=0.0,
    )
    masked = [tokenizer.itos[i] for i in inputs[0]]
    targets = [tokenizer.itos[i] if i != -100 else None for i in labels[0].tolist()]
    fig = objectives.gpt_vs_bert(SENTENCE, gpt.attention_mask(tokens), bert.attention_mask(tokens), masked, targets)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    assert buffer.getvalue()[:4] == b"\x89PNG"
    shown = "\n".join(texts(fig))
    for label in (
        "GPT: causal language model",
        "BERT: masked language model",
        "input",
        "target",
        "no loss",
        "9 of 10 positions give a loss",
        "8 of 10 positions give a loss",
        "<mask>",
    ):
        assert label in shown, f"the picture should show {label!r}"
    # The causal panel colours exactly the upper triangle (45 cells of a 10 x 10 mask) as masked.
    vermillion = to_rgb(COLORS["mask"])
    masked_cells = [p for p in fig.axes[0].patches if tuple(p.get_facecolor()[:3]) == vermillion]
    assert len(masked_cells) == 45, "only the causal model hides anything: its 45 future cells"


def test_gpt_vs_bert_rejects_inconsistent_input():
    tokenizer, gpt, bert, tokens = models_and_tokens()
    full = bert.attention_mask(tokens)
    with pytest.raises(ValueError, match="not lower-triangular"):
        objectives.gpt_vs_bert(SENTENCE, full, full, SENTENCE, [None] * len(SENTENCE))
    with pytest.raises(ValueError, match="must have 10 entries"):
        objectives.gpt_vs_bert(SENTENCE, gpt.attention_mask(tokens), full, SENTENCE[:-1], [None] * 9)
    with pytest.raises(ValueError, match="at least two tokens"):
        objectives.gpt_vs_bert(SENTENCE[:1], torch.ones(1, 1, dtype=torch.bool), torch.ones(1, 1), ["<bos>"], [None])
