"""Turning a trained model into sequences: greedy decoding, beam search, sampling, with a KV cache.

Three kinds of model are supported, the first two described by a small protocol (any object with these works):

- :class:`EncoderDecoderModel` (:class:`~course_utils.models.Seq2SeqTransformer`): ``encode(src) ->
  (memory, src_mask)``, ``decode(tgt, memory, src_mask, caches=None) -> logits``, ``new_caches()``,
  ``pad_id`` and ``max_positions``; used by :func:`greedy_decode` and :func:`beam_search`.
- :class:`LanguageModel` (:class:`~course_utils.models.TransformerLM`, ``DecoderOnlyLM``):
  ``model(tokens, caches=None) -> logits``, ``new_caches()`` and ``max_positions``; used by
  :func:`generate`.
- a **bidirectional** model (``TransformerLM(causal=False)``, BERT-style): ``model(tokens) -> logits``;
  used by :func:`mask_predict`, which fills masks instead of appending tokens (no cache is possible).

With ``use_cache=True`` every step feeds only the newest token and reuses the keys and values of the
earlier ones (:class:`~course_utils.attention.KVCache`); with ``use_cache=False`` every step runs the
whole prefix again. Both give the same tokens (the tests check it): the cache only saves work.

All functions switch the model to ``eval()`` (no dropout) for the call, restore its mode afterwards,
and run without gradients.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Callable, Protocol, runtime_checkable

import torch
from torch import nn

from .attention import KVCache

__all__ = [
    "EncoderDecoderModel",
    "LanguageModel",
    "greedy_decode",
    "beam_search",
    "gnmt_length_penalty",
    "best_possible_score",
    "sequence_log_prob",
    "sequence_score",
    "filter_logits",
    "generate",
    "mask_predict",
]


@runtime_checkable
class EncoderDecoderModel(Protocol):
    """What greedy decoding and beam search need of an encoder-decoder model.

    ``max_positions`` is the longest target the decoder can encode (``None``: no limit); ``pad_id``
    fills the positions after a sequence's ``<eos>``. Calling the model, ``model(src, tgt_in)``, is
    teacher forcing (:func:`sequence_log_prob`). ``train``/``eval`` as on any ``nn.Module``.
    """

    pad_id: int
    training: bool

    @property
    def max_positions(self) -> int | None: ...

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        caches: list[tuple[KVCache, KVCache]] | None = None,
    ) -> torch.Tensor: ...

    def new_caches(self) -> list[tuple[KVCache, KVCache]]: ...

    def __call__(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor: ...

    def train(self, mode: bool = True): ...

    def eval(self): ...


@runtime_checkable
class LanguageModel(Protocol):
    """What :func:`generate` needs of a decoder-only model: ``model(tokens, caches=None) -> logits``,
    ``new_caches()`` and ``max_positions`` (the longest sequence it can encode; ``None``: no limit)."""

    training: bool

    @property
    def max_positions(self) -> int | None: ...

    def new_caches(self) -> list[KVCache]: ...

    def __call__(self, tokens: torch.Tensor, caches: list[KVCache] | None = None) -> torch.Tensor: ...

    def train(self, mode: bool = True): ...

    def eval(self): ...


def _check_model(model, protocol: type, needs: str) -> None:
    if not isinstance(model, protocol):
        raise TypeError(
            f"{type(model).__name__} does not follow the {protocol.__name__} protocol of "
            f"course_utils.decoding: the model needs {needs}"
        )


def _check_encoder_decoder(model) -> None:
    _check_model(model, EncoderDecoderModel, "encode(), decode(), new_caches(), pad_id and max_positions")


@contextmanager
def _inference(model: EncoderDecoderModel | LanguageModel):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _check_src(src: torch.Tensor) -> None:
    if not isinstance(src, torch.Tensor) or src.dim() != 2:
        raise ValueError(f"src must be a (B, S) tensor of token ids, got {getattr(src, 'shape', type(src))}")


def _check_at_least_one(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _check_decoder_room(model: EncoderDecoderModel, max_len: int) -> None:
    limit = model.max_positions
    # The decoder reads BOS plus max_len - 1 generated tokens.
    if limit is not None and max_len > limit:
        raise ValueError(f"max_len={max_len} exceeds the {limit} positions the model's decoder can encode")


def _reorder(caches: list[tuple[KVCache, KVCache]], rows: torch.Tensor) -> None:
    for self_cache, cross_cache in caches:
        self_cache.reorder(rows)
        cross_cache.reorder(rows)


# --------------------------------------------------------------------------------------------
# Encoder-decoder: greedy and beam search
# --------------------------------------------------------------------------------------------


def greedy_decode(
    model: EncoderDecoderModel,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    use_cache: bool = True,
    pad_id: int | None = None,
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Pick the most probable next token at every step.

    Args:
        src: ``(B, S)`` source ids.
        max_len: the most tokens to generate per sequence (``<eos>`` included).

    Returns:
        ``(B, T)`` generated ids without the leading ``<bos>``, ``T <= max_len``. A sequence ends with
        its ``<eos>``; positions after it hold ``pad_id`` (default: ``model.pad_id``). The loop stops
        as soon as every sequence has ended. With ``return_logits`` also the ``(B, T, V)`` logits of
        every step.
    """
    _check_encoder_decoder(model)
    _check_src(src)
    _check_at_least_one("max_len", max_len)
    _check_decoder_room(model, max_len)
    pad = model.pad_id if pad_id is None else pad_id
    with _inference(model):
        memory, src_mask = model.encode(src)  # (B, S, d_model), (B, 1, 1, S)
        batch = src.shape[0]
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        caches = model.new_caches() if use_cache else None
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        all_logits = []
        for _ in range(max_len):
            step_input = tokens[:, -1:] if use_cache else tokens
            logits = model.decode(step_input, memory, src_mask, caches)[:, -1]  # (B, V)
            next_token = logits.argmax(-1).masked_fill(finished, pad)  # (B,)
            all_logits.append(logits)
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)
            finished |= next_token == eos_id
            if finished.all():
                break
    generated = tokens[:, 1:]
    return (generated, torch.stack(all_logits, dim=1)) if return_logits else generated


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normalisation (Wu et al. 2016), used with alpha = 0.6 by the Transformer paper:
    ``lp = ((5 + length) / 6) ** alpha``; a hypothesis scores ``log P / lp``. ``alpha = 0``: plain log P."""
    return ((5.0 + length) / 6.0) ** alpha


def best_possible_score(log_p: float, max_len: int, alpha: float) -> float:
    """The best normalised score that a live hypothesis with log-probability ``log_p`` can still reach.

    Extending a hypothesis only lowers ``log P`` (every factor is a probability <= 1), and the GNMT
    penalty grows with the length, so for ``log_p <= 0`` the best it can end with is ``log_p`` divided
    by the largest penalty, the one at ``max_len``. (``alpha = 0``: plain ``log_p``.)
    """
    return min(log_p, 0.0) / gnmt_length_penalty(max_len, alpha)


def beam_search(
    model: EncoderDecoderModel,
    src: torch.Tensor,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    max_len: int = 50,
    length_penalty: float = 0.6,
    use_cache: bool = True,
    pad_id: int | None = None,
    return_scores: bool = False,
    stopping: str = "exact",
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``beam_size`` most probable prefixes at every step, batched over examples.

    Each step extends every live hypothesis by every token and keeps the ``2 * beam_size`` best
    candidates: those that end in ``<eos>`` (and rank within the top ``beam_size``) are set aside as
    finished hypotheses, and the ``beam_size`` best others stay alive. The answer is the hypothesis
    with the best ``log P / gnmt_length_penalty(length, length_penalty)``: ``length_penalty`` is the
    exponent alpha (0.6 in the Transformer paper; 0 ranks by plain log-probability, which favours
    short answers).

    When to stop. With ``stopping="exact"`` (the default) an example stops only when no live
    hypothesis can still beat its best finished one (:func:`best_possible_score`), or when no
    hypothesis is alive; at ``max_len`` the live hypotheses join the finished ones, without an
    ``<eos>``. This returns exactly what the search would return if it ran every example to
    ``max_len``. ``stopping="first_k"`` is a common shortcut (Hugging Face's ``early_stopping=True``):
    stop as soon as ``beam_size`` hypotheses have finished and drop the live ones. It loses the best
    answer when ``<eos>`` is one of many unlikely tokens, as in a label-smoothed model, which gives
    every wrong token about the same small probability: early junk endings then fill the quota while
    the good hypothesis is still being written. It is here so that the chapters can show that.

    ``beam_size=1`` is greedy decoding. With a cache the hypotheses' keys and values are reordered
    every step (:meth:`KVCache.reorder`), since a surviving hypothesis may come from any beam.

    Returns ``(B, T)`` ids laid out as in :func:`greedy_decode` and, with ``return_scores``, the
    ``(B,)`` normalised scores.
    """
    _check_beam_arguments(model, src, beam_size, max_len, length_penalty, stopping)
    pad = model.pad_id if pad_id is None else pad_id
    batch, k = src.shape[0], beam_size
    device = src.device
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]  # (normalised score, ids)
    done = [False] * batch

    with _inference(model):
        memory, src_mask = model.encode(src)
        memory = memory.repeat_interleave(k, dim=0)  # (B*K, S, d_model): row b*K + j is beam j of example b
        src_mask = src_mask.repeat_interleave(k, dim=0)  # (B*K, 1, 1, S)
        tokens = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)
        # Only beam 0 is live at the start, so the first step does not pick the same token K times.
        scores = torch.full((batch, k), -math.inf, dtype=torch.float64, device=device)  # (B, K) log P
        scores[:, 0] = 0.0
        caches = model.new_caches() if use_cache else None

        for step in range(max_len):
            step_input = tokens[:, -1:] if use_cache else tokens
            logits = model.decode(step_input, memory, src_mask, caches)[:, -1]  # (B*K, V)
            vocab = logits.shape[-1]
            log_p = logits.double().log_softmax(-1).view(batch, k, vocab)
            candidates = (scores[:, :, None] + log_p).view(batch, k * vocab)  # (B, K*V)
            top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=1)  # (B, 2K)
            top_scores, top_index = top_scores.tolist(), top_index.tolist()
            length = step + 1  # generated tokens, the new one included

            rows, next_tokens, next_scores = [], [], []
            for b in range(batch):
                alive: list[tuple[int, int, float]] = []  # (source row, token, log P)
                if not done[b]:
                    alive = _extend(
                        b, k, vocab, top_scores[b], top_index[b], tokens, eos_id, length, length_penalty, finished[b]
                    )
                    done[b] = _example_done(alive, finished[b], k, stopping, max_len, length_penalty)
                # Keep the (B*K) layout: dead slots copy row b*K and carry a score of -inf.
                alive = alive if not done[b] else []
                alive += [(b * k, pad, -math.inf)] * (k - len(alive))
                for row, token, score in alive:
                    rows.append(row)
                    next_tokens.append(token)
                    next_scores.append(score)

            rows_t = torch.tensor(rows, dtype=torch.long, device=device)
            tokens = torch.cat([tokens[rows_t], torch.tensor(next_tokens, device=device)[:, None]], dim=1)
            scores = torch.tensor(next_scores, dtype=torch.float64, device=device).view(batch, k)
            if caches is not None:
                _reorder(caches, rows_t)
            if all(done):
                break

        for b in range(batch):
            if not done[b]:  # max_len reached: live hypotheses compete without an <eos>
                finished[b] += _unfinished(scores[b].tolist(), tokens[b * k : (b + 1) * k], length_penalty)

    if not all(finished):
        raise RuntimeError("beam search found no hypothesis with a finite score: are the logits all -inf?")
    best = [max(hypotheses, key=lambda h: h[0]) for hypotheses in finished]
    width = max(len(ids) for _, ids in best)
    out = torch.full((batch, width), pad, dtype=torch.long, device=device)
    for b, (_, ids) in enumerate(best):
        out[b, : len(ids)] = torch.tensor(ids, dtype=torch.long, device=device)
    if return_scores:
        return out, torch.tensor([score for score, _ in best], dtype=torch.float64, device=device)
    return out


