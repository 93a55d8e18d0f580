"""Turning a trained model into sequences: greedy decoding, beam search, sampling, with a KV cache.

Two kinds of model are supported, by the methods they have (any object with these works):

- **encoder-decoder** (:class:`~course_utils.models.Seq2SeqTransformer`): ``encode(src) -> (memory,
  src_mask)``, ``decode(tgt, memory, src_mask, caches=None) -> logits``, ``new_caches()``; used by
  :func:`greedy_decode` and :func:`beam_search`.
- **decoder-only** (:class:`~course_utils.models.TransformerLM`, ``DecoderOnlyLM``):
  ``model(tokens, caches=None) -> logits`` and ``new_caches()``; used by :func:`generate`.

With ``use_cache=True`` every step feeds only the newest token and reuses the keys and values of the
earlier ones (:class:`~course_utils.attention.KVCache`); with ``use_cache=False`` every step runs the
whole prefix again. Both give the same tokens (the tests check it): the cache only saves work.

All functions switch the model to ``eval()`` (no dropout) for the call, restore its mode afterwards,
and run without gradients.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn

__all__ = [
    "greedy_decode",
    "beam_search",
    "gnmt_length_penalty",
    "sequence_log_prob",
    "filter_logits",
    "generate",
]


@contextmanager
def _inference(model: nn.Module):
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


def _check_decoder_room(model: nn.Module, max_len: int) -> None:
    positions = getattr(model, "positions", None)
    limit = getattr(positions, "max_len", None)
    # The decoder reads BOS plus max_len - 1 generated tokens.
    if limit is not None and max_len > limit:
        raise ValueError(f"max_len={max_len} exceeds the {limit} positions the model's decoder can encode")


def _pad_id(model: nn.Module, pad_id: int | None) -> int:
    if pad_id is not None:
        return pad_id
    model_pad = getattr(model, "pad_id", None)
    return 0 if model_pad is None else model_pad


def _reorder(caches, rows: torch.Tensor) -> None:
    for entry in caches:
        for cache in (entry if isinstance(entry, (tuple, list)) else (entry,)):
            cache.reorder(rows)


# --------------------------------------------------------------------------------------------
# Encoder-decoder: greedy and beam search
# --------------------------------------------------------------------------------------------

def greedy_decode(model: nn.Module, src: torch.Tensor, bos_id: int, eos_id: int, max_len: int,
                  use_cache: bool = True, pad_id: int | None = None,
                  return_logits: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
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
    _check_src(src)
    _check_at_least_one("max_len", max_len)
    _check_decoder_room(model, max_len)
    pad = _pad_id(model, pad_id)
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


def beam_search(model: nn.Module, src: torch.Tensor, bos_id: int, eos_id: int, beam_size: int = 4,
                max_len: int = 50, length_penalty: float = 0.6, use_cache: bool = True, pad_id: int | None = None,
                return_scores: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Keep the ``beam_size`` most probable prefixes at every step, batched over examples.

    Each step extends every live hypothesis by every token and keeps the ``2 * beam_size`` best
    candidates: those that end in ``<eos>`` (and rank within the top ``beam_size``) are set aside as
    finished hypotheses, and the ``beam_size`` best others stay alive. An example stops once it has
    ``beam_size`` finished hypotheses (or at ``max_len``, where live ones count as unfinished
    hypotheses). The answer is the hypothesis with the best ``log P / gnmt_length_penalty(length,
    length_penalty)``: ``length_penalty`` is the exponent alpha (0.6 in the Transformer paper; 0 ranks
    by plain log-probability, which favours short answers).
    ``beam_size=1`` is greedy decoding. With a cache the hypotheses' keys and values are reordered
    every step (:meth:`KVCache.reorder`), since a surviving hypothesis may come from any beam.

    Returns ``(B, T)`` ids laid out as in :func:`greedy_decode` and, with ``return_scores``, the
    ``(B,)`` normalised scores.
    """
    _check_src(src)
    _check_at_least_one("beam_size", beam_size)
    _check_at_least_one("max_len", max_len)
    if length_penalty < 0:
        raise ValueError(f"length_penalty (the exponent alpha) must be >= 0, got {length_penalty}")
    _check_decoder_room(model, max_len)
    pad = _pad_id(model, pad_id)
    batch, k = src.shape[0], beam_size
    device = src.device
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]  # (normalised score, ids)
    done = [False] * batch

    with _inference(model):
        memory, src_mask = model.encode(src)
        memory = memory.repeat_interleave(k, dim=0)      # (B*K, S, d_model): row b*K + j is beam j of example b
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
                    for rank, (score, index) in enumerate(zip(top_scores[b], top_index[b])):
                        if score == -math.inf or len(alive) == k:
                            break
                        beam, token = divmod(index, vocab)
                        if token == eos_id:
                            if rank < k:
                                ids = tokens[b * k + beam, 1:].tolist() + [eos_id]
                                finished[b].append((score / gnmt_length_penalty(length, length_penalty), ids))
                        else:
                            alive.append((b * k + beam, token, score))
                    if len(finished[b]) >= k or not alive:
                        done[b] = True
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
            if done[b] and finished[b]:
                continue
            for j in range(k):  # max_len reached: live hypotheses compete without an <eos>
                score = scores[b, j].item()
                if score > -math.inf:
                    ids = tokens[b * k + j, 1:].tolist()
                    finished[b].append((score / gnmt_length_penalty(len(ids), length_penalty), ids))

    if not all(finished):
        raise RuntimeError("beam search found no hypothesis with a finite score: are the logits all -inf?")
    best = [max(hypotheses, key=lambda h: h[0]) for hypotheses in finished]
    width = max(len(ids) for _, ids in best)
    out = torch.full((batch, width), pad, dtype=torch.long, device=device)
    for b, (_, ids) in enumerate(best):
        out[b, : len(ids)] = torch.tensor(ids, dtype=torch.long, device=device)
    if return_scores:
        return out, torch.tensor([score for score, _ in best], dtype=torch.float64)
    return out


