r"""FlashAttention forward as a Triton GPU kernel.

The same algorithm as :mod:`course_utils.flash` (read that first), now as the GPU runs it:

- Each *program* (a CUDA thread block) owns one block of ``BLOCK_M`` queries of one (batch, head).
  All programs run in parallel; the grid is ``(ceil(T_q / BLOCK_M), batch * heads)``.
- The program loads its query tile once into registers, then streams ``K`` and ``V`` tiles of
  ``BLOCK_N`` rows through on-chip memory, updating the running max ``m``, denominator ``l`` and the
  accumulator ``acc`` (the online softmax). Scores never leave the chip.
- ``exp`` is computed as ``exp2`` with the scale folded into ``log2(e) * scale``: one multiply
  fewer per score, and ``exp2`` is the instruction the hardware has.
- Lengths that are not multiples of the block sizes are handled with masked loads (``other=0``)
  and by setting scores of keys past the end to ``-inf``.

Triton is optional for the course: importing this module works without it, and calling
:func:`flash_attention_triton` then raises an error that says what to install. Without a GPU the
kernel still runs, slowly, in Triton's interpreter: set ``TRITON_INTERPRET=1`` *before* Python
imports this module (the tests do that in a subprocess). The interpreter runs the GPU's code, with two
exceptions that :func:`interpreter_workarounds` detects by running two tiny kernels, and that are used
only where that interpreter needs them:

- Triton's interpreter up to 3.6 cannot take a runtime number as a ``range`` bound under NumPy >= 2.4
  (``int()`` of a one-element array raises ``TypeError``; Triton 3.8 and 3.9 no longer do this). There the
  loop runs over every key block instead of stopping at the causal bound (the blocks past the diagonal
  are fully masked, so the result is the same; only the GPU's shortcut is not taken).
- The interpreter stores bfloat16 as its raw 16 bits and multiplies those bits in ``tl.dot`` (NumPy has
  no bfloat16), which gives garbage. There the two bf16 tiles are widened to fp32 just before each
  ``tl.dot``, after every bf16 rounding the GPU does (``p`` is still rounded to bf16 first). Widening
  is exact and the product of two bf16 numbers (8 significant bits each) is exact in fp32 (24 bits),
  so only the order of the fp32 additions can differ from the GPU's tensor cores.

Head sizes up to 256 are supported. The tiles for each dtype and head size are chosen so that the
kernel's shared memory fits an A100 (163 KB a block) and an H100 (227 KB a block): ``tests/test_flash.py``
compiles every configuration for sm_90, and the largest ones (d > 64) for sm_80, on the CPU and checks
the figures Triton reports.
"""
# No `from __future__ import annotations` here: Triton's interpreter before 3.2 recognises the kernel's
# tl.constexpr parameters by their annotation object, and a string annotation made them tensors.

import functools
import math
import os

import torch

__all__ = ["flash_attention_triton", "triton_available", "interpreter_workarounds", "TRITON_IMPORT_ERROR"]

try:
    import triton
    import triton.language as tl

    TRITON_IMPORT_ERROR: str | None = None
except Exception as exc:  # ImportError, or a broken install that fails while importing
    triton = tl = None
    TRITON_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"


def triton_available() -> bool:
    """True when the ``triton`` package imports."""
    return TRITON_IMPORT_ERROR is None


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


