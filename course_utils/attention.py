"""Scaled dot-product attention, masks, multi-head attention and the KV cache.

The mask convention, stated once for the whole course
------------------------------------------------------
A mask is a **boolean** tensor, ``True`` = *this query may attend to this key*. It must broadcast to
the score shape ``(..., T_q, T_k)``; for multi-head attention that is ``(B, H, T_q, T_k)``, so

- a causal mask is ``(T_q, T_k)``,
- a padding mask is ``(B, 1, 1, T_k)`` (see :func:`padding_mask`),
- a per-example mask is ``(B, 1, T_q, T_k)`` (a 3-D ``(B, T_q, T_k)`` mask is given the head axis).

This is the convention of ``F.scaled_dot_product_attention``. PyTorch's ``nn.MultiheadAttention``
uses the opposite one for its boolean masks (``True`` = *ignore*); :func:`from_torch_key_padding_mask`
and :func:`to_torch_attn_mask` are the only places where the course converts between the two.

Fully masked rows
-----------------
A query whose keys are all masked (a padded query under a padding mask, say) attends to nothing:
its weights are all zero and its output is the zero vector, with finite gradients. This matches
``F.scaled_dot_product_attention``; ``nn.MultiheadAttention`` returns NaN there instead, which then
spreads through the whole batch at the next matrix multiply.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

__all__ = [
    "scaled_dot_product_attention",
    "naive_attention",
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "check_mask",
    "check_qkv",
    "from_torch_key_padding_mask",
    "to_torch_attn_mask",
    "KVCache",
    "MultiHeadAttention",
    "fused_attention",
    "copy_from_torch_mha",
]


# --------------------------------------------------------------------------------------------
# Masks
# --------------------------------------------------------------------------------------------


def causal_mask(n: int, m: int | None = None, device=None) -> torch.Tensor:
    """Lower-triangular boolean mask, ``True`` where key ``j`` is not in the future of query ``i``.

    ``n`` queries, ``m`` keys (default ``m = n``). When ``m > n`` the queries are the *last* ``n``
    positions of a sequence of length ``m`` (decoding with a KV cache): query ``i`` sits at absolute
    position ``m - n + i`` and may see keys ``0 .. m - n + i``.

    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    m = n if m is None else m
    if n < 0 or m < n:
        raise ValueError(f"causal_mask needs 0 <= n <= m, got n={n} queries and m={m} keys")
    return torch.ones(n, m, dtype=torch.bool, device=device).tril(diagonal=m - n)


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, T)`` token ids -> ``(B, 1, 1, T)`` mask that is ``True`` on real tokens (keys to attend to)."""
    if tokens.dim() != 2:
        raise ValueError(f"padding_mask expects token ids of shape (B, T), got {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the given masks (``None`` entries are skipped); broadcasting applies."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        result = mask if result is None else result & mask
    return result


def from_torch_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """PyTorch's ``key_padding_mask`` (``(B, T_k)``, ``True`` = *ignore*) -> ours (``(B, 1, 1, T_k)``, ``True`` = attend)."""
    if key_padding_mask.dtype != torch.bool or key_padding_mask.dim() != 2:
        raise ValueError(
            "key_padding_mask must be a bool tensor of shape (B, T_k) with True = ignore, got "
            f"dtype {key_padding_mask.dtype} and shape {tuple(key_padding_mask.shape)}"
        )
    return ~key_padding_mask[:, None, None, :]


def to_torch_attn_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our ``(T_q, T_k)`` mask (``True`` = attend) -> ``nn.MultiheadAttention``'s ``attn_mask`` (``True`` = ignore)."""
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True = may attend), got dtype {mask.dtype}")
    return ~mask


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    """Whether a tensor of ``shape`` broadcasts to exactly ``target`` (NumPy's rules, read from the right).
    Plain integers: this runs on every attention call, where ``torch.broadcast_shapes`` costs far more."""
    if len(shape) > len(target):
        return False
    return all(size in (1, wanted) for size, wanted in zip(reversed(shape), reversed(target), strict=False))


def check_mask(mask: torch.Tensor, score_shape: torch.Size | tuple, name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``score_shape``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = may attend), got dtype {mask.dtype}. "
            f"A 0/1 mask converts with `{name}.bool()`; a PyTorch-style mask (True = ignore) with `~{name}`."
        )
    if not _broadcasts_to(tuple(mask.shape), tuple(score_shape)):
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to the attention scores of shape "
            f"{tuple(score_shape)} (..., T_q, T_k)"
        )


