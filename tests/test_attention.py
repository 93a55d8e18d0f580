"""Attention against PyTorch as the oracle, plus the properties the chapters rely on."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    check_mask,
    combine_masks,
    copy_from_torch_mha,
    from_torch_key_padding_mask,
    padding_mask,
    scaled_dot_product_attention,
    to_torch_attn_mask,
)

B, T, S, D, H = 3, 7, 5, 32, 4


def _pair(bias=True):
    ours = MultiHeadAttention(D, H, dropout=0.0, bias=bias)
    theirs = nn.MultiheadAttention(D, H, dropout=0.0, bias=bias, batch_first=True)
    return copy_from_torch_mha(ours, theirs), theirs


def test_causal_mask_values():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # With a cache: 2 new queries at positions 3 and 4 of a 5-token sequence.
    assert causal_mask(2, 5).tolist() == [[True, True, True, True, False], [True] * 5]
    with pytest.raises(ValueError, match="n=4 queries and m=2 keys"):
        causal_mask(4, 2)


def test_padding_mask_and_conversions():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    torch_style = tokens == 0  # True = ignore
    assert torch.equal(from_torch_key_padding_mask(torch_style), mask)
    assert torch.equal(to_torch_attn_mask(causal_mask(3)), ~causal_mask(3))
    assert combine_masks(None, None) is None


@pytest.mark.parametrize("use_mask", [False, True])
def test_sdpa_matches_pytorch(use_mask):
    q, k, v = torch.randn(B, H, T, 8), torch.randn(B, H, S, 8), torch.randn(B, H, S, 6)
    mask = torch.rand(B, 1, T, S) > 0.3 if use_mask else None
    if mask is not None:
        mask[..., 0] = True  # no fully masked rows here; those have their own test
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))


def test_sdpa_backward_matches_pytorch():
    q, k, v = (torch.randn(2, H, T, 8, requires_grad=True) for _ in range(3))
    mask = causal_mask(T)
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    grads_ours = torch.autograd.grad(ours.square().sum(), (q, k, v))
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    grads_theirs = torch.autograd.grad(theirs.square().sum(), (q, k, v))
    for a, b in zip(grads_ours, grads_theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = (torch.randn(1, 1, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all(), "a fully masked row must not produce NaN"
    assert torch.equal(out[0, 0, 1], torch.zeros(4)), "a fully masked query's output is the zero vector"
    assert torch.equal(weights[0, 0, 1], torch.zeros(3)), "a fully masked query's weights are all zero"
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v)), "gradients must stay finite"
    # Same convention as PyTorch's SDPA:
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masking", ["none", "causal", "padding"])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_matches_nn_multiheadattention(mode, masking, bias):
    ours, theirs = _pair(bias)
    getattr(ours, mode)(), getattr(theirs, mode)()
    x = torch.randn(B, T, D, requires_grad=True)
    kwargs, mask = {}, None
    if masking == "causal":
        mask = causal_mask(T)
        kwargs["attn_mask"] = to_torch_attn_mask(mask)
    elif masking == "padding":
        ignore = torch.zeros(B, T, dtype=torch.bool)
        ignore[1, -2:] = True
        mask, kwargs["key_padding_mask"] = from_torch_key_padding_mask(ignore), ignore
    out, weights = ours(x, x, x, mask)
    expected, expected_weights = theirs(x, x, x, average_attn_weights=False, **kwargs)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
    (g_ours,) = torch.autograd.grad(out.sum(), x)
    (g_theirs,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(g_ours, g_theirs, atol=1e-5, rtol=1e-4)
    # Parameter gradients too: W_q's gradient is the first third of in_proj_weight's.
    ours.zero_grad(), theirs.zero_grad()
    ours(x, x, x, mask)[0].square().sum().backward()
    theirs(x, x, x, average_attn_weights=False, **kwargs)[0].square().sum().backward()
    torch.testing.assert_close(ours.W_q.weight.grad, theirs.in_proj_weight.grad[:D], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours.W_o.weight.grad, theirs.out_proj.weight.grad, atol=1e-4, rtol=1e-4)


def test_mha_cross_attention_and_fast_path_agree():
    ours, theirs = _pair()
    query, memory = torch.randn(B, T, D), torch.randn(B, S, D)
    out, weights = ours(query, memory, memory)
    assert out.shape == (B, T, D) and weights.shape == (B, H, T, S)
    torch.testing.assert_close(out, theirs(query, memory, memory)[0], atol=1e-5, rtol=1e-5)
    fast, none = ours(query, memory, memory, need_weights=False)
    assert none is None
    torch.testing.assert_close(fast, out, atol=1e-5, rtol=1e-5)


def test_mha_matches_pytorch_sdpa_per_head():
    ours, _ = _pair()
    x = torch.randn(B, T, D)
    q, k, v = (ours.split_heads(proj(x)) for proj in (ours.W_q, ours.W_k, ours.W_v))
    expected = ours.W_o(ours.merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))
    torch.testing.assert_close(ours(x, x, x, causal_mask(T))[0], expected, atol=1e-5, rtol=1e-5)


def test_no_future_leakage_train_and_eval():
    mha = MultiHeadAttention(D, H, dropout=0.0)
    x = torch.randn(2, T, D)
    for mode in ("train", "eval"):
        getattr(mha, mode)()
        i = 3
        changed = x.clone()
        changed[:, i + 1 :] = torch.randn_like(changed[:, i + 1 :])
        a = mha(x, x, x, causal_mask(T))[0]
        b = mha(changed, changed, changed, causal_mask(T))[0]
        torch.testing.assert_close(a[:, : i + 1], b[:, : i + 1])
        assert not torch.allclose(a[:, i + 1 :], b[:, i + 1 :]), "the perturbation must show after position i"


def test_permutation_equivariance_without_positions():
    mha = MultiHeadAttention(D, H, dropout=0.0).eval()
    x = torch.randn(2, T, D)
    perm = torch.randperm(T)
    torch.testing.assert_close(
        mha(x, x, x)[0][:, perm], mha(x[:, perm], x[:, perm], x[:, perm])[0], atol=1e-5, rtol=1e-5
    )


def test_kv_cache_equals_full_recompute():
    mha = MultiHeadAttention(D, H, dropout=0.0).eval()
    x = torch.randn(2, T, D)
    full = mha(x, x, x, causal_mask(T))[0]
    cache = KVCache()
    prefix = mha(x[:, :3], x[:, :3], x[:, :3], causal_mask(3), cache=cache)[0]
    steps = [mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in range(3, T)]
    torch.testing.assert_close(torch.cat([prefix, *steps], dim=1), full, atol=1e-5, rtol=1e-5)
    assert len(cache) == T


def test_static_cache_reuses_encoder_keys():
    mha = MultiHeadAttention(D, H, dropout=0.0).eval()
    memory, q = torch.randn(2, S, D), torch.randn(2, 1, D)
    cache = KVCache(static=True)
    first = mha(q, memory, memory, cache=cache)[0]
    # A second call with different key/value input still uses the cached encoder keys.
    second = mha(q, torch.zeros_like(memory), torch.zeros_like(memory), cache=cache)[0]
    torch.testing.assert_close(first, second)


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (dict(d_model=500, num_heads=8), ValueError, "d_model=500 is not divisible by num_heads=8"),
        (dict(d_model=0, num_heads=8), ValueError, "must be positive"),
    ],
)
def test_mha_constructor_errors(bad, error, words):
    with pytest.raises(error, match=words):
        MultiHeadAttention(**bad)


def test_mha_input_errors_name_the_shapes():
    mha = MultiHeadAttention(D, H)
    x = torch.randn(B, T, D)
    with pytest.raises(ValueError, match=r"last dim 16 but this attention has d_model=32"):
        mha(torch.randn(B, T, 16), x, x)
    with pytest.raises(ValueError, match=r"query must be \(B, T, d_model=32\)"):
        mha(torch.randn(T, D), x, x)
    with pytest.raises(ValueError, match="empty sequence"):
        mha(torch.randn(B, 0, D), x, x)
    with pytest.raises(TypeError, match="must be a bool tensor"):
        mha(x, x, x, mask=torch.ones(T, T))
    with pytest.raises(ValueError, match=r"\(6, 6\) does not broadcast"):
        mha(x, x, x, mask=torch.ones(6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="empty key sequence"):
        scaled_dot_product_attention(torch.randn(1, 2, 4), torch.randn(1, 0, 4), torch.randn(1, 0, 4))
    with pytest.raises(ValueError, match="q has 4, k has 3"):
        scaled_dot_product_attention(torch.randn(2, 4), torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        check_mask(torch.ones(2, 3, dtype=torch.bool), (1, 1, 4, 4))


def test_a_mask_is_accepted_exactly_when_pytorch_broadcasts_it_to_the_scores():
    """check_mask reads the shapes as plain integers (it runs on every attention call); every pair of shapes
    of up to four dimensions of sizes 0, 1, 2, 3 gets PyTorch's own answer."""
    sizes = (0, 1, 2, 3)
    shapes = [shape for rank in range(5) for shape in itertools.product(sizes, repeat=rank)]
    targets = [shape for shape in shapes if len(shape) >= 2]
    for mask_shape in shapes:
        for target in targets:
            try:
                pytorch_says = torch.broadcast_shapes(mask_shape, target) == target
            except RuntimeError:
                pytorch_says = False
            try:
                check_mask(torch.ones(mask_shape, dtype=torch.bool), target)
                accepted = True
            except ValueError:
                accepted = False
            assert accepted == pytorch_says, f"mask {mask_shape} against scores {target}"


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("t_q, past", [(T, 0), (3, 4), (1, 6)])
def test_is_causal_equals_the_causal_mask(need_weights, t_q, past):
    # Square (prefill), a chunk after a cached prefix, and one decode step: is_causal=True must mean
    # causal_mask(T_q, T_k) with the queries as the last T_q positions, whichever kernel runs.
    mha = MultiHeadAttention(D, H, dropout=0.0).eval()
    x = torch.randn(2, past + t_q, D)
    results = []
    for causal in (False, True):
        cache = KVCache()
        if past:
            mha(x[:, :past], x[:, :past], x[:, :past], causal_mask(past), cache=cache)
        new = x[:, past:]
        mask = None if causal else causal_mask(t_q, past + t_q)
        results.append(mha(new, new, new, mask, cache=cache, need_weights=need_weights, is_causal=causal)[0])
    torch.testing.assert_close(results[1], results[0], atol=1e-5, rtol=1e-5)


