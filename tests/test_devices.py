"""Device mix-ups, caught without a GPU: the library and the chapters run on the meta device as on CUDA.

On a GPU, a tensor made on the CPU that meets one on the GPU is an error; on a CPU-only machine,
where CI runs, the two are one device and the mistake stays hidden until a learner with a GPU meets
it (chapter 04 once did: ``apply_rotary(q, torch.tensor([64]))`` with ``q`` on the GPU). Here the
``meta`` device plays the GPU, with CUDA's rule enforced on every operation
(:class:`device_audit.AcceleratorAudit`):

- every public entry point of the learner's library gets its data on the device and its index,
  position and mask tensors made on the CPU, as a chapter writes them, and must answer on the device;
- every chapter's code runs with ``COURSE_DEVICE=meta`` and no cell may mix devices
  (``tests/test_devices_chapters.py``).
"""

from __future__ import annotations

import importlib

import pytest
import torch
from device_audit import AcceleratorAudit, is_device_mix
from torch import nn

META = torch.device("meta")
B, T, D, H, V = 2, 6, 16, 4, 11


def _ids(*shape):  # token ids on the device (the data), values irrelevant on meta
    return torch.zeros(*shape, dtype=torch.long, device=META)


def _lm(**extra):
    from course_utils.models import DecoderOnlyLM

    return DecoderOnlyLM(V, d_model=D, num_heads=H, num_layers=2, max_len=32, dropout=0.0, **extra).to(META).eval()


def _seq2seq():
    from course_utils.models import Seq2SeqTransformer

    return (
        Seq2SeqTransformer(
            V, V, d_model=D, num_heads=H, num_encoder_layers=1, num_decoder_layers=1, d_ff=32, dropout=0.0, pad_id=0
        )
        .to(META)
        .eval()
    )


def _mha_with_cache():
    from course_utils.attention import KVCache, MultiHeadAttention, causal_mask

    mha = MultiHeadAttention(D, H, dropout=0.0).to(META)
    x = torch.randn(B, T, D, device=META)
    cache = KVCache()
    mha(x, x, x, causal_mask(T), cache=cache)  # a mask made on the CPU, as chapters write it
    mha(x[:, :1], x[:, :1], x[:, :1], cache=cache, need_weights=False, is_causal=True)
    cache.reorder(torch.tensor([1, 0]))  # an index made on the CPU
    return cache.k