# --------------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------------


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise a clear error unless q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)`` fit together."""
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"q, k, v need at least 2 dims (..., T, d); got shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dim d_k: q has {q.shape[-1]}, k has {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length T_k: k has {k.shape[-2]}, v has {v.shape[-2]}")
    if k.shape[-2] == 0:
        raise ValueError("attention over an empty key sequence (T_k = 0) is undefined")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed the way the paper writes it.

    Args:
        q: queries ``(..., T_q, d_k)``
        k: keys ``(..., T_k, d_k)``
        v: values ``(..., T_k, d_v)``
        mask: optional bool mask broadcastable to ``(..., T_q, T_k)``, ``True`` = may attend.
        dropout: optional module (e.g. ``nn.Dropout``) applied to the weights before they mix ``v``.

    Returns:
        ``(out, weights)``: ``out`` is ``(..., T_q, d_v)``; ``weights`` is ``(..., T_q, T_k)``, the
        attention distribution before dropout (each row sums to 1, or is all zero for a fully
        masked row).

    Example:
        >>> q = k = v = torch.eye(3)[None]           # (1, 3, 3)
        >>> out, w = scaled_dot_product_attention(q, k, v)
        >>> w.shape, out.shape
        (torch.Size([1, 3, 3]), torch.Size([1, 3, 3]))
        >>> torch.allclose(w.sum(-1), torch.ones(1, 3))  # every row is a distribution
        True
    """
    check_qkv(q, k, v)

    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, scores.shape)
        mask = mask.to(scores.device)  # a mask made on the CPU follows the data (on a GPU a mix is an error)
        # The most negative finite number, not -inf: a fully masked row then gets a finite softmax
        # (uniform), which we zero below, so neither the output nor the gradient becomes NaN.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        has_keys = mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
        if not has_keys.all():  # only then pay for a third (T_q, T_k) matrix
            weights = weights * has_keys
    mixed = dropout(weights) if dropout is not None else weights
    return mixed @ v, weights


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d)) V`` the textbook way: :func:`scaled_dot_product_attention`, output only.

    ``q (..., T_q, d)``, ``k (..., T_k, d)``, ``v (..., T_k, d_v)`` -> ``(..., T_q, d_v)``.
    ``causal=True`` hides key ``j > i`` from query ``i`` (needs ``T_q == T_k``). The ``(T_q, T_k)``
    scores and weights are materialised, two ``n x n`` matrices at the peak: this is the baseline of
    chapter 12's benchmarks and the reference the FlashAttention tests compare against.

    >>> q, k, v = torch.randn(3, 2, 5, 8).unbind(0)
    >>> torch.allclose(naive_attention(q, k, v, causal=True), F.scaled_dot_product_attention(q, k, v, is_causal=True),
    ...                atol=1e-6)
    True
    """
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal=True needs T_q == T_k; got {q.shape[-2]} and {k.shape[-2]}")
    mask = causal_mask(q.shape[-2], device=q.device) if causal else None
    return scaled_dot_product_attention(q, k, v, mask)[0]


# --------------------------------------------------------------------------------------------
# KV cache
# --------------------------------------------------------------------------------------------


class KVCache:
    """Keys and values of the tokens seen so far, for incremental (token by token) decoding.

    Self-attention appends the new keys and values at every step. Cross-attention attends to a fixed
    encoder output: with ``static=True`` the first call stores its keys and values and later calls
    reuse them without recomputing the projections.

    The keys and values live in a buffer with room to spare, which doubles when it is full: appending
    one token writes one row in place instead of copying the whole cache (``torch.cat`` would copy all
    ``t`` earlier rows at step ``t``, ``O(n^2)`` work for ``n`` tokens; the doubling copies each row about
    once more on average). ``k`` and ``v`` are views of the filled part, ``(B, H, T, d)``; ``capacity``
    says how many tokens fit before the next doubling.
    """

    def __init__(self, static: bool = False):
        self.static = static
        self._k: torch.Tensor | None = None  # (B, H, capacity, d_k)
        self._v: torch.Tensor | None = None  # (B, H, capacity, d_v)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def k(self) -> torch.Tensor | None:
        """The cached keys ``(B, H, T, d_k)`` (a view of the buffer), or ``None`` before the first call."""
        return None if self._k is None else self._k[:, :, : self._length]

    @property
    def v(self) -> torch.Tensor | None:
        """The cached values ``(B, H, T, d_v)`` (a view of the buffer), or ``None`` before the first call."""
        return None if self._v is None else self._v[:, :, : self._length]

    @property
    def capacity(self) -> int:
        return 0 if self._k is None else self._k.shape[-2]

    @property
    def is_filled(self) -> bool:
        return self._k is not None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new ``(B, H, T_new, d)`` keys and values; return everything cached so far."""
        if self._k is None:
            # The first call (the prompt) is stored as it is: a static cache never grows, and a
            # decoding cache gets its spare room at the first append that needs it.
            self._k, self._v, self._length = k, v, k.shape[-2]
            return self.k, self.v
        if k.shape[:2] != self._k.shape[:2]:
            raise ValueError(f"KV cache holds batch/heads {tuple(self._k.shape[:2])} but got {tuple(k.shape[:2])}")
        start, stop = self._length, self._length + k.shape[-2]
        if stop > self.capacity:
            self._grow(stop)
        self._k[:, :, start:stop] = k
        self._v[:, :, start:stop] = v
        self._length = stop
        return self.k, self.v

    def _grow(self, needed: int) -> None:
        capacity = max(needed, 2 * self.capacity)
        for name in ("_k", "_v"):
            old = getattr(self, name)
            new = old.new_empty(*old.shape[:2], capacity, old.shape[-1])  # (B, H, capacity, d)
            new[:, :, : self._length] = old[:, :, : self._length]
            setattr(self, name, new)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search reorders its hypotheses every step)."""
        if self._k is not None:
            index = index.to(self._k.device)
            self._k = self._k.index_select(0, index)
            self._v = self._v.index_select(0, index)


# --------------------------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention: h heads of width d_k = d_model / h, computed with one matmul per projection.

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``, ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    Args:
        d_model: model width; must be divisible by ``num_heads``.
        num_heads: number of heads h.
        dropout: dropout on the attention weights.
        bias: whether the four projections have a bias (``nn.MultiheadAttention`` has one).
        rotary: optional :class:`course_utils.positional.RotaryEmbedding` applied to queries and keys.

    ``forward(query, key, value, mask=None, cache=None, need_weights=True, is_causal=False) -> (out, weights)``:
    ``query`` is ``(B, T_q, d_model)``, ``key``/``value`` are ``(B, T_k, d_model)``; ``out`` is
    ``(B, T_q, d_model)``; ``weights`` is ``(B, H, T_q, T_k)`` (``None`` when ``need_weights=False``,
    which uses PyTorch's fused kernels instead, see :func:`fused_attention`). ``is_causal=True`` means
    ``mask=causal_mask(T_q, T_k)`` without building it, so that the fused kernels that take no mask
    (FlashAttention's) can run; it cannot be combined with a ``mask``.
    """

    def __init__(
        self,
        d_model: int = 512,
        num_heads: int = 8,
        dropout: float = 0.1,
        bias: bool = True,
        rotary: nn.Module | None = None,
    ):
        super().__init__()
        if num_heads <= 0 or d_model <= 0:
            raise ValueError(f"d_model and num_heads must be positive, got d_model={d_model}, num_heads={num_heads}")
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.rotary = rotary

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model)`` -> ``(B, H, T, d_k)``."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.d_k).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, H, T, d_k)`` -> ``(B, T, d_model)``."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def _check_inputs(self, query, key, value):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3:
                raise ValueError(f"{name} must be (B, T, d_model={self.d_model}), got shape {tuple(t.shape)}")
            if t.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} has last dim {t.shape[-1]} but this attention has d_model={self.d_model} "
                    f"(shape {tuple(t.shape)})"
                )
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(f"batch sizes differ: query {query.shape[0]}, key {key.shape[0]}, value {value.shape[0]}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"key and value lengths differ: {key.shape[1]} vs {value.shape[1]}")
        if query.shape[1] == 0 or key.shape[1] == 0:
            raise ValueError(f"empty sequence: query length {query.shape[1]}, key length {key.shape[1]}")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        self._check_inputs(query, key, value)
        if is_causal and mask is not None:
            raise ValueError(
                "pass either is_causal=True or a mask, not both: combine a padding mask with causal_mask(T_q, T_k)"
            )
        past = len(cache) if cache is not None and not cache.static else 0
        q = self.split_heads(self.W_q(query))  # (B, H, T_q, d_k)
        if cache is not None and cache.static and cache.is_filled:
            k, v = cache.k, cache.v  # cross-attention: encoder keys/values computed once
        else:
            k = self.split_heads(self.W_k(key))  # (B, H, T_new, d_k)
            v = self.split_heads(self.W_v(value))
            if self.rotary is not None:
                k = self.rotary(k, offset=past)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, H, past + T_new, d_k)
        if self.rotary is not None:
            q = self.rotary(q, offset=past)

        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (B, T_q, T_k) -> (B, 1, T_q, T_k)
            check_mask(mask, (q.shape[0], self.num_heads, q.shape[2], k.shape[2]))
            mask = mask.to(q.device)  # a mask made on the CPU follows the data (on a GPU a mix is an error)
        if is_causal and q.shape[2] == 1:
            is_causal = False  # one query, the newest token: it may see every key, so there is nothing to hide

        if need_weights:
            if is_causal:
                mask = causal_mask(q.shape[2], k.shape[2], device=q.device)
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        else:
            weights = None
            decoding = cache is not None and not cache.static
            out = fused_attention(q, k, v, mask, is_causal, self.dropout.p if self.training else 0.0, decoding)
        return self.W_o(self.merge_heads(out)), weights