# The steps of beam_search(), in the order it takes them.


def _check_beam_arguments(model, src, beam_size: int, max_len: int, length_penalty: float, stopping: str) -> None:
    _check_encoder_decoder(model)
    _check_src(src)
    _check_at_least_one("beam_size", beam_size)
    _check_at_least_one("max_len", max_len)
    if length_penalty < 0:
        raise ValueError(f"length_penalty (the exponent alpha) must be >= 0, got {length_penalty}")
    if stopping not in ("exact", "first_k"):
        raise ValueError(f"stopping must be 'exact' or 'first_k', got {stopping!r}")
    _check_decoder_room(model, max_len)


def _extend(b, k, vocab, top_scores, top_index, tokens, eos_id, length, length_penalty, finished) -> list:
    """Example ``b``'s best candidates of this step, best first: those that end in ``<eos>`` (and rank within the
    top ``k``) go to ``finished`` as (normalised score, ids); the others, up to ``k``, stay alive as
    (source row, token, log P)."""
    alive: list[tuple[int, int, float]] = []
    for rank, (score, index) in enumerate(zip(top_scores, top_index, strict=True)):
        if score == -math.inf or len(alive) == k:
            break
        beam, token = divmod(index, vocab)
        if token != eos_id:
            alive.append((b * k + beam, token, score))
        elif rank < k:
            ids = tokens[b * k + beam, 1:].tolist() + [eos_id]
            finished.append((score / gnmt_length_penalty(length, length_penalty), ids))
    return alive


