r"""FlashAttention (forward pass) from scratch, in plain PyTorch.

Why
---
Standard attention computes ``S = Q K^T`` (an ``n x n`` matrix), then ``P = softmax(S)``, then
``O = P V``. Its memory grows as ``n^2``: at ``n = 32768`` tokens and 16 heads the score matrix
alone is 34 GB in bf16. FlashAttention (Dao et al., 2022; FlashAttention-2, Dao 2023) computes
*exactly the same* ``O`` without ever holding ``S`` or ``P``: it walks over ``K`` and ``V`` in blocks
and keeps, for each query, only three running quantities. Memory becomes linear in ``n``; the
arithmetic is the same ``O(n^2 d)``. On a GPU the blocks live in on-chip SRAM, which is why it is
also faster there: the ``n x n`` matrix never travels to and from HBM.

The online softmax
------------------
For one query with scores ``s_1 .. s_n`` (already multiplied by the softmax scale) and values
``v_1 .. v_n``, the output is

.. math::

    o = \frac{\sum_j e^{s_j - m} v_j}{\sum_j e^{s_j - m}}, \qquad m = \max_j s_j ,

where subtracting the maximum ``m`` changes nothing mathematically and keeps ``exp`` from
overflowing. The trick is that ``m``, the denominator ``l`` and the numerator ``acc`` can be built
one block of keys at a time. After blocks ``1..t`` we hold

.. math::

    m_t = \max_{j \le t\text{-th block}} s_j, \qquad
    l_t = \sum_{j} e^{s_j - m_t}, \qquad
    \mathrm{acc}_t = \sum_{j} e^{s_j - m_t} v_j .

A new block ``B`` with scores ``s_B`` arrives:

.. math::

    m_{t+1} = \max(m_t, \max s_B), \qquad \alpha = e^{m_t - m_{t+1}} \;(\le 1),

    l_{t+1} = \alpha\, l_t + \sum_{j \in B} e^{s_j - m_{t+1}}, \qquad
    \mathrm{acc}_{t+1} = \alpha\, \mathrm{acc}_t + \sum_{j \in B} e^{s_j - m_{t+1}} v_j .

The factor ``alpha`` *rescales* what was accumulated under the old maximum to the new one. At the
end ``o = acc / l`` and the log-sum-exp of the scores is ``m + log l`` (the backward pass of
FlashAttention stores only this, one number per query, instead of the whole ``P``).

Tiling
------
Queries are split into blocks of ``block_q`` rows, keys and values into blocks of ``block_k`` rows.
For each query block we loop over the key blocks and apply the update above to all its rows at
once. The largest temporary is one ``(block_q, block_k)`` tile of scores per batch and head, so the
memory is ``O(n d)`` for the output plus a constant, never ``O(n^2)``. (On a GPU every query block
runs in parallel on its own streaming multiprocessor: see :mod:`course_utils.flash_triton`.)

With a causal mask, query ``i`` sees keys ``j <= i``. Key blocks that start after the last query of
the current query block are skipped entirely (about half the work), and only the tiles that cross
the diagonal need the mask itself.

This module is the readable reference. It is written for clarity, not speed: a Python loop over
tiles cannot beat the fused kernels behind ``F.scaled_dot_product_attention``; chapter 12 measures
by how much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .attention import check_qkv

__all__ = ["flash_attention", "Tile", "online_softmax_steps", "OnlineSoftmaxStep"]


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, block_q: int, block_k: int) -> None:
    check_qkv(q, k, v)
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        raise ValueError(
            "q, k, v must share their leading (batch, head) dims; got "
            f"{tuple(q.shape[:-2])}, {tuple(k.shape[:-2])}, {tuple(v.shape[:-2])}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must have one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.is_floating_point():
        raise ValueError(f"attention needs floating-point tensors; got {q.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"causal=True needs as many queries as keys (self-attention); got T_q={q.shape[-2]}, "
            f"T_k={k.shape[-2]}. Decoding with a KV cache attends one new query to all cached keys "
            "without a mask."
        )
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be positive; got block_q={block_q}, block_k={block_k}")


class Tile(NamedTuple):
    """One ``(query block, key block)`` tile of scores that :func:`flash_attention` computed."""

    q_start: int  # queries [q_start, q_stop)
    q_stop: int
    k_start: int  # keys [k_start, k_stop)
    k_stop: int
    masked: bool  # True when the tile crosses the causal diagonal and needed the mask


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = 128,
    block_k: int = 128,
    return_lse: bool = False,
    tiles: list | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Exact attention ``softmax(scale * Q K^T [+ causal mask]) V`` without the ``n x n`` matrix.

    Args:
        q: queries ``(..., T_q, d)``
        k: keys ``(..., T_k, d)``
        v: values ``(..., T_k, d_v)``
        causal: query ``i`` sees only keys ``j <= i`` (needs ``T_q == T_k``).
        scale: softmax scale; default ``1 / sqrt(d)``.
        block_q, block_k: tile sizes. Any lengths work, including ones that are not multiples.
        return_lse: also return the log-sum-exp of each query's scaled scores ``(..., T_q)``, float32.
        tiles: optional list; every tile the loop computes is appended to it as a :class:`Tile`, in
            the order computed (tiles that the causal mask skips never appear).

    Returns:
        ``out`` ``(..., T_q, d_v)`` in the input dtype, or ``(out, lse)``.

    Scores and the running statistics are kept in float32 even for bf16/fp16 inputs (as the real
    kernels do); the two matrix products run in the input dtype.

    Example:
        >>> q, k, v = torch.randn(3, 2, 4, 10, 8).unbind(0)    # (B=2, H=4, T=10, d=8) each
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> torch.allclose(flash_attention(q, k, v, causal=True, block_q=4, block_k=3), ref, atol=1e-5)
        True
    """
    _check_inputs(q, k, v, causal, block_q, block_k)
    if tiles is not None and not isinstance(tiles, list):
        raise TypeError(f"tiles must be a list to append the computed tiles to, got {type(tiles).__name__}")
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    batch_shape = q.shape[:-2]  # e.g. (B, H)

    out = torch.empty(*batch_shape, n_queries, v.shape[-1], dtype=q.dtype, device=q.device)  # (..., T_q, d_v)
    lse = torch.empty(*batch_shape, n_queries, dtype=torch.float32, device=q.device)  # (..., T_q)

    for q_start in range(0, n_queries, block_q):
        q_stop = min(q_start + block_q, n_queries)
        q_tile = q[..., q_start:q_stop, :]  # (..., bq, d)
        rows = q_stop - q_start

        # The three running quantities of the online softmax, one per query row of this tile.
        m = torch.full((*batch_shape, rows), -math.inf, dtype=torch.float32, device=q.device)  # (..., bq)
        l = torch.zeros((*batch_shape, rows), dtype=torch.float32, device=q.device)  # (..., bq)
        acc = torch.zeros((*batch_shape, rows, v.shape[-1]), dtype=torch.float32, device=q.device)  # (..., bq, d_v)

        # Under a causal mask no query of this tile looks past key q_stop - 1: later blocks are skipped.
        keys_end = q_stop if causal else n_keys
        for k_start in range(0, keys_end, block_k):
            k_stop = min(k_start + block_k, keys_end)
            k_tile = k[..., k_start:k_stop, :]  # (..., bk, d)
            v_tile = v[..., k_start:k_stop, :]  # (..., bk, d_v)

            scores = (q_tile @ k_tile.transpose(-2, -1)).float() * scale  # (..., bq, bk)
            crosses_diagonal = causal and k_stop - 1 > q_start
            if crosses_diagonal:
                # This tile crosses the diagonal: hide key j from query i when j > i.
                query_pos = torch.arange(q_start, q_stop, device=q.device)[:, None]  # (bq, 1)
                key_pos = torch.arange(k_start, k_stop, device=q.device)[None, :]  # (1, bk)
                scores = scores.masked_fill(key_pos > query_pos, -math.inf)
            if tiles is not None:
                tiles.append(Tile(q_start, q_stop, k_start, k_stop, crosses_diagonal))

            m_new = torch.maximum(m, scores.amax(dim=-1))  # (..., bq)
            # A row can have seen only masked keys so far (m_new = -inf); exp(-inf - -inf) would be
            # NaN, so such rows subtract 0 instead and all their exponentials stay exactly 0.
            m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            alpha = torch.exp(m - m_safe)  # (..., bq) rescales the old sums to the new maximum
            p = torch.exp(scores - m_safe[..., None])  # (..., bq, bk) unnormalised probabilities
            l = alpha * l + p.sum(dim=-1)
            acc = alpha[..., None] * acc + (p.to(v.dtype) @ v_tile).float()
            m = m_new

        out[..., q_start:q_stop, :] = (acc / l[..., None]).to(out.dtype)
        lse[..., q_start:q_stop] = m + torch.log(l)

    return (out, lse) if return_lse else out