if triton is not None:

    @triton.jit
    def _dot_16bit(a, b, WIDEN: tl.constexpr):
        """``tl.dot`` of two bf16/fp16 tiles, accumulated in fp32. WIDEN (only in an interpreter that
        multiplies bf16's raw bits): the same products, computed from the exactly widened values."""
        if WIDEN:
            result = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        else:
            result = tl.dot(a, b)
        return result

    @triton.jit
    def _probe_loop_bound(Out, n):
        """Counts the blocks of 16 below min(16 * (program + 1), n): a bound the interpreter may refuse."""
        count = tl.zeros([16], dtype=tl.int32)
        for _ in range(0, tl.minimum((tl.program_id(0) + 1) * 16, n), 16):
            count += 1
        tl.store(Out + tl.arange(0, 16), count)

    @triton.jit
    def _probe_bf16_dot(A, B, C):
        """C = A @ B for one 16 x 16 tile of bf16, accumulated in fp32."""
        rows = tl.arange(0, 16)
        a = tl.load(A + rows[:, None] * 16 + rows[None, :])
        b = tl.load(B + rows[:, None] * 16 + rows[None, :])
        tl.store(C + rows[:, None] * 16 + rows[None, :], tl.dot(a, b))

    @triton.jit
    def _flash_forward_kernel(
        Q,
        K,
        V,
        Out,
        Lse,
        stride_qz,
        stride_qt,
        stride_qd,
        stride_kz,
        stride_kt,
        stride_kd,
        stride_vz,
        stride_vt,
        stride_vd,
        stride_oz,
        stride_ot,
        stride_od,
        n_queries,
        n_keys,
        head_dim,
        qk_scale_log2,
        CAUSAL: tl.constexpr,
        DOT_FP32: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
        INTERPRETED_KEYS: tl.constexpr,
        WIDEN_BF16_DOT: tl.constexpr,
    ):
        query_block = tl.program_id(0)
        z = tl.program_id(1)  # which (batch, head) pair

        rows = query_block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
        dims = tl.arange(0, BLOCK_D)  # (BLOCK_D,) head-dim lanes (BLOCK_D >= head_dim, a power of 2)
        cols_in_tile = tl.arange(0, BLOCK_N)  # (BLOCK_N,)
        row_ok = rows < n_queries
        dim_ok = dims < head_dim

        q = tl.load(
            Q + z * stride_qz + rows[:, None] * stride_qt + dims[None, :] * stride_qd,
            mask=row_ok[:, None] & dim_ok[None, :],
            other=0.0,
        )  # (BLOCK_M, BLOCK_D)

        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running max (log2 units)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running denominator
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)  # running numerator

        # Under a causal mask no query of this block looks past key (query_block + 1) * BLOCK_M - 1.
        if CAUSAL:
            keys_end = tl.minimum((query_block + 1) * BLOCK_M, n_keys)
        else:
            keys_end = n_keys
        # INTERPRETED_KEYS is 0 on the GPU and in an interpreter that takes keys_end as a loop bound.
        # Triton's interpreter up to 3.6 under NumPy >= 2.4 cannot (see the module docstring): there it
        # is the number of keys, a plain number, and the loop runs to the last key block; blocks past a
        # causal diagonal are fully masked below and change nothing.
        for key_start in range(0, keys_end if INTERPRETED_KEYS == 0 else INTERPRETED_KEYS, BLOCK_N):
            cols = key_start + cols_in_tile  # (BLOCK_N,) key positions
            col_ok = cols < n_keys
            k_t = tl.load(  # loaded already transposed: (BLOCK_D, BLOCK_N)
                K + z * stride_kz + cols[None, :] * stride_kt + dims[:, None] * stride_kd,
                mask=dim_ok[:, None] & col_ok[None, :],
                other=0.0,
            )
            if DOT_FP32:
                scores = tl.dot(q, k_t, input_precision="ieee")  # (BLOCK_M, BLOCK_N), exact fp32 products
            else:
                scores = _dot_16bit(q, k_t, WIDEN_BF16_DOT)  # fp32 accumulation of bf16/fp16 products
            scores = scores * qk_scale_log2
            visible = col_ok[None, :]
            if CAUSAL:
                visible = visible & (cols[None, :] <= rows[:, None])
            scores = tl.where(visible, scores, float("-inf"))

            # The first key block always holds key 0, visible to every query, so m_new is finite.
            m_new = tl.maximum(m_i, tl.max(scores, axis=1))
            alpha = tl.math.exp2(m_i - m_new)  # rescale factor for the old sums
            p = tl.math.exp2(scores - m_new[:, None])  # (BLOCK_M, BLOCK_N)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None]

            v = tl.load(
                V + z * stride_vz + cols[:, None] * stride_vt + dims[None, :] * stride_vd,
                mask=col_ok[:, None] & dim_ok[None, :],
                other=0.0,
            )  # (BLOCK_N, BLOCK_D)
            if DOT_FP32:
                acc += tl.dot(p, v, input_precision="ieee")
            else:
                acc += _dot_16bit(p.to(v.dtype), v, WIDEN_BF16_DOT)  # p rounded to bf16/fp16 first
            m_i = m_new

        acc = acc / l_i[:, None]
        tl.store(
            Out + z * stride_oz + rows[:, None] * stride_ot + dims[None, :] * stride_od,
            acc.to(Out.dtype.element_ty),
            mask=row_ok[:, None] & dim_ok[None, :],
        )
        # log-sum-exp of the natural-log scores: (m + log2 l) / log2(e)
        tl.store(Lse + z * n_queries + rows, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=row_ok)


