import pytest
import torch
from torch import nn

from course_utils.layers import Encoder
from course_utils.models import (
    PRESETS,
    DecoderOnlyLM,
    EncoderOnlyMLM,
    LMConfig,
    PatchEmbedding,
    ResidualBlock,
    Seq2SeqTransformer,
    SmallResNet,
    TransformerLM,
    VisionTransformer,
    build_preset,
    count_parameters,
    parameter_table,
    patchify,
)


def test_parameter_counts_match_the_papers(capsys):
    rows = parameter_table()
    print("\nmodel              ours          paper    released     diff vs paper")
    for r in rows:
        released = f"{r['checkpoint'] / 1e6:8.2f}M" if r["checkpoint"] else "       -"
        print(
            f"{r['model']:16s} {r['ours'] / 1e6:8.2f}M {r['published'] / 1e6:8.0f}M {released} "
            f"{100 * r['relative_difference']:+8.2f}%"
        )
    for r in rows:
        if r["checkpoint"]:
            # Where the weights were released, the count must agree to within 0.1%.
            assert abs(r["ours"] - r["checkpoint"]) / r["checkpoint"] < 1e-3, r
        else:
            # The 2017 paper rounds to millions and does not give its exact vocabulary: allow 5%.
            assert abs(r["relative_difference"]) < 0.05, r
    with pytest.raises(KeyError, match="unknown preset 'gpt5'"):
        build_preset("gpt5")


def test_exact_counts_for_released_checkpoints():
    assert count_parameters(build_preset("gpt2-small")) == 124_439_808
    assert count_parameters(build_preset("vit-b16")) == 86_567_656


def test_bert_base_note_states_the_head_and_pooler_counts_in_order():
    bert = build_preset("bert-base")
    d = 768
    mlm_head = count_parameters(bert.head_transform) + bert.lm_head.bias.numel()  # dense + LayerNorm + vocab bias
    pooler = d * d + d  # BERT's NSP pooler: dense d -> d
    assert (mlm_head, pooler) == (622_650, 590_592)
    assert count_parameters(bert) - PRESETS["bert-base"].checkpoint == mlm_head - pooler, (
        "ours = the released checkpoint (with pooler) - pooler + MLM head"
    )
    note = PRESETS["bert-base"].note
    assert note.index("622k") < note.index("590k") and note.index("MLM head") < note.index("NSP pooler"), note


def _lm_cache_check(model, tokens):
    model.eval()
    full = model(tokens)
    caches = model.new_caches()
    pieces = [model(tokens[:, :3], caches)] + [model(tokens[:, t : t + 1], caches) for t in range(3, tokens.shape[1])]
    torch.testing.assert_close(torch.cat(pieces, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "none"])
def test_decoder_only_cached_equals_full(position):
    model = DecoderOnlyLM(40, 32, 4, 2, max_len=32, dropout=0.0, position=position)
    _lm_cache_check(model, torch.randint(0, 40, (2, 9)))


def test_decoder_only_has_no_future_leak_in_train_and_eval():
    model = DecoderOnlyLM(40, 32, 4, 2, max_len=32, dropout=0.0)
    tokens = torch.randint(0, 40, (2, 10))
    changed = tokens.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 40
    for mode in ("train", "eval"):
        getattr(model, mode)()
        torch.testing.assert_close(model(tokens)[:, :6], model(changed)[:, :6])


def test_encoder_only_sees_both_directions():
    model = EncoderOnlyMLM(40, 32, 4, 2, max_len=32, dropout=0.0).eval()
    tokens = torch.randint(1, 40, (2, 10))
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 39 + 1
    assert not torch.allclose(model(tokens)[:, 0], model(changed)[:, 0]), "BERT's first token must see the last"
    with pytest.raises(RuntimeError, match="causal"):
        model.new_caches()


def test_gpt_and_bert_share_one_backbone():
    gpt = TransformerLM(50, 32, 4, 2, causal=True)
    bert = TransformerLM(50, 32, 4, 2, causal=False)
    assert [p.shape for p in gpt.parameters()] == [p.shape for p in bert.parameters()]


