"""Our encoder/decoder layers against nn.TransformerEncoderLayer / nn.TransformerDecoderLayer."""

import pytest
import torch
from torch import nn

from course_utils.attention import causal_mask, from_torch_key_padding_mask
from course_utils.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    copy_from_torch_layer,
)

B, T, S, D, H, FF = 2, 6, 5, 32, 4, 64


def _pad(length, pad_last):
    ignore = torch.zeros(B, length, dtype=torch.bool)
    ignore[1, length - pad_last :] = True  # True = ignore, PyTorch's convention
    return ignore


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_pytorch(norm_first, mode, activation):
    theirs = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    ours = copy_from_torch_layer(EncoderLayer(D, H, FF, 0.0, activation, norm_first), theirs)
    getattr(ours, mode)(), getattr(theirs, mode)()
    x = torch.randn(B, T, D, requires_grad=True)
    ignore = _pad(T, 2)
    out = ours(x, from_torch_key_padding_mask(ignore))
    # PyTorch's eval fast path zeroes padded positions' outputs; compare the real tokens only.
    expected = theirs(x, src_key_padding_mask=ignore)
    keep = ~ignore
    torch.testing.assert_close(out[keep], expected[keep], atol=1e-5, rtol=1e-5)
    if mode == "train":
        (g1,) = torch.autograd.grad(out[keep].sum(), x)
        (g2,) = torch.autograd.grad(expected[keep].sum(), x)
        torch.testing.assert_close(g1, g2, atol=1e-5, rtol=1e-4)
    # Causal mask too (no padding):
    torch.testing.assert_close(
        ours(x, causal_mask(T)), theirs(x, src_mask=~causal_mask(T), is_causal=False), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_decoder_layer_matches_pytorch(norm_first, mode):
    theirs = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = copy_from_torch_layer(DecoderLayer(D, H, FF, 0.0, "relu", norm_first), theirs)
    getattr(ours, mode)(), getattr(theirs, mode)()
    x = torch.randn(B, T, D, requires_grad=True)
    memory = torch.randn(B, S, D, requires_grad=True)
    memory_ignore = _pad(S, 2)
    out = ours(x, memory, causal_mask(T), from_torch_key_padding_mask(memory_ignore))
    expected = theirs(x, memory, tgt_mask=~causal_mask(T), memory_key_padding_mask=memory_ignore)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    g1 = torch.autograd.grad(out.square().sum(), (x, memory))
    g2 = torch.autograd.grad(expected.square().sum(), (x, memory))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_dropout_is_active_in_train_and_off_in_eval():
    layer = EncoderLayer(D, H, FF, dropout=0.5)
    x = torch.randn(B, T, D)
    layer.train()
    assert not torch.allclose(layer(x), layer(x)), "dropout should make two train-mode passes differ"
    layer.eval()
    torch.testing.assert_close(layer(x), layer(x))


@pytest.mark.parametrize(
    "activation, expected",
    [
        ("relu", 2 * D * FF + FF + D),
        ("gelu", 2 * D * FF + FF + D),
        ("swiglu", 3 * D * FF + 2 * FF + D),
    ],
)
def test_feed_forward_parameter_counts(activation, expected):
    ffn = FeedForward(D, FF, activation=activation)
    assert sum(p.numel() for p in ffn.parameters()) == expected
    assert ffn(torch.randn(B, T, D)).shape == (B, T, D)


def test_feed_forward_rejects_unknown_activation():
    with pytest.raises(ValueError, match="activation must be one of"):
        FeedForward(D, FF, activation="tanh")


def test_gradient_reaches_every_parameter():
    enc, dec = Encoder(2, D, H, FF, 0.0), Decoder(2, D, H, FF, 0.0, norm_first=True)
    src, tgt = torch.randn(B, S, D), torch.randn(B, T, D)
    dec(tgt, enc(src), causal_mask(T)).sum().backward()
    for name, p in [*enc.named_parameters(), *dec.named_parameters()]:
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reached {name}"


def test_decoder_stack_cache_equals_full():
    dec = Decoder(2, D, H, FF, 0.0).eval()
    memory, tgt = torch.randn(B, S, D), torch.randn(B, T, D)
    full = dec(tgt, memory, causal_mask(T))
    caches = dec.new_caches()
    steps = [dec(tgt[:, t : t + 1], memory, None, None, caches) for t in range(T)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_copy_rejects_mismatches():
    with pytest.raises(TypeError, match="cannot copy TransformerDecoderLayer into EncoderLayer"):
        copy_from_torch_layer(EncoderLayer(D, H, FF), nn.TransformerDecoderLayer(D, H, FF, batch_first=True))
    with pytest.raises(ValueError, match="shape mismatch"):
        copy_from_torch_layer(EncoderLayer(D, H, FF), nn.TransformerEncoderLayer(D, H, 2 * FF, batch_first=True))


def test_encoder_stack_cache_equals_full_under_a_causal_mask():
    # The same stack serves BERT (no cache) and GPT (a cache per layer, one new token per step).
    enc = Encoder(2, D, H, FF, 0.0, norm_first=True, rotary=True).eval()
    x = torch.randn(B, T, D)
    full = enc(x, causal_mask(T))
    caches = enc.new_caches()
    steps = [enc(x[:, t : t + 1], causal_mask(1, t + 1), caches) for t in range(T)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert [len(cache) for cache in caches] == [T, T], "every layer caches one key and value per token"
    with pytest.raises(ValueError, match="got 1 caches for 2 layers"):
        enc(x, causal_mask(T), caches[:1])


def test_stack_options_reach_every_layer():
    enc = Encoder(3, D, H, FF, norm_first=True, layer_norm_eps=1e-12, rotary=True)
    dec = Decoder(2, D, H, FF, norm_first=True, layer_norm_eps=1e-6)
    assert {m.eps for m in enc.modules() if isinstance(m, nn.LayerNorm)} == {1e-12}, "eps of every LayerNorm"
    assert {m.eps for m in dec.modules() if isinstance(m, nn.LayerNorm)} == {1e-6}
    assert all(layer.self_attn.rotary is not None for layer in enc.layers), "rotary=True puts RoPE in every layer"
    assert Encoder(1, D, H, FF).layers[0].self_attn.rotary is None


def test_store_attention_switches_every_layer_of_a_stack():
    enc, dec = Encoder(2, D, H, FF, 0.0), Decoder(2, D, H, FF, 0.0)
    src, tgt = torch.randn(B, S, D), torch.randn(B, T, D)
    enc.store_attention(True), dec.store_attention(True)
    dec(tgt, enc(src), causal_mask(T))
    assert all(layer.last_self_attention.shape == (B, H, S, S) for layer in enc.layers)
    assert all(layer.last_cross_attention.shape == (B, H, T, S) for layer in dec.layers)
    enc.store_attention(False), dec.store_attention(False)
    dec(tgt, enc(src), causal_mask(T))
    assert all(not layer.store_attention and layer.last_self_attention is None for layer in [*enc.layers, *dec.layers])