@functools.lru_cache(maxsize=None)
def interpreter_workarounds() -> dict[str, str]:
    """What this Triton interpreter cannot run of the GPU's code, found by running two tiny kernels.

    Returns ``{}`` when it runs all of it, else ``{name: reason}`` with ``"loop_to_last_key_block"``
    and/or ``"widen_bf16_dot"`` (see the module docstring). Only meaningful under ``TRITON_INTERPRET=1``.
    """
    if not (triton_available() and _interpreting()):
        return {}
    found = {}
    counts = torch.zeros(16, dtype=torch.int32)
    try:
        _probe_loop_bound[(1,)](counts, 40)
        if counts.tolist() != [1] * 16:  # program 0: min(16, 40) = 16, one block of 16
            raise RuntimeError(f"counted {counts.tolist()}")
    except Exception as exc:
        found["loop_to_last_key_block"] = f"a runtime loop bound fails here: {type(exc).__name__}: {exc}"
    a = torch.full((16, 16), 1.5, dtype=torch.bfloat16)
    b = torch.eye(16, dtype=torch.bfloat16) * 2
    c = torch.zeros(16, 16, dtype=torch.float32)
    try:
        _probe_bf16_dot[(1,)](a, b, c)
        if not torch.equal(c, torch.full((16, 16), 3.0)):
            raise RuntimeError(f"1.5 * 2 came out as {c[0, 0].item():.4g}")
    except Exception as exc:
        found["widen_bf16_dot"] = f"tl.dot on bf16 fails here: {type(exc).__name__}: {exc}"
    return found


