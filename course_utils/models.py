"""Whole models built from :mod:`course_utils.layers`, and presets that match the papers.

- :class:`Seq2SeqTransformer`  encoder-decoder (Vaswani et al., 2017), for translation-like tasks
- :class:`LMConfig`            every setting of a TransformerLM; GPT's and BERT's are presets of it
- :class:`TransformerLM`       one token backbone; ``causal=True`` is GPT, ``causal=False`` is BERT
- :class:`DecoderOnlyLM`       GPT-style next-token model (pre-norm, causal mask, KV cache)
- :class:`EncoderOnlyMLM`      BERT-style masked-language model (post-norm, bidirectional)
- :class:`VisionTransformer`   ViT (Dosovitskiy et al., 2020): patches -> tokens -> encoder
- :class:`SmallResNet`         a residual CNN (He et al., 2015), the convolutional baseline for ViT

Every forward takes token ids (or images) and returns logits; losses live in the training code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import KVCache, causal_mask, combine_masks, padding_mask
from .layers import Decoder, Encoder, encoder_stack, run_encoder_stack
from .positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding

__all__ = [
    "TokenEmbedding",
    "Seq2SeqTransformer",
    "LMConfig",
    "TransformerLM",
    "DecoderOnlyLM",
    "EncoderOnlyMLM",
    "PatchEmbedding",
    "patchify",
    "VisionTransformer",
    "ResidualBlock",
    "SmallResNet",
    "count_parameters",
    "Preset",
    "PRESETS",
    "build_preset",
    "parameter_table",
]


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters, each shared (tied) tensor counted once."""
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def _check_tokens(tokens: torch.Tensor, vocab_size: int, name: str) -> None:
    if tokens.dim() != 2:
        raise ValueError(f"{name} must be token ids of shape (B, T), got shape {tuple(tokens.shape)}")
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must hold integer token ids, got dtype {tokens.dtype}")
    if tokens.shape[1] == 0:
        raise ValueError(f"{name} is an empty sequence (length 0)")
    # The ids' range needs their values: a tensor on the meta device (shapes only) skips this check.
    if tokens.numel() and not tokens.is_meta and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            f"{name} has ids in [{int(tokens.min())}, {int(tokens.max())}] but the vocabulary size is {vocab_size}"
        )


class TokenEmbedding(nn.Module):
    """Token ids -> vectors, multiplied by sqrt(d_model) as in the paper (section 3.4), so that the
    embeddings are not drowned by the position encodings added next."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True, padding_idx: int | None = None):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        self.scale = math.sqrt(d_model) if scale else 1.0

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * self.scale


# --------------------------------------------------------------------------------------------
# Encoder-decoder
# --------------------------------------------------------------------------------------------


class Seq2SeqTransformer(nn.Module):
    """The encoder-decoder Transformer.

    ``forward(src, tgt_in) -> logits``: ``src`` ``(B, S)`` and ``tgt_in`` ``(B, T)`` token ids (the target
    shifted right, starting with BOS); ``logits`` ``(B, T, tgt_vocab_size)``. Padding (``pad_id``) is
    masked out of every attention; the decoder's self-attention is causal.

    For decoding, :meth:`encode` runs once and :meth:`decode` many times (with ``caches`` from
    :meth:`new_caches` it feeds only the newest token each step).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 512,
        activation: str = "relu",
        norm_first: bool = False,
        pad_id: int = 0,
        share_embeddings: bool = False,
        tie_output: bool = True,
    ):
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src {src_vocab_size} and tgt {tgt_vocab_size}"
            )
        self.pad_id = pad_id
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.src_embed = TokenEmbedding(src_vocab_size, d_model)
        self.tgt_embed = self.src_embed if share_embeddings else TokenEmbedding(tgt_vocab_size, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=False)
        if tie_output:
            self.generator.weight = self.tgt_embed.weight
        self._init_weights()

    def _init_weights(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        return padding_mask(src, self.pad_id)  # (B, 1, 1, S)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``src`` ``(B, S)`` -> ``(memory (B, S, d_model), src_mask (B, 1, 1, S))``."""
        _check_tokens(src, self.src_vocab_size, "src")
        src_mask = self.source_mask(src)
        return self.encoder(self.positions(self.src_embed(src)), src_mask), src_mask

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        caches: list[tuple[KVCache, KVCache]] | None = None,
    ) -> torch.Tensor:
        """Target ids ``(B, T)`` -> logits ``(B, T, V)``. With caches, ``tgt`` holds the new tokens only."""
        _check_tokens(tgt, self.tgt_vocab_size, "tgt")
        past = len(caches[0][0]) if caches else 0
        length = tgt.shape[1]
        if past == 0:  # the whole target: causal and padding
            mask = combine_masks(causal_mask(length, device=tgt.device), padding_mask(tgt, self.pad_id))  # (B, 1, T, T)
            is_causal = False
        else:  # new tokens after a cached prefix (no padding there): causal alone, no mask to build
            mask, is_causal = None, True
        x = self.positions(self.tgt_embed(tgt), offset=past)
        return self.generator(self.decoder(x, memory, mask, src_mask, caches, tgt_is_causal=is_causal))

    def new_caches(self) -> list[tuple[KVCache, KVCache]]:
        return self.decoder.new_caches()

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)

    @property
    def max_positions(self) -> int:
        """The longest source or target sequence the position table covers."""
        return self.positions.max_len

    def store_attention(self, on: bool = True) -> None:
        """Keep every layer's last attention weights (``layer.last_cross_attention`` etc.)."""
        self.encoder.store_attention(on)
        self.decoder.store_attention(on)