def _example_done(alive: list, finished: list, k: int, stopping: str, max_len: int, length_penalty: float) -> bool:
    """Whether an example's search is over: nothing alive; with "first_k", ``k`` finished; with "exact", no live
    hypothesis can still beat the best finished one."""
    if not alive:
        return True
    if stopping == "first_k":
        return len(finished) >= k
    if not finished:
        return False
    best_finished = max(score for score, _ in finished)
    best_live = max(score for _, _, score in alive)  # alive is sorted, but say what we mean
    return best_finished >= best_possible_score(best_live, max_len, length_penalty)


def _unfinished(scores: list[float], beams: torch.Tensor, length_penalty: float) -> list:
    """An example's live hypotheses at ``max_len`` (its ``K`` rows of tokens, with the ``<bos>``), scored as
    finished ones without an ``<eos>``; dead slots (log P of -inf) left out."""
    hypotheses = []
    for score, row in zip(scores, beams, strict=True):
        if score > -math.inf:
            ids = row[1:].tolist()
            hypotheses.append((score / gnmt_length_penalty(len(ids), length_penalty), ids))
    return hypotheses


def sequence_log_prob(
    model: EncoderDecoderModel, src: torch.Tensor, generated: torch.Tensor, bos_id: int, eos_id: int
) -> torch.Tensor:
    """``log P(generated | src)`` per example, ``(B,)``, by teacher forcing.

    ``generated`` is laid out as the decoders return it (no ``<bos>``; tokens after the first
    ``<eos>`` are ignored).
    """
    _check_encoder_decoder(model)
    _check_src(src)
    if generated.dim() != 2 or generated.shape[0] != src.shape[0]:
        raise ValueError(f"generated must be (B={src.shape[0]}, T), got {tuple(generated.shape)}")
    with _inference(model):
        bos = torch.full((generated.shape[0], 1), bos_id, dtype=torch.long, device=generated.device)
        tgt_in = torch.cat([bos, generated[:, :-1]], dim=1)
        # The decoder is causal, so whatever follows the first <eos> cannot change the earlier logits.
        is_eos = (generated == eos_id).long()
        valid = (is_eos.cumsum(1) - is_eos) == 0  # (B, T): up to and including the first <eos>
        log_p = model(src, tgt_in).double().log_softmax(-1)  # (B, T, V)
        picked = log_p.gather(-1, generated[..., None]).squeeze(-1)  # (B, T)
        return (picked * valid).sum(1)


