"""FlashAttention from scratch (course_utils.flash) and its Triton kernel (course_utils.flash_triton).

The oracle is attention with the n x n matrix materialised (course_utils.bench.naive_attention) and
PyTorch's own F.scaled_dot_product_attention.
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course_utils import flash_triton
from course_utils.bench import naive_attention, peak_memory
from course_utils.flash import flash_attention, online_softmax_steps

REPO = Path(__file__).resolve().parent.parent
HAS_TRITON = importlib.util.find_spec("triton") is not None
HAS_CUDA = torch.cuda.is_available()


def _qkv(lead, n_q, n_k, d, d_v=None, dtype=torch.float32, device="cpu", seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, n_q, d, generator=gen, dtype=torch.float32).to(device, dtype)
    k = torch.randn(*lead, n_k, d, generator=gen, dtype=torch.float32).to(device, dtype)
    v = torch.randn(*lead, n_k, d_v or d, generator=gen, dtype=torch.float32).to(device, dtype)
    return q, k, v


CASES = [
    # lead dims, T_q, T_k, d, d_v, block_q, block_k, causal
    ((), 16, 16, 8, 8, 4, 4, False),
    ((2, 3), 37, 37, 16, 16, 8, 8, True),  # 37 is not a multiple of the block
    ((2, 3), 37, 37, 16, 16, 16, 5, True),  # query and key blocks of different sizes
    ((2, 3), 37, 37, 16, 16, 5, 16, True),
    ((2, 4), 100, 100, 32, 32, 128, 128, True),  # one block bigger than the sequence
    ((2, 4), 13, 57, 32, 24, 8, 16, False),  # fewer queries than keys, d_v != d
    ((3,), 61, 9, 16, 16, 16, 4, False),  # more queries than keys
    ((1, 2), 1, 33, 16, 16, 8, 8, False),  # a single query (one decoding step)
]


@pytest.mark.parametrize("lead,n_q,n_k,d,d_v,block_q,block_k,causal", CASES)
def test_flash_equals_naive_attention_fp32(lead, n_q, n_k, d, d_v, block_q, block_k, causal):
    q, k, v = _qkv(lead, n_q, n_k, d, d_v)
    out = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    reference = naive_attention(q, k, v, causal=causal)
    assert out.shape == reference.shape, f"output shape {tuple(out.shape)}, expected {tuple(reference.shape)}"
    err = (out - reference).abs().max().item()
    assert err < 1e-5, (
        f"flash attention differs from naive attention by {err:.2e} (causal={causal}, T_q={n_q}, T_k={n_k})"
    )
    torch_ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    err_torch = (out - torch_ref).abs().max().item()
    assert err_torch < 1e-5, f"flash attention differs from F.scaled_dot_product_attention by {err_torch:.2e}"


def test_naive_attention_equals_pytorch():
    q, k, v = _qkv((2, 2), 20, 20, 8)
    for causal in (False, True):
        err = (naive_attention(q, k, v, causal) - F.scaled_dot_product_attention(q, k, v, is_causal=causal)).abs().max()
        assert err < 1e-5, f"the benchmark's naive attention is wrong (causal={causal}): error {err:.2e}"


@pytest.mark.parametrize("causal", [False, True])
def test_flash_logsumexp_and_custom_scale(causal):
    q, k, v = _qkv((2, 2), 29, 29, 16)
    scale = 0.3
    out, lse = flash_attention(q, k, v, causal=causal, scale=scale, block_q=8, block_k=8, return_lse=True)
    scores = scale * q @ k.transpose(-2, -1)  # (B, H, T, T)
    if causal:
        scores = scores.masked_fill(torch.ones(29, 29, dtype=torch.bool).triu(1), -math.inf)
    expected_out = scores.softmax(-1) @ v
    assert (out - expected_out).abs().max() < 1e-5, "the softmax scale is not applied as given"
    assert lse.shape == (2, 2, 29) and lse.dtype == torch.float32, f"lse has shape {tuple(lse.shape)}, {lse.dtype}"
    err = (lse - scores.logsumexp(-1)).abs().max().item()
    assert err < 1e-5, f"the returned log-sum-exp is off by {err:.2e}"


def test_flash_bf16_close_to_fp32_reference():
    q, k, v = _qkv((2, 4), 70, 70, 32)
    out = flash_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=True, block_q=16, block_k=16)
    assert out.dtype == torch.bfloat16, f"output dtype should follow the input, got {out.dtype}"
    err = (out.float() - naive_attention(q, k, v, causal=True)).abs().max().item()
    assert err < 3e-2, f"bf16 flash attention is further from the fp32 result than bf16 rounding explains: {err:.3f}"


def test_flash_rejects_bad_inputs():
    q, k, v = _qkv((2,), 8, 10, 4)
    with pytest.raises(ValueError, match="causal=True needs"):
        flash_attention(q, k, v, causal=True)
    with pytest.raises(ValueError, match="last dim"):
        flash_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="same length"):
        flash_attention(q, k, v[..., :9, :])
    with pytest.raises(ValueError, match="block sizes"):
        flash_attention(q, k, v, block_q=0)
    with pytest.raises(ValueError, match="leading"):
        flash_attention(q, k[None], v[None])


def test_flash_memory_grows_linearly_while_naive_grows_quadratically():
    """Peak memory at n, 2n, 4n: flash must grow like n (ratio ~2 per doubling), naive like n^2 (~4)."""
    torch.manual_seed(0)
    lengths = (256, 512, 1024)
    flash_peaks, naive_peaks = [], []
    for n in lengths:
        q, k, v = (torch.randn(1, 4, n, 32) for _ in range(3))
        flash_peaks.append(peak_memory(lambda: flash_attention(q, k, v, block_q=64, block_k=64))[0])
        naive_peaks.append(peak_memory(lambda: naive_attention(q, k, v))[0])
    flash_ratios = [b / a for a, b in zip(flash_peaks, flash_peaks[1:])]
    naive_ratios = [b / a for a, b in zip(naive_peaks, naive_peaks[1:])]
    assert all(r <= 2.2 for r in flash_ratios), (
        f"flash attention's peak memory grew by {flash_ratios} per doubling of n (bytes {flash_peaks}); "
        "linear growth allows at most ~2"
    )
    assert all(r >= 3.3 for r in naive_ratios), (
        f"naive attention's peak memory grew by {naive_ratios} per doubling of n (bytes {naive_peaks}); "
        "the n x n matrix should make it ~4"
    )
    # The output alone is 1*4*1024*32*4 bytes = 0.5 MiB: flash may hold little beyond it.
    assert flash_peaks[-1] < naive_peaks[-1] / 10, f"flash {flash_peaks[-1]} B vs naive {naive_peaks[-1]} B at n=1024"


def test_online_softmax_steps_end_at_the_softmax():
    torch.manual_seed(1)
    scores = torch.randn(11) * 3
    values = torch.randn(11, 5)
    steps = online_softmax_steps(scores, block_size=4, values=values)
    assert [s.keys for s in steps] == [(0, 4), (4, 8), (8, 11)], f"blocks were {[s.keys for s in steps]}"
    maxima = [s.m for s in steps]
    assert maxima == sorted(maxima), f"the running maximum must never decrease: {maxima}"
    for before, after in zip(steps, steps[1:]):
        assert math.isclose(after.alpha, math.exp(before.m - after.m)), "alpha must be exp(m_old - m_new)"
    last = steps[-1]
    assert math.isclose(last.m, scores.max().item(), rel_tol=1e-6), "final m is not the maximum score"
    expected_l = torch.exp(scores.double() - scores.max().double()).sum().item()
    assert math.isclose(last.l, expected_l, rel_tol=1e-9), f"final l {last.l} != sum exp(s - m) {expected_l}"
    expected_out = torch.softmax(scores.double(), 0) @ values.double()
    assert torch.allclose(last.output, expected_out, atol=1e-12), "acc / l after the last block is not softmax @ V"


def test_online_softmax_steps_with_masked_block_and_bad_input():
    scores = torch.tensor([-math.inf, -math.inf, 1.0, 2.0])
    steps = online_softmax_steps(scores, block_size=2)
    assert steps[0].l == 0.0 and steps[0].m == -math.inf, "a fully masked block must contribute nothing"
    assert math.isclose(steps[-1].l, math.exp(-1) + 1), f"got l={steps[-1].l}"
    with pytest.raises(ValueError, match="1-D"):
        online_softmax_steps(torch.zeros(2, 3), 2)


# --------------------------------------------------------------------------------------------
# Triton kernel
# --------------------------------------------------------------------------------------------


def test_triton_module_imports_and_explains_when_it_cannot_run():
    q = torch.randn(1, 8, 16)
    if flash_triton.triton_available():
        if os.environ.get("TRITON_INTERPRET") == "1":
            pytest.skip("TRITON_INTERPRET=1 in this process: the kernel would run instead of refusing")
        with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
            flash_triton.flash_attention_triton(q, q, q)
    else:
        with pytest.raises(RuntimeError, match="pip install triton"):
            flash_triton.flash_attention_triton(q, q, q)


_INTERPRETER_CHECK = textwrap.dedent("""
    import torch
    from course_utils.bench import naive_attention
    from course_utils.flash_triton import flash_attention_triton
    torch.manual_seed(0)
    cases = [  # lead, T_q, T_k, d, causal
        ((2, 3), 37, 37, 16, True), ((2,), 5, 77, 32, False), ((1, 1), 70, 70, 64, True),
        ((1, 1), 20, 20, 128, False),
    ]
    for lead, n_q, n_k, d, causal in cases:
        q, k, v = torch.randn(*lead, n_q, d), torch.randn(*lead, n_k, d), torch.randn(*lead, n_k, d)
        out, lse = flash_attention_triton(q, k, v, causal=causal, return_lse=True)
        ref = naive_attention(q, k, v, causal=causal)
        err = (out - ref).abs().max().item()
        assert err < 1e-5, f"fp32 triton kernel differs by {err:.2e} for {lead}, {n_q}x{n_k}, d={d}, causal={causal}"
        scores = (q @ k.transpose(-2, -1)) / d ** 0.5
        if causal:
            scores = scores.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool).triu(1), float("-inf"))
        lse_err = (lse - scores.logsumexp(-1)).abs().max().item()
        assert lse_err < 1e-5, f"log-sum-exp differs by {lse_err:.2e}"
    q, k, v = torch.randn(3, 1, 2, 40, 64).unbind(0)
    ref = naive_attention(q, k, v, causal=True)
    for dtype, tol in ((torch.float16, 4e-3), (torch.bfloat16, 3e-2)):
        out = flash_attention_triton(q.to(dtype), k.to(dtype), v.to(dtype), causal=True)
        assert out.dtype == dtype, f"output dtype {out.dtype}, expected {dtype}"
        err = (out.float() - ref).abs().max().item()
        assert err < tol, f"{dtype} triton kernel differs by {err:.2e} (tolerance {tol})"
    print("TRITON-INTERPRETER-OK")