# --------------------------------------------------------------------------------------------
# One backbone, two objectives
# --------------------------------------------------------------------------------------------


POSITIONS = ("learned", "sinusoidal", "rope", "none")
# The papers' choices, where they differ from LMConfig's defaults or matter to the model (see LMConfig.gpt, .bert).
GPT_SETTINGS = dict(causal=True, norm_first=True, position="learned", activation="gelu")
BERT_SETTINGS = dict(
    causal=False,
    norm_first=False,
    position="learned",
    activation="gelu",
    pad_id=0,
    num_segments=2,
    embedding_norm=True,
    head_transform=True,
    layer_norm_eps=1e-12,
)


@dataclass(frozen=True)
class LMConfig:
    """Every setting of a :class:`TransformerLM`, in one place (as nanoGPT's ``GPTConfig``). A GPT and a BERT
    are presets of it (:meth:`gpt`, :meth:`bert`); any setting can be changed, ``layer_norm_eps`` included.

    ``d_ff=None`` is ``4 * d_model``. ``position`` is ``"learned"``, ``"sinusoidal"``, ``"rope"`` (rotary,
    inside attention) or ``"none"``. ``causal=True``: each token sees only its past (GPT, trained to predict
    the next token); ``causal=False``: the whole sequence (BERT, trained to fill in masked tokens).
    ``scale_embeddings=True`` multiplies the token embeddings by ``sqrt(d_model)`` as in the 2017 paper
    (section 3.4). ``num_segments`` > 0 adds segment embeddings (BERT's sentence A/B), ``embedding_norm`` a
    LayerNorm after the embeddings, ``head_transform`` BERT's dense + GELU + LayerNorm before the vocabulary.
    ``layer_norm_eps`` goes to every LayerNorm (the stack's, the embedding norm, the MLM head's).
    """

    vocab_size: int
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int | None = None
    max_len: int = 512
    dropout: float = 0.1
    causal: bool = True
    activation: str = "gelu"
    norm_first: bool = True
    position: str = "learned"
    pad_id: int | None = None
    num_segments: int = 0
    embedding_norm: bool = False
    head_transform: bool = False
    scale_embeddings: bool = False
    layer_norm_eps: float = 1e-5

    def __post_init__(self):
        if self.position not in POSITIONS:
            raise ValueError(f"position must be learned, sinusoidal, rope or none; got {self.position!r}")

    @property
    def ff_width(self) -> int:
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    @classmethod
    def gpt(cls, *args, **settings) -> "LMConfig":
        """GPT-2's choices: causal, pre-norm, learned positions, GELU, tied output."""
        return cls(*args, **{**GPT_SETTINGS, **settings})

    @classmethod
    def bert(cls, *args, **settings) -> "LMConfig":
        """BERT's choices: bidirectional, post-norm, learned positions and two segments, an embedding LayerNorm,
        the MLM head's transform, padding id 0, LayerNorm epsilon 1e-12 (BERT's own)."""
        return cls(*args, **{**BERT_SETTINGS, **settings})