def sequence_score(
    model: EncoderDecoderModel,
    src: torch.Tensor,
    generated: torch.Tensor,
    bos_id: int,
    eos_id: int,
    length_penalty: float = 0.6,
) -> torch.Tensor:
    """The score beam search ranks by, ``log P(generated | src) / gnmt_length_penalty(length, alpha)``,
    per example, ``(B,)``, by teacher forcing (:func:`sequence_log_prob`).

    ``generated`` is laid out as the decoders return it: a row's length runs up to and including its
    first ``<eos>``; a row without one was cut off at the last step and counts every position. So the
    greedy and beam outputs of the same sources can be compared directly, whatever their widths.
    """
    if length_penalty < 0:
        raise ValueError(f"length_penalty (the exponent alpha) must be >= 0, got {length_penalty}")
    log_p = sequence_log_prob(model, src, generated, bos_id, eos_id)  # (B,)
    is_eos = generated == eos_id
    first_eos = is_eos.double().argmax(1) + 1  # (B,): position of the first <eos>, counted from 1
    lengths = torch.where(is_eos.any(1), first_eos, torch.full_like(first_eos, generated.shape[1]))
    penalty = ((5.0 + lengths.double()) / 6.0) ** length_penalty  # gnmt_length_penalty, elementwise
    return log_p / penalty.to(log_p.device)


