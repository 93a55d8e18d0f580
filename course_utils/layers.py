"""Feed-forward blocks, encoder and decoder layers, and their stacks.

Post-norm (the 2017 paper) normalises after the residual add::

    x = LayerNorm(x + Dropout(Sublayer(x)))

Pre-norm (GPT-2 onwards) normalises the sublayer's input and leaves the residual path untouched::

    x = x + Dropout(Sublayer(LayerNorm(x)))

``norm_first=True`` selects pre-norm, as in ``nn.TransformerEncoderLayer``. The attribute names
(``self_attn``, ``norm1``, ``dropout1``, ``ffn.linear1`` ...) mirror PyTorch's layers so that weights
copy across one to one (:func:`copy_from_torch_layer`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import KVCache, MultiHeadAttention, copy_from_torch_mha
from .positional import RotaryEmbedding

__all__ = [
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "encoder_stack",
    "run_encoder_stack",
    "copy_from_torch_layer",
    "ACTIVATIONS",
]

ACTIVATIONS = ("relu", "gelu", "swiglu")


class FeedForward(nn.Module):
    """Position-wise feed-forward network, applied to every token independently.

    - ``relu`` / ``gelu``: ``W2 act(W1 x)``, parameters ``2 d d_ff + d_ff + d``.
    - ``swiglu`` (Shazeer, 2020; LLaMA): ``W2 (SiLU(W_gate x) * W1 x)``, three matrices, so models
      that use it shrink ``d_ff`` to about ``8/3 d`` to keep the parameter count.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1, activation: str = "relu", bias: bool = True):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear_gate = nn.Linear(d_model, d_ff, bias=bias) if activation == "swiglu" else None
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activation == "relu":
            hidden = F.relu(self.linear1(x))
        elif self.activation == "gelu":
            hidden = F.gelu(self.linear1(x))
        else:
            hidden = F.silu(self.linear_gate(x)) * self.linear1(x)
        return self.linear2(self.dropout(hidden))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and a LayerNorm.

    ``forward(x, mask=None, cache=None) -> x`` with ``x`` of shape ``(B, T, d_model)`` and ``mask``
    following the course convention (bool, ``True`` = may attend; a padding mask is ``(B, 1, 1, T)``).
    With a causal mask (or ``is_causal=True``, the same without building the mask, which lets the fused
    kernels run) this is also the GPT block (a decoder layer without cross-attention); ``cache``
    then holds the keys and values of earlier tokens, and ``rotary=True`` applies RoPE in attention.
    Set ``store_attention = True`` to keep the last attention weights in ``last_self_attention``: the
    layer then computes attention with the explicit formula (the fused kernels return no weights), which
    gives the same output more slowly, and on a GPU never with FlashAttention.
    """

    def __init__(
        self,
        d_model: int = 512,
        num_heads: int = 8,
        d_ff: int = 2048,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        rotary: bool = False,
    ):
        super().__init__()
        rope = RotaryEmbedding(d_model // num_heads) if rotary and d_model % num_heads == 0 else None
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, rotary=rope)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first
        self.store_attention = False
        self.last_self_attention: torch.Tensor | None = None

    def _self_attention(self, x: torch.Tensor, mask: torch.Tensor | None, cache: KVCache | None, is_causal: bool):
        out, weights = self.self_attn(
            x, x, x, mask, cache=cache, need_weights=self.store_attention, is_causal=is_causal
        )
        self.last_self_attention = weights.detach() if weights is not None else None
        return self.dropout1(out)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        if self.norm_first:
            # Normalise once and feed the same tensor as query, key and value.
            x = x + self._self_attention(self.norm1(x), mask, cache, is_causal)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            x = self.norm1(x + self._self_attention(x, mask, cache, is_causal))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output ``memory``, then feed-forward.

    ``forward(x, memory, tgt_mask=None, memory_mask=None, self_cache=None, cross_cache=None,
    tgt_is_causal=False) -> x``. ``tgt_mask`` is usually ``causal_mask(T)`` (combined with a padding
    mask; ``tgt_is_causal=True`` instead of a causal mask alone lets the fused kernels run); ``memory_mask`` is the
    source padding mask ``(B, 1, 1, S)``. With caches the layer decodes incrementally: ``x`` holds only
    the new tokens, and the cross-attention keys/values are computed once.
    """

    def __init__(
        self,
        d_model: int = 512,
        num_heads: int = 8,
        d_ff: int = 2048,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.norm_first = norm_first
        self.store_attention = False
        self.last_self_attention: torch.Tensor | None = None
        self.last_cross_attention: torch.Tensor | None = None

    def _self_attention(self, x, mask, cache, is_causal):
        out, weights = self.self_attn(
            x, x, x, mask, cache=cache, need_weights=self.store_attention, is_causal=is_causal
        )
        self.last_self_attention = weights.detach() if weights is not None else None
        return self.dropout1(out)

    def _cross_attention(self, x, memory, mask, cache):
        out, weights = self.cross_attn(x, memory, memory, mask, cache=cache, need_weights=self.store_attention)
        self.last_cross_attention = weights.detach() if weights is not None else None
        return self.dropout2(out)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        tgt_is_causal: bool = False,
    ) -> torch.Tensor:
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), tgt_mask, self_cache, tgt_is_causal)
            x = x + self._cross_attention(self.norm2(x), memory, memory_mask, cross_cache)
            x = x + self.dropout3(self.ffn(self.norm3(x)))
        else:
            x = self.norm1(x + self._self_attention(x, tgt_mask, self_cache, tgt_is_causal))
            x = self.norm2(x + self._cross_attention(x, memory, memory_mask, cross_cache))
            x = self.norm3(x + self.dropout3(self.ffn(x)))
        return x