def _attention_functions():
    from course_utils import attention

    q = torch.randn(B, H, T, D // H, device=META)
    attention.scaled_dot_product_attention(q, q, q, attention.causal_mask(T))
    attention.fused_attention(q, q, q, attention.causal_mask(T))
    attention.fused_attention(q[:, :, :2], q, q, is_causal=True)
    return attention.naive_attention(q, q, q, causal=True)


def _positional():
    from course_utils import positional

    x = torch.randn(B, T, D, device=META)
    positional.SinusoidalPositionalEncoding(D, 32, dropout=0.0).to(META)(x, offset=3)
    positional.LearnedPositionalEncoding(D, 32, dropout=0.0).to(META)(x, offset=3)
    positional.RotaryEmbedding(D)(x[:, None], offset=2)
    return positional.apply_rotary(x, torch.arange(5, 5 + T))  # positions made on the CPU


def _layers():
    from course_utils import layers
    from course_utils.attention import causal_mask

    x = torch.randn(B, T, D, device=META)
    layers.FeedForward(D, 32, activation="swiglu").to(META)(x)
    layers.EncoderLayer(D, H, 32, rotary=True).to(META)(x, causal_mask(T))
    layers.Encoder(2, D, H, 32, norm_first=True).to(META)(x, is_causal=True)
    decoder = layers.Decoder(1, D, H, 32).to(META)
    caches = decoder.new_caches()
    decoder(x, x, causal_mask(T), caches=caches)
    return decoder(x[:, :1], x, caches=caches, tgt_is_causal=True)


def _language_models():
    from course_utils.models import EncoderOnlyMLM

    for position in ("learned", "sinusoidal", "rope"):
        model = _lm(position=position)
        caches = model.new_caches()
        model(_ids(B, T), caches=caches)
        model(_ids(B, 1), caches=caches)
    _lm(pad_id=0)(_ids(B, T))
    bert = EncoderOnlyMLM(V, d_model=D, num_heads=H, num_layers=1, max_len=32, num_segments=2).to(META)
    return bert(_ids(B, T), segments=_ids(B, T))


def _vision():
    from course_utils.models import SmallResNet, VisionTransformer, patchify

    images = torch.randn(B, 1, 8, 8, device=META)
    patchify(images, 4)
    VisionTransformer(
        img_size=8, patch_size=4, in_channels=1, num_classes=10, d_model=D, num_heads=H, num_layers=1, d_ff=32
    ).to(META)(images)
    return SmallResNet(in_channels=1, num_classes=10).to(META)(images)


def _decoding():
    from course_utils import decoding

    lm = _lm()
    decoding.generate(lm, _ids(B, 3), 4, greedy=True)
    decoding.generate(lm, _ids(B, 3), 2, top_k=3, top_p=0.9, use_cache=False)
    model = _seq2seq()
    src = _ids(B, 5)
    decoding.greedy_decode(model, src, bos_id=1, eos_id=2, max_len=4)
    generated = decoding.beam_search(model, src, bos_id=1, eos_id=2, beam_size=2, max_len=3)
    decoding.sequence_score(model, src, generated, bos_id=1, eos_id=2)
    decoding.filter_logits(torch.randn(B, V, device=META), top_k=3, top_p=0.5)
    return decoding.sequence_log_prob(model, src, generated, bos_id=1, eos_id=2)


def _flash():
    from course_utils import flash

    q = torch.randn(B, H, T, 8, device=META)
    flash.online_softmax_steps(torch.randn(T, device=META), 2, values=torch.randn(T, 3, device=META))
    return flash.flash_attention(q, q, q, causal=True, block_q=4, block_k=4)


def _training():
    from course_utils import training

    model = nn.Linear(D, 3).to(META)
    data = (torch.randn(8, D), torch.zeros(8, dtype=torch.long))  # a data set on the CPU, moved by train()
    training.train(
        model,
        training.supervised_loss(),
        training.make_batches(data, 4),
        torch.optim.SGD(model.parameters(), lr=0.1),
        steps=2,
        device=META,
        progress=False,
    )
    smoothing = training.LabelSmoothingLoss(0.1, exclude=(0,))
    return smoothing(torch.randn(4, 3, device=META), torch.zeros(4, dtype=torch.long, device=META))


# Every public name of the modules below is exercised by one of these, or listed as holding no tensor code.
CALLS = {
    "attention": _attention_functions,
    "attention.KVCache": _mha_with_cache,
    "positional": _positional,
    "layers": _layers,
    "models.language": _language_models,
    "models.vision": _vision,
    "decoding": _decoding,
    "flash": _flash,
    "training": _training,
}
EXERCISED = {
    "attention": {
        "scaled_dot_product_attention",
        "naive_attention",
        "causal_mask",
        "padding_mask",
        "combine_masks",
        "check_mask",
        "check_qkv",
        "KVCache",
        "MultiHeadAttention",
        "fused_attention",
    },
    "positional": {
        "sinusoidal_table",
        "SinusoidalPositionalEncoding",
        "LearnedPositionalEncoding",
        "RotaryEmbedding",
        "apply_rotary",
        "rotary_angles",
    },
    "layers": {
        "FeedForward",
        "EncoderLayer",
        "DecoderLayer",
        "Encoder",
        "Decoder",
        "encoder_stack",
        "run_encoder_stack",
    },
    "models": {
        "TokenEmbedding",
        "Seq2SeqTransformer",
        "TransformerLM",
        "DecoderOnlyLM",
        "EncoderOnlyMLM",
        "PatchEmbedding",
        "patchify",
        "VisionTransformer",
        "ResidualBlock",
        "SmallResNet",
    },
    "decoding": {"greedy_decode", "beam_search", "sequence_log_prob", "sequence_score", "filter_logits", "generate"},
    "flash": {"flash_attention", "online_softmax_steps"},
    "training": {"train", "make_batches", "to_device", "supervised_loss", "LabelSmoothingLoss", "History"},
}
HOLDS_NO_DEVICE_CODE = {
    "attention": {
        "from_torch_key_padding_mask",
        "to_torch_attn_mask",
        "copy_from_torch_mha",
    },  # one input, or copies into
    "positional": {"sinusoidal_shift_matrix"},  # builds a CPU matrix from numbers only
    "layers": {"copy_from_torch_layer", "ACTIVATIONS"},
    "models": {
        "count_parameters",
        "LMConfig",
        "Preset",
        "PRESETS",
        "build_preset",
        "parameter_table",
    },  # a record; build on meta already
    "decoding": {
        "EncoderDecoderModel",
        "LanguageModel",
        "gnmt_length_penalty",
        "best_possible_score",
        "mask_predict",
    },  # protocols and arithmetic on floats; mask_predict loops on values (a while)
    "flash": {"Tile", "OnlineSoftmaxStep"},  # records
    "training": {
        "evaluate_accuracy",
        "evaluate_loss",
        "noam_lr",
        "noam_schedule",
        "warmup_cosine_multiplier",
        "warmup_cosine_schedule",
        "Batches",
    },  # read values back, or schedules of floats
}


def test_every_public_name_is_exercised_or_explained():
    for module, exercised in EXERCISED.items():
        public = set(importlib.import_module(f"course_utils.{module}").__all__)
        unexplained = public - exercised - HOLDS_NO_DEVICE_CODE[module]
        assert not unexplained, f"course_utils.{module}: add {sorted(unexplained)} to CALLS/EXERCISED in this test"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_library_follows_the_data_device(name):
    with AcceleratorAudit(seconds=60):
        out = CALLS[name]()
    assert out.device == META, f"{name} answered on {out.device}, not on the device of its data"


def test_the_audit_catches_what_cuda_refuses():
    # The audit is only worth its name if it refuses what CUDA refuses, even where meta kernels do not.
    from course_utils.positional import rotary_angles

    x = torch.randn(1, 8, device=META)
    angles_on_cpu = rotary_angles(torch.tensor([64]), 16)  # (1, 8) on the CPU: the chapter-04 mistake
    for mix in (
        lambda: x * angles_on_cpu.float(),
        lambda: x @ torch.randn(8, 2),
        lambda: nn.functional.embedding(torch.tensor([0]), torch.randn(3, 8, device=META)),
    ):
        with pytest.raises(RuntimeError) as caught, AcceleratorAudit(seconds=10):
            mix()
        assert is_device_mix(caught.value), caught.value
    with AcceleratorAudit(seconds=10):  # what CUDA accepts: CPU indices, CPU scalars, explicit copies
        x[:, torch.tensor([0, 2])]
        x * torch.tensor(2.0)
        x.cpu()