def sequence_log_prob(model: nn.Module, src: torch.Tensor, generated: torch.Tensor, bos_id: int,
                      eos_id: int) -> torch.Tensor:
    """``log P(generated | src)`` per example, ``(B,)``, by teacher forcing.

    ``generated`` is laid out as the decoders return it (no ``<bos>``; tokens after the first
    ``<eos>`` are ignored).
    """
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


def generate(model: nn.Module, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, greedy: bool = False,
             use_cache: bool = True, generator: torch.Generator | None = None, eos_id: int | None = None,
             return_logits: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Continue ``prompt`` (``(T,)`` or ``(B, T)`` ids, all rows the same length) by ``max_new_tokens``.

    Each step takes the logits of the last position, divides them by ``temperature``, keeps the
    ``top_k`` / ``top_p`` candidates (:func:`filter_logits`) and samples with ``generator`` (pass a
    seeded ``torch.Generator`` for repeatable samples); ``greedy=True`` takes the argmax instead.
    If ``eos_id`` is given, a row that produced it is filled with ``eos_id`` afterwards, and the loop
    stops when every row has.

    Returns the prompt followed by the new tokens, with the prompt's shape convention; with
    ``return_logits`` also the raw ``(B, new, V)`` logits of every step.
    """
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
    limit = getattr(model, "max_len", None)
    if limit is not None and getattr(model, "position", "learned") in ("learned", "sinusoidal"):
        total = tokens.shape[1] + max_new_tokens
        if total > limit:
            raise ValueError(
                f"a prompt of {tokens.shape[1]} tokens plus max_new_tokens={max_new_tokens} makes {total} tokens, "
                f"more than the model's max_len={limit} positions; shorten the prompt or generate fewer tokens"
            )

    with _inference(model):
        caches = model.new_caches() if use_cache else None
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
        all_logits = []
        step_input = tokens
        for _ in range(max_new_tokens):
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
            if eos_id is not None and finished.all():
                break
    out = tokens[0] if squeeze else tokens
    if return_logits:
        stacked = torch.stack(all_logits, dim=1)
        return out, (stacked[0] if squeeze else stacked)
    return out