def encoder_stack(
    num_layers: int,
    d_model: int,
    num_heads: int,
    d_ff: int,
    dropout: float = 0.1,
    activation: str = "relu",
    norm_first: bool = False,
    layer_norm_eps: float = 1e-5,
    rotary: bool = False,
) -> tuple[nn.ModuleList, nn.Module]:
    """``(layers, final_norm)``: ``num_layers`` encoder layers and what follows them, a LayerNorm for a
    pre-norm stack (whose output is otherwise un-normalised, since the residual path never passes through a
    norm) and nothing for a post-norm one. :class:`Encoder` holds these two, and so does a language model
    (:class:`~course_utils.models.TransformerLM`), under the same names."""
    layers = nn.ModuleList(
        EncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first, layer_norm_eps, rotary)
        for _ in range(num_layers)
    )
    return layers, nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()


def run_encoder_stack(
    layers: nn.ModuleList,
    final_norm: nn.Module,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    caches: list[KVCache] | None = None,
    is_causal: bool = False,
) -> torch.Tensor:
    """``x`` ``(B, T, d_model)`` through the layers, then ``final_norm``; one cache per layer, if any."""
    if caches is not None and len(caches) != len(layers):
        raise ValueError(f"got {len(caches)} caches for {len(layers)} layers")
    for i, layer in enumerate(layers):
        x = layer(x, mask, caches[i] if caches is not None else None, is_causal)
    return final_norm(x)


class Encoder(nn.Module):
    """``num_layers`` encoder layers; pre-norm stacks end with a final LayerNorm (their output is
    otherwise un-normalised, since the residual path never passes through a norm).

    ``layer_norm_eps`` goes to every LayerNorm of the stack; ``rotary=True`` applies RoPE inside each
    layer's attention. ``forward(x, mask=None, caches=None) -> x`` with ``x`` ``(B, T, d_model)``; with
    ``caches`` (one :class:`KVCache` per layer, from :meth:`new_caches`) and a causal mask, ``x`` holds
    only the new tokens and the stack decodes incrementally, as in a GPT model.
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        rotary: bool = False,
    ):
        super().__init__()
        self.layers, self.final_norm = encoder_stack(
            num_layers, d_model, num_heads, d_ff, dropout, activation, norm_first, layer_norm_eps, rotary
        )

    def new_caches(self) -> list[KVCache]:
        return [KVCache() for _ in self.layers]

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        caches: list[KVCache] | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        return run_encoder_stack(self.layers, self.final_norm, x, mask, caches, is_causal)

    def store_attention(self, on: bool = True) -> None:
        """Keep (or stop keeping) each layer's last attention weights in ``layer.last_self_attention``."""
        for layer in self.layers:
            layer.store_attention = on


class Decoder(nn.Module):
    """``num_layers`` decoder layers (+ final LayerNorm for pre-norm). ``caches`` is a list with one
    ``(self_cache, cross_cache)`` pair per layer, as made by :meth:`new_caches`."""

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first, layer_norm_eps)
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()

    def new_caches(self) -> list[tuple[KVCache, KVCache]]:
        return [(KVCache(), KVCache(static=True)) for _ in self.layers]

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        caches: list[tuple[KVCache, KVCache]] | None = None,
        tgt_is_causal: bool = False,
    ) -> torch.Tensor:
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"got {len(caches)} caches for {len(self.layers)} decoder layers")
        for i, layer in enumerate(self.layers):
            self_cache, cross_cache = caches[i] if caches is not None else (None, None)
            x = layer(x, memory, tgt_mask, memory_mask, self_cache, cross_cache, tgt_is_causal)
        return self.final_norm(x)

    def store_attention(self, on: bool = True) -> None:
        """Keep (or stop keeping) each layer's last weights: ``last_self_attention``, ``last_cross_attention``."""
        for layer in self.layers:
            layer.store_attention = on


def copy_from_torch_layer(
    ours: EncoderLayer | DecoderLayer, theirs: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer
):
    """Copy every weight of PyTorch's encoder/decoder layer into ours (same sizes required)."""
    if isinstance(ours, DecoderLayer) != isinstance(theirs, nn.TransformerDecoderLayer):
        raise TypeError(f"cannot copy {type(theirs).__name__} into {type(ours).__name__}")
    if ours.ffn.activation == "swiglu":
        raise ValueError("PyTorch's layers have no SwiGLU feed-forward to copy from")
    copy_from_torch_mha(ours.self_attn, theirs.self_attn)
    if isinstance(ours, DecoderLayer):
        copy_from_torch_mha(ours.cross_attn, theirs.multihead_attn)
    pairs = [
        (ours.ffn.linear1, theirs.linear1),
        (ours.ffn.linear2, theirs.linear2),
        (ours.norm1, theirs.norm1),
        (ours.norm2, theirs.norm2),
    ]
    if isinstance(ours, DecoderLayer):
        pairs.append((ours.norm3, theirs.norm3))
    with torch.no_grad():
        for mine, torch_module in pairs:
            if mine.weight.shape != torch_module.weight.shape:
                raise ValueError(
                    f"shape mismatch copying {type(torch_module).__name__}: "
                    f"{tuple(torch_module.weight.shape)} into {tuple(mine.weight.shape)}"
                )
            mine.weight.copy_(torch_module.weight)
            mine.bias.copy_(torch_module.bias)
    return ours