# --------------------------------------------------------------------------------------------
# The algorithm on one query, step by step (for printing in a notebook)
# --------------------------------------------------------------------------------------------


@dataclass
class OnlineSoftmaxStep:
    """The state of the online softmax after one block of keys (one query)."""

    block: int  # index of the key block just consumed
    keys: tuple[int, int]  # [start, stop) of that block
    block_max: float  # the largest score inside the block
    m: float  # running maximum after the block
    alpha: float  # exp(m_old - m): how much the earlier sums shrank
    l: float  # running denominator  sum_j exp(s_j - m)
    acc: torch.Tensor | None  # running numerator  sum_j exp(s_j - m) v_j   (d_v,)  if values were given
    output: torch.Tensor | None  # acc / l: the attention output if the keys stopped here


def online_softmax_steps(
    scores: torch.Tensor, block_size: int, values: torch.Tensor | None = None
) -> list[OnlineSoftmaxStep]:
    r"""Run the online softmax over one query's scores, block by block, and return every state.

    Args:
        scores: ``(T_k,)`` scaled scores of one query.
        block_size: keys per block.
        values: optional ``(T_k, d_v)`` values; then each step also carries the running numerator
            and the output ``acc / l``.

    After the last step ``m == scores.max()``, ``l == exp(scores - m).sum()`` and, with values,
    ``output == softmax(scores) @ values``.

    Example:
        >>> steps = online_softmax_steps(torch.tensor([1.0, 3.0, 2.0, 5.0]), block_size=2)
        >>> [(s.m, round(s.l, 4)) for s in steps]
        [(3.0, 1.1353), (5.0, 1.2034)]
    """
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D (the scores of one query); got shape {tuple(scores.shape)}")
    if scores.numel() == 0:
        raise ValueError("scores is empty: a query needs at least one key")
    if block_size < 1:
        raise ValueError(f"block_size must be positive; got {block_size}")
    if values is not None and (values.dim() != 2 or values.shape[0] != scores.shape[0]):
        raise ValueError(f"values must be (T_k, d_v) with T_k = {scores.shape[0]}; got shape {tuple(values.shape)}")

    scores = scores.double()  # the teaching helper favours exact printed numbers over speed
    m, l = -math.inf, 0.0
    acc = torch.zeros(values.shape[1], dtype=torch.float64, device=scores.device) if values is not None else None
    steps = []
    for block, start in enumerate(range(0, scores.shape[0], block_size)):
        stop = min(start + block_size, scores.shape[0])
        block_scores = scores[start:stop]
        block_max = block_scores.max().item()
        m_new = max(m, block_max)
        if m_new == -math.inf:  # every score so far is masked: nothing to add yet
            alpha, p = 0.0, torch.zeros_like(block_scores)
        else:
            alpha = math.exp(m - m_new)  # exp(-inf) = 0 on the first block
            p = torch.exp(block_scores - m_new)  # (block,)
        l = alpha * l + p.sum().item()
        output = None
        if acc is not None:
            acc = alpha * acc + p @ values[start:stop].double()
            output = acc / l
        m = m_new
        steps.append(
            OnlineSoftmaxStep(
                block, (start, stop), block_max, m, alpha, l, None if acc is None else acc.clone(), output
            )
        )
    return steps
