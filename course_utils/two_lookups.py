"""Chapter 03's experiment: a task that needs two different attention patterns at every position.

The input is a random sequence of symbols. At every position ``i >= 1`` a model must output two
symbols: the **previous token** ``x[i-1]`` (a relative pattern) and the **first token** ``x[0]`` (an
absolute one). The model is as small as it can be (:class:`TwoLookups`): token embeddings plus
learned position embeddings, one :class:`~course_utils.attention.MultiHeadAttention`, two linear
read-outs, no feed-forward layer, so that everything the read-outs see has passed through attention.

:func:`train_and_measure` trains one such model and measures what chapter 03 asks: the accuracy of
each read-out, and how much attention weight each head puts on the previous token and on token 0.

    train_set, test_set = lookup_task(64 * 200, seed=1), lookup_task(1000, seed=2)
    result = train_and_measure(num_heads=2, init_seed=0, train_set=train_set, test_set=test_set)
    result.worse_accuracy, result.mass_previous, result.mass_first, result.specialised()
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import env
from .attention import MultiHeadAttention
from .positional import LearnedPositionalEncoding
from .training import train

__all__ = ["IGNORE", "lookup_task", "TwoLookups", "lookup_loss", "LookupResult", "train_and_measure"]

IGNORE = -100  # target of position 0, which has no previous token (cross_entropy's ignore_index)


def lookup_task(
    num_sequences: int, seed: int, symbols: int = 30, length: int = 12
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(tokens, previous, first)``, each ``(num_sequences, length)``: random tokens and the two targets.

    ``previous[:, i] = tokens[:, i - 1]`` and ``first[:, i] = tokens[:, 0]`` for ``i >= 1``; position 0
    has target :data:`IGNORE`. ``seed`` goes through :func:`course_utils.env.generator`, so
    ``$COURSE_SEED`` moves it.
    """
    if num_sequences < 1 or length < 3 or symbols < 2:
        raise ValueError(
            f"need num_sequences >= 1, length >= 3 and symbols >= 2, got {num_sequences}, {length}, {symbols}"
        )
    tokens = torch.randint(0, symbols, (num_sequences, length), generator=env.generator(seed))  # (N, T)
    previous = torch.full_like(tokens, IGNORE)
    previous[:, 1:] = tokens[:, :-1]
    first = torch.full_like(tokens, IGNORE)
    first[:, 1:] = tokens[:, :1]
    return tokens, previous, first


class TwoLookups(nn.Module):
    """Embeddings -> one multi-head attention -> two linear read-outs (previous token, first token).

    ``forward(tokens (B, T)) -> (logits_previous, logits_first)``, each ``(B, T, symbols)``; the last
    attention weights ``(B, H, T, T)`` are kept in ``last_weights``.
    """

    def __init__(self, num_heads: int, width: int = 32, symbols: int = 30, length: int = 12):
        super().__init__()
        self.embed = nn.Embedding(symbols, width)
        self.positions = LearnedPositionalEncoding(width, length, dropout=0.0)
        self.attention = MultiHeadAttention(width, num_heads, dropout=0.0)
        self.read_previous = nn.Linear(width, symbols)
        self.read_first = nn.Linear(width, symbols)
        self.last_weights: torch.Tensor | None = None

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.positions(self.embed(tokens))  # (B, T, width)
        mixed, weights = self.attention(h, h, h)  # (B, T, width), (B, H, T, T)
        self.last_weights = weights.detach()
        return self.read_previous(mixed), self.read_first(mixed)


def lookup_loss(model: TwoLookups, batch) -> torch.Tensor:
    """The sum of the two read-outs' cross-entropies (position 0 ignored)."""
    tokens, previous, first = batch
    logits_previous, logits_first = model(tokens)
    return F.cross_entropy(logits_previous.flatten(0, 1), previous.flatten(), ignore_index=IGNORE) + F.cross_entropy(
        logits_first.flatten(0, 1), first.flatten(), ignore_index=IGNORE
    )


@dataclass
class LookupResult:
    """What one trained :class:`TwoLookups` does on the test set (queries at positions >= 2, where
    "previous" and "first" are different positions)."""

    num_heads: int
    init_seed: int
    parameters: int
    acc_previous: float  # fraction of previous-token read-outs that are right
    acc_first: float  # fraction of first-token read-outs that are right
    mass_previous: torch.Tensor  # (H,) mean attention weight each head puts on key i - 1
    mass_first: torch.Tensor  # (H,) mean attention weight each head puts on key 0
    weights: torch.Tensor  # (H, T, T) attention weights averaged over the test sequences
    model: TwoLookups

    @property
    def worse_accuracy(self) -> float:
        """The accuracy of the harder of the two lookups for this model."""
        return min(self.acc_previous, self.acc_first)

    def specialised(self, threshold: float = 0.8) -> bool:
        """True when two *different* heads each put more than ``threshold`` of their weight on one job."""
        previous_head, first_head = int(self.mass_previous.argmax()), int(self.mass_first.argmax())
        return (
            previous_head != first_head
            and float(self.mass_previous[previous_head]) > threshold
            and float(self.mass_first[first_head]) > threshold
        )


def train_and_measure(
    num_heads: int,
    init_seed: int,
    train_set,
    test_set,
    width: int = 32,
    steps: int = 200,
    batch_size: int = 64,
    lr: float = 1e-2,
    symbols: int = 30,
    progress: bool = False,
) -> LookupResult:
    """Train a :class:`TwoLookups` with Adam on ``steps`` batches of ``train_set`` (from
    :func:`lookup_task`) and measure it on ``test_set``.

    The initial weights come from ``env.seed_everything(init_seed)``, so two models with the same
    ``init_seed`` and different ``num_heads`` see the same batches in the same order.
    """
    tokens, previous, first = train_set
    if steps * batch_size > tokens.shape[0]:
        raise ValueError(
            f"{steps} steps of {batch_size} need {steps * batch_size} training sequences, "
            f"train_set has {tokens.shape[0]}"
        )
    if int(tokens.max()) >= symbols:
        raise ValueError(f"train_set uses symbol {int(tokens.max())}, but the model has only {symbols} symbols")
    length = tokens.shape[1]
    batches = [
        (tokens[i : i + batch_size], previous[i : i + batch_size], first[i : i + batch_size])
        for i in range(0, steps * batch_size, batch_size)
    ]
    env.seed_everything(init_seed)
    model = TwoLookups(num_heads, width=width, symbols=symbols, length=length)
    train(model, lookup_loss, batches, torch.optim.Adam(model.parameters(), lr=lr), steps=steps, progress=progress)
    model.eval()
    test_tokens, test_previous, test_first = test_set
    with torch.no_grad():
        logits_previous, logits_first = model(test_tokens)
    queries = torch.arange(2, length)  # from position 2 on, "previous" != "first"
    weights = model.last_weights.mean(0)  # (H, T, T), averaged over the test sequences
    return LookupResult(
        num_heads=num_heads,
        init_seed=init_seed,
        parameters=sum(p.numel() for p in model.parameters()),
        acc_previous=(logits_previous.argmax(-1) == test_previous)[:, 2:].float().mean().item(),
        acc_first=(logits_first.argmax(-1) == test_first)[:, 2:].float().mean().item(),
        mass_previous=weights[:, queries, queries - 1].mean(-1),
        mass_first=weights[:, queries, 0].mean(-1),
        weights=weights,
        model=model,
    )