# The names under which the language models' weights have always been saved (layers.<i>.<LAYER_KEYS>, then
# these): a checkpoint of an earlier version loads only while they stay.
LAYER_KEYS = [
    f"{part}.{kind}"
    for part in ("self_attn.W_q", "self_attn.W_k", "self_attn.W_v", "self_attn.W_o", "ffn.linear1", "ffn.linear2")
    + ("norm1", "norm2")
    for kind in ("weight", "bias")
]
GPT_KEYS = ["final_norm.weight", "final_norm.bias", "token_embedding.weight", "positions.pos_embedding.weight"]
GPT_KEYS += ["lm_head.weight"]
BERT_KEYS = ["token_embedding.weight", "positions.pos_embedding.weight", "segment_embedding.weight"]
BERT_KEYS += ["embedding_norm.weight", "embedding_norm.bias", "head_transform.0.weight", "head_transform.0.bias"]
BERT_KEYS += ["head_transform.2.weight", "head_transform.2.bias", "lm_head.weight", "lm_head.bias"]


def test_language_models_are_built_from_one_config_and_hold_the_encoder_stack():
    # A GPT and a BERT are one TransformerLM with a config's settings; they hold an encoder's blocks
    # (layers, final_norm) instead of being an Encoder, under the names their checkpoints have always had.
    model = TransformerLM(50, 32, 4, 2, position="rope", layer_norm_eps=1e-6)
    assert not isinstance(model, Encoder) and len(model.layers) == 2
    assert model.config == LMConfig(50, 32, 4, 2, position="rope", layer_norm_eps=1e-6)
    assert set(Encoder(2, 32, 4, 128, norm_first=True).state_dict()) < set(model.state_dict())
    assert {m.eps for m in model.modules() if isinstance(m, nn.LayerNorm)} == {1e-6}
    assert all(layer.self_attn.rotary is not None for layer in model.layers), "position='rope' reaches every layer"
    assert model.max_positions is None and DecoderOnlyLM(50, 32, 4, 1, max_len=16).max_positions == 16
    gpt, bert = DecoderOnlyLM(50, 16, 2, 2, max_len=8), EncoderOnlyMLM(50, 16, 2, 2, max_len=8)
    assert gpt.config == LMConfig.gpt(50, 16, 2, 2, max_len=8) and bert.config == LMConfig.bert(50, 16, 2, 2, max_len=8)
    stack = [f"layers.{i}.{key}" for i in range(2) for key in LAYER_KEYS]
    assert list(gpt.state_dict()) == stack + GPT_KEYS
    assert list(bert.state_dict()) == stack + BERT_KEYS
    # BERT's LayerNorm epsilon is its own (1e-12), and like any setting it can be changed.
    assert {m.eps for m in bert.modules() if isinstance(m, nn.LayerNorm)} == {1e-12}
    bert_eps = EncoderOnlyMLM(50, 16, 2, 1, layer_norm_eps=1e-6)
    assert {m.eps for m in bert_eps.modules() if isinstance(m, nn.LayerNorm)} == {1e-6}
    same = TransformerLM(config=gpt.config)
    same.load_state_dict(gpt.state_dict())
    tokens = torch.randint(0, 50, (2, 8))
    torch.testing.assert_close(same.eval()(tokens), gpt.eval()(tokens))
    with pytest.raises(TypeError, match="unexpected keyword argument 'layer_norm_epsilon'"):
        DecoderOnlyLM(50, layer_norm_epsilon=1e-6)
    with pytest.raises(TypeError, match="either a config or its settings"):
        TransformerLM(config=gpt.config, dropout=0.0)
    with pytest.raises(ValueError, match="position must be"):
        LMConfig(50, position="alibi")


def test_seq2seq_shapes_cache_and_padding():
    model = Seq2SeqTransformer(30, 40, 32, 4, 2, 2, 64, dropout=0.0).eval()
    src = torch.randint(1, 30, (2, 7))
    src[1, -3:] = 0
    tgt = torch.randint(1, 40, (2, 5))
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 40)
    memory, src_mask = model.encode(src)
    caches = model.new_caches()
    steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, caches) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, 1), logits, atol=1e-5, rtol=1e-5)
    # Changing a padded source token must not change anything.
    src2 = src.clone()
    src2[1, -1] = 0
    src2[1, -2] = 0
    torch.testing.assert_close(model(src2, tgt), logits)