def test_is_causal_and_a_mask_together_are_refused():
    mha = MultiHeadAttention(D, H, dropout=0.0)
    x = torch.randn(2, T, D)
    with pytest.raises(ValueError, match="either is_causal=True or a mask"):
        mha(x, x, x, causal_mask(T), is_causal=True)


def test_fused_path_passes_no_mask_where_none_is_needed(monkeypatch):
    # SDPA's flash backend takes no attn_mask: a square causal call must reach SDPA as is_causal=True
    # without a tensor, and a single query (a decode step) with neither.
    import course_utils.attention as attention

    seen = []
    real = F.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        seen.append((q.shape[-2], k.shape[-2], attn_mask is None, is_causal))
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", recording)
    mha = MultiHeadAttention(D, H, dropout=0.0).eval()
    x = torch.randn(2, T, D)
    cache = KVCache()
    mha(x[:, :4], x[:, :4], x[:, :4], cache=cache, need_weights=False, is_causal=True)
    mha(x[:, 4:5], x[:, 4:5], x[:, 4:5], cache=cache, need_weights=False, is_causal=True)
    mha(x[:, 5:], x[:, 5:], x[:, 5:], cache=cache, need_weights=False, is_causal=True)
    assert seen == [(4, 4, True, True), (1, 5, True, False), (2, 7, False, False)], seen