class TransformerLM(nn.Module):
    """Token embedding + positions + a stack of encoder layers + a tied output projection.

    Built from an :class:`LMConfig` (``TransformerLM(config=...)``) or from its settings, as
    ``TransformerLM(vocab_size, d_model, num_heads, num_layers, ..., causal=False)``; the stack is
    ``model.layers`` and ``model.final_norm`` (:func:`~course_utils.layers.encoder_stack`), the blocks of
    :class:`~course_utils.layers.Encoder`. ``causal`` is the only difference between a GPT and a BERT
    backbone; :class:`DecoderOnlyLM` and :class:`EncoderOnlyMLM` only change the defaults to the papers'.
    The token table starts at std 0.02 (GPT-2's initialisation), so without ``scale_embeddings`` a
    sinusoidal table (entries of size 1) is about 35 times larger than the token vectors it is added to.
    ``forward(tokens, caches=None, segments=None) -> logits (B, T, vocab_size)``.
    """

    defaults: dict = {}  # the settings a subclass presets (GPT_SETTINGS, BERT_SETTINGS)

    def __init__(self, *args, config: LMConfig | None = None, **settings):
        super().__init__()
        if config is None:
            config = LMConfig(*args, **{**self.defaults, **settings})
        elif args or settings:
            raise TypeError("give a TransformerLM either a config or its settings, not both")
        self.config = config
        d_model = config.d_model
        # Made in the order the state dicts of earlier versions list them (the stack first), so that the
        # checkpoints saved by them load and a seed makes the same weights.
        self.layers, self.final_norm = encoder_stack(
            config.num_layers,
            d_model,
            config.num_heads,
            config.ff_width,
            config.dropout,
            config.activation,
            config.norm_first,
            config.layer_norm_eps,
            rotary=config.position == "rope",
        )
        self.token_embedding = nn.Embedding(config.vocab_size, d_model)
        self.embedding_scale = math.sqrt(d_model) if config.scale_embeddings else 1.0
        if config.position == "learned":
            self.positions = LearnedPositionalEncoding(d_model, config.max_len, dropout=0.0)
        elif config.position == "sinusoidal":
            self.positions = SinusoidalPositionalEncoding(d_model, config.max_len, dropout=0.0)
        else:
            self.positions = None
        self.segment_embedding = nn.Embedding(config.num_segments, d_model) if config.num_segments else None
        eps = config.layer_norm_eps
        self.embedding_norm = nn.LayerNorm(d_model, eps=eps) if config.embedding_norm else nn.Identity()
        self.dropout = nn.Dropout(config.dropout)
        # BERT's MLM head passes the hidden state through dense + GELU + LayerNorm before the vocabulary.
        self.head_transform = (
            nn.Sequential(nn.Linear(d_model, d_model), nn.GELU(), nn.LayerNorm(d_model, eps=eps))
            if config.head_transform
            else None
        )
        self.lm_head = nn.Linear(d_model, config.vocab_size, bias=config.head_transform)
        self.lm_head.weight = self.token_embedding.weight  # weight tying (Press & Wolf, 2017)
        # GPT-2's initialisation, drawn in the order the data flows (embeddings, layers, head), so that a
        # seed gives the same weights whatever order the parts were created in.
        for part in (
            self.token_embedding,
            self.positions,
            self.segment_embedding,
            self.layers,
            self.head_transform,
            self.lm_head,
        ):
            if part is not None:
                part.apply(self._init_weights)

    # The settings a model's code reads, from its config.
    vocab_size = property(lambda self: self.config.vocab_size)
    max_len = property(lambda self: self.config.max_len)
    causal = property(lambda self: self.config.causal)
    pad_id = property(lambda self: self.config.pad_id)
    position = property(lambda self: self.config.position)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the position table covers; ``None`` for rotary or no positions (no limit)."""
        return self.max_len if self.position in ("learned", "sinusoidal") else None

    def new_caches(self) -> list[KVCache]:
        if not self.causal:
            raise RuntimeError("a KV cache only makes sense for a causal model (causal=False here)")
        return [KVCache() for _ in self.layers]

    def store_attention(self, on: bool = True) -> None:
        """Keep (or stop keeping) each layer's last attention weights in ``layer.last_self_attention``."""
        for layer in self.layers:
            layer.store_attention = on

    def attention_mask(self, tokens: torch.Tensor, past: int = 0) -> torch.Tensor | None:
        """The mask this model uses: causal and/or key padding, in the course convention."""
        length = tokens.shape[1]
        mask = causal_mask(length, past + length, device=tokens.device) if self.causal else None
        if self.pad_id is not None and past == 0:
            mask = combine_masks(mask, padding_mask(tokens, self.pad_id))
        return mask

    def _attention_arguments(self, tokens: torch.Tensor, past: int) -> tuple[torch.Tensor | None, bool]:
        """``(mask, is_causal)`` for the stack: the same as :meth:`attention_mask`, but a mask that is
        causal and nothing else is passed as ``is_causal=True`` (no tensor), so that the fused kernels
        that take no mask (FlashAttention's) can run. A model whose ``attention_mask`` was replaced (on
        the instance, or in a subclass: chapter 06 builds leaky models that way) gets its own mask."""
        replaced = "attention_mask" in vars(self) or type(self).attention_mask is not TransformerLM.attention_mask
        if self.causal and not replaced and not (self.pad_id is not None and past == 0):
            return None, True
        return self.attention_mask(tokens, past), False

    def hidden_states(
        self, tokens: torch.Tensor, caches: list[KVCache] | None = None, segments: torch.Tensor | None = None
    ) -> torch.Tensor:
        _check_tokens(tokens, self.vocab_size, "tokens")
        past = len(caches[0]) if caches else 0  # tokens already in the cache (the stack checks the count)
        if self.max_positions is not None and past + tokens.shape[1] > self.max_positions:
            raise ValueError(
                f"sequence of {past + tokens.shape[1]} tokens exceeds max_len={self.max_len} of this model"
            )
        x = self.token_embedding(tokens) * self.embedding_scale  # (B, T, d_model)
        if self.positions is not None:
            x = self.positions(x, offset=past)
        if self.segment_embedding is not None:
            x = x + self.segment_embedding(segments if segments is not None else torch.zeros_like(tokens))
        x = self.dropout(self.embedding_norm(x))
        mask, is_causal = self._attention_arguments(tokens, past)
        return run_encoder_stack(self.layers, self.final_norm, x, mask, caches, is_causal)

    def forward(
        self, tokens: torch.Tensor, caches: list[KVCache] | None = None, segments: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = self.hidden_states(tokens, caches, segments)
        if self.head_transform is not None:
            x = self.head_transform(x)
        return self.lm_head(x)


class DecoderOnlyLM(TransformerLM):
    """GPT-style: :class:`TransformerLM` with GPT-2's defaults (``LMConfig.gpt``): causal, pre-norm, learned
    positions, GELU, tied output."""

    defaults = GPT_SETTINGS


class EncoderOnlyMLM(TransformerLM):
    """BERT-style: :class:`TransformerLM` with BERT's defaults (``LMConfig.bert``): bidirectional, post-norm,
    learned positions + segments, embedding LayerNorm, MLM head, LayerNorm epsilon 1e-12."""

    defaults = BERT_SETTINGS


# --------------------------------------------------------------------------------------------
# Vision Transformer
# --------------------------------------------------------------------------------------------


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``(B, C, H, W)`` -> ``(B, N, C*P*P)``: non-overlapping patches in row-major order, each flattened
    channel-first (the order a ``Conv2d`` kernel of size P and stride P reads them in)."""
    if images.dim() != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    _, _, height, width = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not divisible by patch_size={patch_size}")
    patches = F.unfold(images, kernel_size=patch_size, stride=patch_size)  # (B, C*P*P, N)
    return patches.transpose(1, 2)


class PatchEmbedding(nn.Module):
    """Image -> sequence of patch embeddings: a Conv2d with kernel = stride = patch size, which is the
    same as cutting patches, flattening them and applying one shared linear map."""

    def __init__(self, img_size: int = 224, patch_size: int = 16, in_channels: int = 3, embed_dim: int = 768):
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"img_size={img_size} is not divisible by patch_size={patch_size}")
        self.img_size, self.patch_size, self.in_channels = img_size, patch_size, in_channels
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        expected = (self.in_channels, self.img_size, self.img_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(
                f"expected images of shape (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}"
            )
        return self.proj(images).flatten(2).transpose(1, 2)  # (B, D, h, w) -> (B, N, D)


class VisionTransformer(nn.Module):
    """ViT: patch embeddings + [CLS] token + learned positions -> pre-norm encoder -> head on [CLS].

    ``forward(images (B, C, H, W)) -> logits (B, num_classes)``.
    """

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        in_channels: int = 3,
        num_classes: int = 1000,
        d_model: int = 768,
        num_heads: int = 12,
        num_layers: int = 12,
        d_ff: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embedding = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, d_model))
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder(num_layers, d_model, num_heads, d_ff, dropout, "gelu", norm_first=True)
        self.head = nn.Linear(d_model, num_classes)
        nn.init.trunc_normal_(self.pos_embedding, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embed(images)  # (B, N, D)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)  # (B, 1, D)
        x = self.dropout(torch.cat([cls, patches], dim=1) + self.pos_embedding)  # (B, N + 1, D)
        return self.head(self.encoder(x)[:, 0])

    def store_attention(self, on: bool = True) -> None:
        self.encoder.store_attention(on)


# --------------------------------------------------------------------------------------------
# Residual CNN: the convolutional baseline (He et al., 2015)
# --------------------------------------------------------------------------------------------


class ResidualBlock(nn.Module):
    """The "basic block" of He et al. (2015), https://arxiv.org/abs/1512.03385, figure 2:

        out = ReLU( BN(conv3x3(ReLU(BN(conv3x3(x))))) + shortcut(x) )

    ``shortcut`` is the identity when the shape is kept, and a strided 1x1 convolution with
    BatchNorm when the block halves the resolution (``stride=2``) or changes the width (the paper's
    option B). ``(B, C_in, H, W) -> (B, C_out, H / stride, W / stride)``.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride must be 1 or 2, got {stride}")
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch = F.relu(self.bn1(self.conv1(x)))
        branch = self.bn2(self.conv2(branch))
        return F.relu(branch + self.shortcut(x))


class SmallResNet(nn.Module):
    """A ResNet for small images, laid out like the CIFAR networks of He et al. (2015), section 4.2.

    A 3x3 convolution stem (BatchNorm, ReLU), then one stage per entry of ``widths``: the first
    stage keeps the resolution, each later one starts with a stride-2 block (half the resolution,
    more channels); ``blocks_per_stage`` :class:`ResidualBlock` per stage; global average pooling
    and one linear classifier. ``forward(images (B, C, H, W)) -> logits (B, num_classes)``.

    The default, ``widths=(16, 32)`` with one block per stage on 1 x 8 x 8 digits, has 19,706
    parameters, about as many as chapter 09's digit ViT.
    """

    def __init__(
        self, in_channels: int = 1, num_classes: int = 10, widths: tuple[int, ...] = (16, 32), blocks_per_stage: int = 1
    ):
        super().__init__()
        if not widths or blocks_per_stage < 1:
            raise ValueError(
                f"need at least one stage and one block per stage, got widths={widths}, "
                f"blocks_per_stage={blocks_per_stage}"
            )
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        blocks, channels = [], widths[0]
        for stage, width in enumerate(widths):
            for index in range(blocks_per_stage):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(ResidualBlock(channels, width, stride))
                channels = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.blocks(self.stem(images))  # (B, widths[-1], H', W')
        return self.head(features.mean(dim=(2, 3)))  # global average pooling -> (B, num_classes)


# --------------------------------------------------------------------------------------------
# Presets: the published configurations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    """A published configuration and the parameter count its paper reports."""

    name: str
    builder: type
    kwargs: dict
    published: float  # parameters, as printed in the paper
    source: str
    note: str = ""
    checkpoint: int | None = None  # exact count of the released weights, where they were released

    def build(self, device: str | torch.device = "meta") -> nn.Module:
        """Instantiate; on the ``meta`` device (the default) no memory is allocated, so even the
        213M-parameter model is counted in milliseconds."""
        with torch.device(device):
            return self.builder(**self.kwargs)


PRESETS: dict[str, Preset] = {
    "transformer-base": Preset(
        "transformer-base",
        Seq2SeqTransformer,
        dict(
            src_vocab_size=37000,
            tgt_vocab_size=37000,
            d_model=512,
            num_heads=8,
            num_encoder_layers=6,
            num_decoder_layers=6,
            d_ff=2048,
            dropout=0.1,
            share_embeddings=True,
        ),
        65e6,
        "Vaswani et al. 2017, Table 3 (base)",
        "37k shared BPE vocabulary; input, output embeddings and softmax weights tied",
    ),
    "transformer-big": Preset(
        "transformer-big",
        Seq2SeqTransformer,
        dict(
            src_vocab_size=37000,
            tgt_vocab_size=37000,
            d_model=1024,
            num_heads=16,
            num_encoder_layers=6,
            num_decoder_layers=6,
            d_ff=4096,
            dropout=0.3,
            share_embeddings=True,
        ),
        213e6,
        "Vaswani et al. 2017, Table 3 (big)",
        "37k shared BPE vocabulary; tied embeddings",
    ),
    "bert-base": Preset(
        "bert-base",
        EncoderOnlyMLM,
        dict(vocab_size=30522, d_model=768, num_heads=12, num_layers=12, d_ff=3072, max_len=512, num_segments=2),
        110e6,
        "Devlin et al. 2019, section 3",
        "WordPiece 30,522; ours has the MLM head (622k parameters) instead of the NSP pooler (590k)",
        checkpoint=109_482_240,
    ),
    "gpt2-small": Preset(
        "gpt2-small",
        DecoderOnlyLM,
        dict(vocab_size=50257, d_model=768, num_heads=12, num_layers=12, d_ff=3072, max_len=1024),
        117e6,
        "Radford et al. 2019, Table 2",
        "the paper's 117M (like its 345M, 762M, 1542M) is the count with GPT-1's 40,478-token vocabulary; "
        "the released checkpoint has 124,439,808",
        checkpoint=124_439_808,
    ),
    "vit-b16": Preset(
        "vit-b16",
        VisionTransformer,
        dict(
            img_size=224,
            patch_size=16,
            in_channels=3,
            num_classes=1000,
            d_model=768,
            num_heads=12,
            num_layers=12,
            d_ff=3072,
        ),
        86e6,
        "Dosovitskiy et al. 2021, Table 1 (ViT-Base)",
        "224x224 input, ImageNet-1k head",
        checkpoint=86_567_656,
    ),
}


def build_preset(name: str, device: str | torch.device = "meta") -> nn.Module:
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; choose from {sorted(PRESETS)}")
    return PRESETS[name].build(device)


def parameter_table() -> list[dict]:
    """One row per preset: ours vs the paper's count and the relative difference."""
    rows = []
    for preset in PRESETS.values():
        ours = count_parameters(preset.build("meta"))
        rows.append(
            dict(
                model=preset.name,
                ours=ours,
                published=preset.published,
                checkpoint=preset.checkpoint,
                relative_difference=(ours - preset.published) / preset.published,
                source=preset.source,
                note=preset.note,
            )
        )
    return rows
