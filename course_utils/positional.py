r"""Position encodings: sinusoidal (fixed), learned, and rotary (RoPE).

Self-attention treats its input as a set: permute the tokens and the outputs are permuted the same
way. Position encodings break that symmetry.

- Sinusoidal (Vaswani et al., 2017): ``PE[pos, 2i] = sin(pos / 10000^{2i/d})``,
  ``PE[pos, 2i+1] = cos(pos / 10000^{2i/d})``, added to the token embeddings. For every shift ``k``
  there is a fixed matrix ``M_k`` (block-diagonal 2x2 rotations) with ``PE[pos+k] = M_k PE[pos]``.
- Learned: one trainable vector per position (BERT, GPT-2). Positions never seen in training have
  no vector at all.
- Rotary (Su et al., 2021): rotate each pair of query/key features by an angle proportional to the
  position, so that ``<R_m q, R_n k>`` depends on the positions only through ``m - n`` (and on the
  contents ``q`` and ``k``).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "sinusoidal_table",
    "sinusoidal_shift_matrix",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "RotaryEmbedding",
    "apply_rotary",
    "rotary_angles",
]


def _frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """``omega_i = base^{-2i/d}`` for ``i = 0 .. ceil(d/2) - 1``, computed in float64 for accuracy."""
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_table(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(max_len, d_model)`` sinusoidal table; even columns are sines, odd columns cosines.

    Works for odd ``d_model`` too (the last sine has no cosine partner).
    """
    if max_len <= 0 or d_model <= 0:
        raise ValueError(f"max_len and d_model must be positive, got max_len={max_len}, d_model={d_model}")
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * _frequencies(d_model, base)  # (L, ceil(d/2))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table.float()


def sinusoidal_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``(d_model, d_model)`` matrix ``M_k`` with ``PE[pos + k] = M_k @ PE[pos]`` for every ``pos``.

    Each (sin, cos) pair is rotated by the angle ``k * omega_i``:
    ``sin(a + b) = sin a cos b + cos a sin b``, ``cos(a + b) = cos a cos b - sin a sin b``.
    """
    if d_model % 2:
        raise ValueError(f"the shift identity needs sin/cos pairs: d_model={d_model} is odd")
    theta = k * _frequencies(d_model, base)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    idx = torch.arange(0, d_model, 2)
    matrix[idx, idx] = torch.cos(theta)
    matrix[idx, idx + 1] = torch.sin(theta)
    matrix[idx + 1, idx] = -torch.sin(theta)
    matrix[idx + 1, idx + 1] = torch.cos(theta)
    return matrix.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to ``x`` of shape ``(B, T, d_model)``, then dropout.

    ``offset`` shifts the positions (decoding with a KV cache feeds one token at position ``offset``).
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.1):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        # A non-persistent buffer: moved by .to(device), never trained, and not stored in the state_dict
        # (it is recomputed from the formula, so checkpoints do not carry max_len x d_model numbers).
        self.register_buffer("pe", sinusoidal_table(max_len, d_model)[None], persistent=False)  # (1, L, d)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_positions(x, self.d_model, self.max_len, offset, "SinusoidalPositionalEncoding")
        return self.dropout(x + self.pe[:, offset : offset + x.shape[1]])


class LearnedPositionalEncoding(nn.Module):
    """Adds a trainable vector per position (``nn.Embedding(max_len, d_model)``), then dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.pos_embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_positions(x, self.d_model, self.max_len, offset, "LearnedPositionalEncoding")
        positions = torch.arange(offset, offset + x.shape[1], device=x.device)
        return self.dropout(x + self.pos_embedding(positions)[None])


def _check_positions(x: torch.Tensor, d_model: int, max_len: int, offset: int, who: str) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{who} expects (B, T, d_model={d_model}), got shape {tuple(x.shape)}")
    if offset + x.shape[1] > max_len:
        raise ValueError(
            f"{who}: positions up to {offset + x.shape[1] - 1} requested but max_len={max_len}; "
            "build the encoding with a larger max_len"
        )


# --------------------------------------------------------------------------------------------
# Rotary position embedding
# --------------------------------------------------------------------------------------------


def rotary_angles(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angles ``pos * theta_i`` with ``theta_i = base^{-2i/d}``: ``(T,)`` -> ``(T, head_dim / 2)``."""
    if head_dim % 2:
        raise ValueError(f"rotary embedding rotates feature pairs: head_dim={head_dim} is odd")
    return positions.to(torch.float64)[:, None] * _frequencies(head_dim, base).to(positions.device)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotate each feature pair ``(x[2i], x[2i+1])`` of ``x`` ``(..., T, d)`` by ``positions * theta_i``.

    ``positions`` defaults to ``0 .. T-1`` and is moved to ``x``'s device. After this,
    ``apply_rotary(q)[m] . apply_rotary(k)[n]`` depends on the positions only through ``m - n``.
    """
    length, head_dim = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(length, device=x.device)
    if positions.shape != (length,):
        raise ValueError(f"positions must have shape ({length},), got {tuple(positions.shape)}")
    # The angles follow the data: positions written as `torch.tensor([64])` live on the CPU, and a
    # CPU table would meet a GPU `x` below (on CUDA that mix is an error, not a silent copy).
    positions = positions.to(x.device)
    angles = rotary_angles(positions, head_dim, base)  # (T, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)
    return rotated.flatten(-2)


class RotaryEmbedding(nn.Module):
    """Module form of :func:`apply_rotary` for use inside attention: ``forward(x, offset=0)``.

    ``x`` is ``(B, H, T, d_k)``; ``offset`` is the absolute position of its first token.
    """

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary embedding rotates feature pairs: head_dim={head_dim} is odd")
        self.head_dim = head_dim
        self.base = base

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        positions = torch.arange(offset, offset + x.shape[-2], device=x.device)
        return apply_rotary(x, positions, self.base)