def test_kv_cache_grows_by_doubling_and_keeps_its_rows():
    cache = KVCache()
    k = torch.randn(2, H, 3, 8)
    cache.append(k, k + 1)
    assert len(cache) == 3 and cache.capacity == 3
    rows = [k]
    for step in range(9):
        new = torch.randn(2, H, 1, 8)
        rows.append(new)
        keys, values = cache.append(new, new + 1)
        assert keys.shape == (2, H, 4 + step, 8)
    assert cache.capacity == 12  # 3 -> 6 -> 12 for 12 tokens: each row copied about once more on average
    torch.testing.assert_close(cache.k, torch.cat(rows, dim=-2))
    torch.testing.assert_close(cache.v, torch.cat(rows, dim=-2) + 1)
    cache.reorder(torch.tensor([1, 1]))
    torch.testing.assert_close(cache.k, torch.cat(rows, dim=-2)[[1, 1]])
    with pytest.raises(ValueError, match="batch/heads"):
        cache.append(torch.randn(3, H, 1, 8), torch.randn(3, H, 1, 8))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the cuDNN backend exists only there")
def test_decode_steps_stay_off_the_cudnn_backend_on_a_gpu():
    from torch.profiler import ProfilerActivity, profile

    mha = MultiHeadAttention(256, 4, dropout=0.0).cuda().to(torch.bfloat16).eval()
    x = torch.randn(8, 40, 256, device="cuda", dtype=torch.bfloat16)
    cache = KVCache()
    with torch.no_grad():
        mha(x[:, :32], x[:, :32], x[:, :32], cache=cache, need_weights=False, is_causal=True)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for t in range(32, 40):
                mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache, need_weights=False, is_causal=True)
    names = {event.name for event in prof.key_averages()}
    assert not any("cudnn" in name for name in names), sorted(n for n in names if "attention" in n)