def _launch_config(dtype: torch.dtype, head_dim: int) -> dict[str, int]:
    """Tiles and launch options for this dtype and head size: BLOCK_M, BLOCK_N, BLOCK_D, num_warps,
    num_stages. Chosen so that the kernel's shared memory fits an A100 and an H100 (tests/test_flash.py
    compiles them for sm_90 and sm_80 and checks)."""
    block_d = max(16, triton.next_power_of_2(head_dim))
    if _interpreting():
        m, n, warps, stages = 32, 32, 4, 1  # the interpreter is numpy: bigger tiles mean fewer slow Python loops
    elif dtype == torch.float32:
        m, n, warps, stages = 64, 32, 4, 2  # fp32 tiles are twice the bytes
    elif block_d <= 64:
        m, n, warps, stages = 128, 64, 4, 3
    elif block_d <= 128:
        m, n, warps, stages = 128, 64, 8, 2
    else:
        m, n, warps, stages = 64, 64, 8, 2  # d > 128: half the rows halve the Q tile and the accumulator
    return {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_D": block_d, "num_warps": warps, "num_stages": stages}


def _kernel_constants(dtype: torch.dtype, causal: bool, n_keys: int) -> dict[str, bool | int]:
    """The kernel's compile-time switches besides the tiles, as the launcher sets them."""
    workarounds = interpreter_workarounds()
    return {
        "CAUSAL": bool(causal),
        "DOT_FP32": dtype == torch.float32,  # fp32 inputs get exact fp32 products instead of TF32
        # 0: one compiled kernel for every length, looping to keys_end (see the module docstring)
        "INTERPRETED_KEYS": n_keys if "loop_to_last_key_block" in workarounds else 0,
        "WIDEN_BF16_DOT": dtype == torch.bfloat16 and "widen_bf16_dot" in workarounds,
    }


def _kernel_args(q3, k3, v3, out, lse, scale: float) -> list:
    """The kernel's runtime arguments, in order, for (Z, T, d) tensors."""
    strides = [t.stride(i) for t in (q3, k3, v3, out) for i in range(3)]
    n_queries, n_keys, head_dim = q3.shape[1], k3.shape[1], q3.shape[2]
    return [q3, k3, v3, out, lse, *strides, n_queries, n_keys, head_dim, scale * 1.4426950408889634]  # log2(e)


def flash_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention forward with a Triton kernel: ``softmax(scale * Q K^T [+ causal]) V``.

    Args:
        q: ``(..., T_q, d)``; k, v: ``(..., T_k, d)``. One dtype among float32, bfloat16, float16;
            ``d <= 256``. On CUDA, or on the CPU when ``TRITON_INTERPRET=1`` was set before import.
        causal: query ``i`` sees keys ``j <= i`` (needs ``T_q == T_k``).
        scale: softmax scale, default ``1 / sqrt(d)``.
        return_lse: also return the float32 log-sum-exp of each query's scores ``(..., T_q)``.
        block_m, block_n: override the tile sizes (powers of two, at least 16).

    float32 inputs use exact fp32 products (not TF32), so they match the reference to ~1e-6.
    """
    if not triton_available():
        raise RuntimeError(
            "flash_attention_triton needs the 'triton' package, which failed to import "
            f"({TRITON_IMPORT_ERROR}). Install it with `pip install triton` (Linux x86-64, CUDA GPU)."
        )
    if q.dim() < 2 or q.shape[:-2] != k.shape[:-2] or k.shape != v.shape or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "expected q (..., T_q, d) and k, v (..., T_k, d) with the same leading dims and d; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"q, k, v must share one of float32/float16/bfloat16; got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.device.type != "cuda" and not _interpreting():
        raise RuntimeError(
            f"flash_attention_triton runs on CUDA tensors; got device {q.device}. To run the kernel on the "
            "CPU (slowly) set TRITON_INTERPRET=1 before importing course_utils.flash_triton."
        )
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    n_queries, n_keys, head_dim = q.shape[-2], k.shape[-2], q.shape[-1]
    if causal and n_queries != n_keys:
        raise ValueError(f"causal=True needs T_q == T_k; got T_q={n_queries}, T_k={n_keys}")
    if n_keys == 0:
        raise ValueError("attention over an empty key sequence (T_k = 0) is undefined")
    if head_dim > 256:
        raise ValueError(f"head dim {head_dim} > 256 does not fit one tile of this kernel")

    lead = q.shape[:-2]
    # Flatten (batch, heads) into one axis z; reshape copies only if the layout requires it.
    q3 = q.reshape(-1, n_queries, head_dim)  # (Z, T_q, d)
    k3 = k.reshape(-1, n_keys, head_dim)  # (Z, T_k, d)
    v3 = v.reshape(-1, n_keys, head_dim)  # (Z, T_k, d)
    z = q3.shape[0]
    out = torch.empty_like(q3)  # (Z, T_q, d)
    lse = torch.empty(z, n_queries, dtype=torch.float32, device=q.device)  # (Z, T_q)
    if z == 0 or n_queries == 0:
        out, lse = out.reshape(q.shape), lse.reshape(*lead, n_queries)
        return (out, lse) if return_lse else out

    config = _launch_config(q.dtype, head_dim)
    block_m, block_n = block_m or config["BLOCK_M"], block_n or config["BLOCK_N"]
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if value < 16 or value & (value - 1):
            raise ValueError(f"{name} must be a power of two >= 16 (tl.dot's minimum); got {value}")

    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    grid = (triton.cdiv(n_queries, block_m), z)
    _flash_forward_kernel[grid](
        *_kernel_args(q3, k3, v3, out, lse, scale),
        **_kernel_constants(q.dtype, causal, n_keys),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=config["BLOCK_D"],
        num_warps=config["num_warps"],
        num_stages=config["num_stages"],
    )
    out, lse = out.reshape(q.shape), lse.reshape(*lead, n_queries)
    return (out, lse) if return_lse else out