# --------------------------------------------------------------------------------------------
# Decoder-only: sampling
# --------------------------------------------------------------------------------------------


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Set to ``-inf`` every logit outside the ``top_k`` largest and/or outside the nucleus: the
    smallest set of most probable tokens whose probability reaches ``top_p`` (Holtzman et al. 2020).
    The most probable token always survives. ``logits`` is ``(..., V)``."""
    if top_k is not None:
        _check_at_least_one("top_k", top_k)
        if top_k < logits.shape[-1]:
            kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
            logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        mass_before = probs.cumsum(-1) - probs  # probability of the tokens ranked above each one
        drop_sorted = mass_before >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, -math.inf)
    return logits


def generate(
    model: LanguageModel,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    return_logits: bool = False,
    on_step: Callable[[int], None] | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Continue ``prompt`` (``(T,)`` or ``(B, T)`` ids, all rows the same length) by ``max_new_tokens``.

    Each step takes the logits of the last position, divides them by ``temperature``, keeps the
    ``top_k`` / ``top_p`` candidates (:func:`filter_logits`) and samples with ``generator`` (pass a
    seeded ``torch.Generator`` for repeatable samples); ``greedy=True`` takes the argmax instead.
    If ``eos_id`` is given, a row that produced it is filled with ``eos_id`` afterwards, and the loop
    stops when every row has. ``on_step(count)`` is called after every step with the number of new
    tokens so far (for a progress bar, or a timer: the benchmark of chapter 12 reads the clock there).

    Returns the prompt followed by the new tokens, with the prompt's shape convention; with
    ``return_logits`` also the raw ``(B, new, V)`` logits of every step.
    """
    _check_model(model, LanguageModel, "model(tokens, caches=None), new_caches() and max_positions")
    if not isinstance(prompt, torch.Tensor) or prompt.dim() not in (1, 2) or prompt.shape[-1] == 0:
        raise ValueError(
            f"prompt must be a non-empty (T,) or (B, T) tensor of ids, got {getattr(prompt, 'shape', prompt)}"
        )
    _check_at_least_one("max_new_tokens", max_new_tokens)
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy=True for the argmax), got {temperature}")
    if top_k is not None:
        _check_at_least_one("top_k", top_k)
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    squeeze = prompt.dim() == 1
    tokens = prompt[None] if squeeze else prompt  # (B, T)
    limit, total = model.max_positions, tokens.shape[1] + max_new_tokens
    if limit is not None and total > limit:
        raise ValueError(
            f"a prompt of {tokens.shape[1]} tokens plus max_new_tokens={max_new_tokens} makes {total} tokens, "
            f"more than the model's max_len={limit} positions; shorten the prompt or generate fewer tokens"
        )

    with _inference(model):
        caches = model.new_caches() if use_cache else None
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
        all_logits = []
        step_input = tokens
        for step in range(1, max_new_tokens + 1):
            logits = model(step_input, caches=caches)[:, -1]  # (B, V)
            all_logits.append(logits)
            if greedy:
                next_token = logits.argmax(-1)
            else:
                filtered = filter_logits(logits / temperature, top_k, top_p)
                probs = filtered.softmax(-1)
                if generator is not None and generator.device != probs.device:
                    raise ValueError(f"generator is on {generator.device} but the model runs on {probs.device}")
                next_token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
            if eos_id is not None:
                next_token = next_token.masked_fill(finished, eos_id)
                finished |= next_token == eos_id
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)
            step_input = tokens[:, -1:] if use_cache else tokens
            if on_step is not None:
                on_step(step)
            if eos_id is not None and finished.all():
                break
    out = tokens[0] if squeeze else tokens
    if return_logits:
        stacked = torch.stack(all_logits, dim=1)
        return out, (stacked[0] if squeeze else stacked)
    return out


