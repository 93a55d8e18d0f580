"""Toy sequence tasks for the RNN bottleneck experiment: copy and reverse, with test sets kept out of
training."""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from .tokenizers import BOS_ID, EOS_ID, NUM_SPECIAL


class SequenceTask(NamedTuple):
    """A toy sequence-to-sequence task. ``src`` ``(N, L)``; ``tgt_in`` ``(N, L + 1)`` starts with
    ``<bos>``; ``tgt_out`` ``(N, L + 1)`` ends with ``<eos>``; ``vocab_size`` counts the specials."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    vocab_size: int


def occurs_in(rows: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Which rows of ``rows`` ``(N, L)`` also occur as a row of ``reference`` ``(M, L)``: a bool ``(N,)``.

    >>> occurs_in(torch.tensor([[5, 6], [6, 5], [5, 6]]), torch.tensor([[5, 6], [7, 7]])).tolist()
    [True, False, True]
    """
    if rows.dim() != 2 or reference.dim() != 2:
        raise ValueError(
            f"occurs_in compares rows of 2-D tensors, got shapes {tuple(rows.shape)} and {tuple(reference.shape)}"
        )
    if rows.shape[1] != reference.shape[1]:
        raise ValueError(f"rows of length {rows.shape[1]} cannot occur among rows of length {reference.shape[1]}")
    seen = set(map(tuple, reference.tolist()))
    return torch.tensor([tuple(row) in seen for row in rows.tolist()], dtype=torch.bool).reshape(len(rows))


def _excluded_rows(exclude, length: int) -> torch.Tensor | None:
    if exclude is None:
        return None
    rows = exclude.src if isinstance(exclude, SequenceTask) else exclude
    if not isinstance(rows, torch.Tensor) or rows.dim() != 2:
        raise ValueError(
            "exclude must be a SequenceTask or a (M, length) tensor of source sequences, got "
            f"{getattr(rows, 'shape', type(rows).__name__)}"
        )
    if rows.shape[1] != length:
        raise ValueError(f"exclude holds sequences of length {rows.shape[1]}, the task draws length {length}")
    return rows


def _symbol_task(
    n: int, length: int, vocab: int, seed: int, transform: Callable[[torch.Tensor], torch.Tensor], exclude=None
) -> SequenceTask:
    if n < 1 or length < 1 or vocab < 1:
        raise ValueError(f"n, length and vocab must be positive, got n={n}, length={length}, vocab={vocab}")
    excluded = _excluded_rows(exclude, length)
    if excluded is not None and len(set(map(tuple, excluded.tolist()))) >= vocab**length:
        raise ValueError(
            f"exclude holds all {vocab**length} sequences of length {length} over {vocab} symbols: none is left to draw"
        )
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(NUM_SPECIAL, NUM_SPECIAL + vocab, (n, length), generator=generator)  # (N, L)
    if excluded is not None:
        # Redraw the rows that occur in `exclude` (same generator: still deterministic) until none does.
        for _ in range(1000):
            clash = occurs_in(src, excluded)  # (N,)
            if not clash.any():
                break
            src[clash] = torch.randint(
                NUM_SPECIAL, NUM_SPECIAL + vocab, (int(clash.sum()), length), generator=generator
            )
        else:
            raise ValueError(
                f"could not draw {n} sequences outside exclude after 1000 rounds: exclude holds "
                f"almost all {vocab**length} possible sequences"
            )
    target = transform(src)
    bos = torch.full((n, 1), BOS_ID, dtype=torch.long)
    eos = torch.full((n, 1), EOS_ID, dtype=torch.long)
    return SequenceTask(src, torch.cat([bos, target], 1), torch.cat([target, eos], 1), NUM_SPECIAL + vocab)


def copy_task(n: int, length: int, vocab: int = 10, seed: int = 0, exclude=None) -> SequenceTask:
    """Output = input: ``n`` random sequences of ``length`` symbols, ``vocab`` ordinary symbols (ids 5 .. 5 + vocab - 1).

    ``exclude`` (a :class:`SequenceTask` or an ``(M, length)`` tensor of sources) lists sequences that
    must not be drawn: pass the training set to get a test set of unseen sequences. Short sequences
    repeat often otherwise: 2,400 training and 500 test sequences of 4 symbols out of 10 share about
    a fifth of the test set.
    """
    return _symbol_task(n, length, vocab, seed, lambda src: src.clone(), exclude)


def reverse_task(n: int, length: int, vocab: int = 10, seed: int = 0, exclude=None) -> SequenceTask:
    """Output = input reversed: the first output symbol depends on the last input symbol.
    ``exclude`` as in :func:`copy_task`."""
    return _symbol_task(n, length, vocab, seed, lambda src: src.flip(1), exclude)