# PyTorch's fused kernels, less cuDNN's: the backends a decode step may use on a GPU (see fused_attention).
_DECODE_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    decoding: bool = False,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` called so that its fastest kernels can take the call.

    ``q (B, H, T_q, d)``, ``k``/``v`` ``(B, H, T_k, d)`` -> ``(B, H, T_q, d_v)``; ``mask`` in the course
    convention, or ``is_causal=True`` for "query ``i`` sees keys up to its own position", the queries
    being the last ``T_q`` positions of the ``T_k`` keys (as :func:`causal_mask` builds it).

    Two things decide which kernel runs on a GPU:

    - **No explicit mask where none is needed.** SDPA's flash backend takes no ``attn_mask``: a causal
      mask passed as a tensor sends the call to a slower backend. A square causal mask is therefore
      passed as ``is_causal=True``. (PyTorch aligns ``is_causal`` to the top-left corner, which equals
      ours only when ``T_q == T_k``; for ``T_q < T_k``, a chunk of queries after a cached prefix, the
      mask is built.)
    - **Decoding is not prefill.** A decode step has one query and a key length that grows by one
      every step. PyTorch may send such calls to its cuDNN backend (it did on an NVIDIA H200), which
      prepares an execution plan for every shape it has not seen: with a new key length at every
      step, each call paid that preparation on the CPU, far more than the kernel's own time on the
      GPU, and the KV cache saved almost nothing (chapter 11 gives the measurements).
      ``decoding=True`` keeps such calls on the flash, memory-efficient or math backends, whose cost
      does not depend on having seen a shape before. On a CPU there is no cuDNN backend and the call
      is unchanged.
    """
    if is_causal and q.shape[-2] != k.shape[-2]:
        mask, is_causal = causal_mask(q.shape[-2], k.shape[-2], device=q.device), False
    if mask is not None:
        mask = mask.to(q.device)
    if decoding and q.is_cuda:
        with sdpa_kernel(_DECODE_BACKENDS):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
    # Fully masked rows give zeros here too (PyTorch >= 2.5, the minimum we require).
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)


def copy_from_torch_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy the weights of an ``nn.MultiheadAttention`` (``batch_first`` or not) into ours.

    PyTorch packs the three input projections into one ``in_proj_weight`` of shape (3 d, d), in the
    order Q, K, V; both store weights as (out_features, in_features).
    """
    if theirs.embed_dim != ours.d_model or theirs.num_heads != ours.num_heads:
        raise ValueError(
            f"shape mismatch: ours d_model={ours.d_model}, heads={ours.num_heads}; "
            f"theirs embed_dim={theirs.embed_dim}, heads={theirs.num_heads}"
        )
    if theirs.in_proj_weight is None:
        raise ValueError("nn.MultiheadAttention with separate kdim/vdim is not supported")
    has_bias = theirs.in_proj_bias is not None
    if has_bias != (ours.W_q.bias is not None):
        raise ValueError("one module has projection biases and the other does not")
    with torch.no_grad():
        # Copies, not views: code in `ours` (a learner's module, when a grader's test calls this)
        # never gets hold of PyTorch's own parameters, so it cannot change the reference.
        w_q, w_k, w_v = theirs.in_proj_weight.detach().clone().chunk(3, dim=0)
        ours.W_q.weight.copy_(w_q)
        ours.W_k.weight.copy_(w_k)
        ours.W_v.weight.copy_(w_v)
        ours.W_o.weight.copy_(theirs.out_proj.weight.detach().clone())
        if has_bias:
            b_q, b_k, b_v = theirs.in_proj_bias.detach().clone().chunk(3)
            ours.W_q.bias.copy_(b_q)
            ours.W_k.bias.copy_(b_k)
            ours.W_v.bias.copy_(b_v)
            ours.W_o.bias.copy_(theirs.out_proj.bias.detach().clone())
    return ours