def mask_predict(
    model: nn.Module, lengths, bos_id: int, eos_id: int, mask_id: int, pad_id: int, first_word_id: int
) -> torch.Tensor:
    """Generate with a masked (bidirectional) language model by iterative mask-predict.

    Each row starts as ``<bos>`` + ``lengths[row]`` masks + ``<eos>`` (right-padded with ``pad_id``).
    Every step runs the whole batch once and, in each row that still has a mask, writes the word the
    model is most confident about at the single masked position where that confidence is highest;
    ids below ``first_word_id`` (the special tokens) are never written. A row of length ``L`` is done
    after ``L`` steps, each of which re-encodes everything: a bidirectional model has no KV cache.
    (Ghazvininejad et al. 2019, https://arxiv.org/abs/1904.09324, commit several tokens per step.)

    Returns the ``(B, max(lengths) + 2)`` ids.
    """
    lengths = [int(n) for n in lengths]
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be a non-empty list of positive sentence lengths, got {lengths}")
    tokens = torch.full((len(lengths), max(lengths) + 2), pad_id)
    for row, n in enumerate(lengths):
        tokens[row, 0], tokens[row, 1 : n + 1], tokens[row, n + 1] = bos_id, mask_id, eos_id
    device = next(model.parameters()).device
    tokens = tokens.to(device)
    with _inference(model):
        while (tokens == mask_id).any():
            logits = model(tokens)  # (B, T, V)
            logits[..., :first_word_id] = -math.inf  # only ordinary words are written
            confidence, best = logits.softmax(-1).max(-1)  # (B, T) each
            still_masked = tokens == mask_id
            confidence = confidence.masked_fill(~still_masked, -1.0)
            position = confidence.argmax(-1)  # (B,) most confident mask per row
            rows = still_masked.any(-1).nonzero().squeeze(-1)
            tokens[rows, position[rows]] = best[rows, position[rows]]
    return tokens