""")


@pytest.mark.skipif(
    not HAS_TRITON, reason="triton is not installed (pip install triton); the interpreter test needs it"
)
def test_triton_kernel_in_the_cpu_interpreter_equals_naive_attention():
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _INTERPRETER_CHECK], cwd=REPO, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0 and "TRITON-INTERPRETER-OK" in proc.stdout, (
        f"the Triton kernel failed under TRITON_INTERPRET=1:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )


@pytest.mark.skipif(not (HAS_CUDA and HAS_TRITON), reason="needs a CUDA GPU and triton")
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_triton_kernel_on_gpu(head_dim, causal, dtype):
    q, k, v = _qkv((2, 4), 333, 333, head_dim, device="cuda")
    ref = naive_attention(q.double(), k.double(), v.double(), causal=causal).float()
    out = flash_triton.flash_attention_triton(q.to(dtype), k.to(dtype), v.to(dtype), causal=causal)
    tol = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
    err = (out.float() - ref).abs().max().item()
    assert err < tol, f"triton kernel on GPU ({dtype}, d={head_dim}, causal={causal}) differs by {err:.2e}"


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("causal", [False, True])
def test_flash_pytorch_on_gpu_bf16(causal):
    q, k, v = _qkv((2, 4), 300, 300, 64, device="cuda")
    ref = naive_attention(q, k, v, causal=causal)
    out = flash_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=causal, block_q=64, block_k=128)
    err = (out.float() - ref).abs().max().item()
    assert err < 3e-2, f"bf16 flash attention on GPU differs from fp32 by {err:.3f}"