def test_token_errors_name_the_problem():
    model = DecoderOnlyLM(10, 16, 2, 1, max_len=8)
    with pytest.raises(ValueError, match=r"ids in \[0, 12\] but the vocabulary size is 10"):
        model(torch.tensor([[0, 12]]))
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="integer token ids"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="empty sequence"):
        model(torch.zeros(1, 0, dtype=torch.long))


def test_patch_embedding_conv_equals_unfold_linear():
    embed = PatchEmbedding(img_size=8, patch_size=4, in_channels=3, embed_dim=10)
    images = torch.randn(2, 3, 8, 8)
    weight = embed.proj.weight.reshape(10, -1)  # (D, C*P*P)
    expected = patchify(images, 4) @ weight.T + embed.proj.bias
    torch.testing.assert_close(embed(images), expected, atol=1e-5, rtol=1e-5)
    assert embed.num_patches == 4
    with pytest.raises(ValueError, match="not divisible by patch_size=5"):
        PatchEmbedding(img_size=8, patch_size=5)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, 8, 8\)"):
        embed(torch.randn(2, 1, 8, 8))


def test_vit_forward_and_gradients():
    vit = VisionTransformer(
        img_size=8, patch_size=4, in_channels=1, num_classes=10, d_model=32, num_heads=4, num_layers=2
    )
    logits = vit(torch.randn(3, 1, 8, 8))
    assert logits.shape == (3, 10)
    logits.sum().backward()
    missing = [n for n, p in vit.named_parameters() if p.grad is None]
    assert not missing, f"no gradient reached {missing}"


def test_presets_cover_the_issue_list():
    assert {"transformer-base", "transformer-big", "bert-base", "gpt2-small", "vit-b16"} <= set(PRESETS)


def test_small_resnet_shapes_parameters_and_shortcuts():
    model = SmallResNet()
    assert count_parameters(model) == 19_706, "the digit ResNet should stay the size chapter 09 compares with"
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 10)
    assert model(torch.randn(2, 1, 12, 12)).shape == (2, 10), "global average pooling accepts any image size"
    kept, halved = model.blocks[0], model.blocks[1]
    assert isinstance(kept.shortcut, torch.nn.Identity), "a block that keeps the shape has an identity shortcut"
    assert halved(torch.randn(2, 16, 8, 8)).shape == (2, 32, 4, 4), "a stride-2 block halves H, W and widens"
    cifar = SmallResNet(in_channels=3, widths=(32, 64, 128), blocks_per_stage=2)
    assert cifar(torch.randn(2, 3, 32, 32)).shape == (2, 10) and len(cifar.blocks) == 6


def test_residual_block_adds_its_input():
    block = ResidualBlock(4, 4).eval()
    torch.nn.init.zeros_(block.bn2.weight)  # branch switched off: the block is ReLU(x)
    x = torch.randn(2, 4, 5, 5)
    torch.testing.assert_close(block(x), torch.relu(x))
    with pytest.raises(ValueError, match="stride must be 1 or 2"):
        ResidualBlock(4, 4, stride=3)
    with pytest.raises(ValueError, match="at least one stage"):
        SmallResNet(widths=())


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_causal_models_pass_is_causal_instead_of_a_mask(position):
    # Without padding a causal model's mask is exactly causal_mask(T): the stack gets is_causal=True and
    # no tensor (so that SDPA's flash backend can take it on a GPU), with the same result as the mask.
    model = DecoderOnlyLM(20, d_model=32, num_heads=4, num_layers=2, max_len=16, dropout=0.0, position=position).eval()
    tokens = torch.randint(0, 20, (3, 10))
    assert model._attention_arguments(tokens, past=0) == (None, True)
    for layer in model.layers:
        layer.store_attention = False
    fused = model(tokens)
    x = model.token_embedding(tokens) * model.embedding_scale
    if model.positions is not None:
        x = model.positions(x)
    reference = model.lm_head(Encoder.forward(model, model.embedding_norm(x), model.attention_mask(tokens)))
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)
    padded = DecoderOnlyLM(20, d_model=32, num_heads=4, num_layers=1, max_len=16, pad_id=0)
    mask, is_causal = padded._attention_arguments(tokens, past=0)
    assert mask is not None and not is_causal  # padding needs the tensor
    leaky = torch.ones(10, 10, dtype=torch.bool)
    model.attention_mask = lambda tokens, past=0: leaky  # a replaced mask is the one used
    assert model._attention_arguments(tokens, past=0) == (leaky, False)
