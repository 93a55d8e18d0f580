"""What the benchmark measures: the attention implementations, and the FLOPs of one call.

Each method is called as ``fn(q, k, v, causal)`` on ``(B, H, n, d)`` tensors and returns the
``(B, H, n, d)`` output. A method that materialises the ``n x n`` matrix has memory growing as ``n^2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch.nn.functional as F

from ..attention import naive_attention

__all__ = ["AttentionMethod", "METHODS", "attention_flops"]


def _sdpa(backend_name: str) -> Callable:
    """``F.scaled_dot_product_attention`` pinned to one backend: that backend or an error, never a fallback."""

    def run(q, k, v, causal):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _flash_pytorch(q, k, v, causal, block: int = 128):
    from ..flash import flash_attention

    return flash_attention(q, k, v, causal=causal, block_q=block, block_k=block)


def _flash_triton(q, k, v, causal):
    from ..flash_triton import flash_attention_triton

    return flash_attention_triton(q, k, v, causal=causal)


@dataclass(frozen=True)
class AttentionMethod:
    name: str
    fn: Callable  # fn(q, k, v, causal) -> out
    materialises: bool  # holds the n x n matrix (memory grows as n^2)
    cuda_only: bool = False
    sdpa_backend: str | None = None  # the SDPBackend the call is pinned to
    uses_block: bool = False  # takes the grid's tile size


METHODS: dict[str, AttentionMethod] = {
    "naive": AttentionMethod("naive", naive_attention, materialises=True),
    "sdpa-math": AttentionMethod("sdpa-math", _sdpa("MATH"), materialises=True, sdpa_backend="MATH"),
    "sdpa-flash": AttentionMethod("sdpa-flash", _sdpa("FLASH_ATTENTION"), False, sdpa_backend="FLASH_ATTENTION"),
    "sdpa-efficient": AttentionMethod(
        "sdpa-efficient", _sdpa("EFFICIENT_ATTENTION"), False, sdpa_backend="EFFICIENT_ATTENTION"
    ),
    "sdpa-cudnn": AttentionMethod("sdpa-cudnn", _sdpa("CUDNN_ATTENTION"), False, sdpa_backend="CUDNN_ATTENTION"),
    "flash-pytorch": AttentionMethod("flash-pytorch", _flash_pytorch, False, uses_block=True),
    "flash-triton": AttentionMethod("flash-triton", _flash_triton, False, cuda_only=True),
}


def attention_flops(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int, causal: bool) -> int:
    """Matrix-multiply FLOPs of attention's forward pass: ``4 b h n_q n_k d``, halved when causal.

    >>> attention_flops(1, 8, 1024, 1024, 64, causal=False)
    2147483648
    """
    flops = 4 * batch * heads * n_queries * n_keys * head_dim
    return flops // 2 if causal else flops
