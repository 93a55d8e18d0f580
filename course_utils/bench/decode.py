"""Decoding with and without a KV cache: tokens per second of greedy generation, and the cache's speed-up."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from ..decoding import generate
from .machine import default_device, load_average, machine_info
from .records import BenchmarkResults, DecodeRow
from .timing import synchronize

__all__ = ["DecodeConfig", "decode_config", "run_decode_benchmark"]


@dataclass
class DecodeConfig:
    vocab_size: int = 512
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 4
    batch: int = 1
    prompt_len: int = 16
    new_tokens: int = 256
    dtype: torch.dtype = torch.float32


def decode_config(device: torch.device, quick: bool = False) -> DecodeConfig:
    if quick:
        return DecodeConfig(vocab_size=64, d_model=32, num_heads=2, num_layers=1, prompt_len=4, new_tokens=8)
    if device.type == "cuda":
        # GPT-2-medium-like width and depth, a batch of 8 prompts, 1024 new tokens, bf16.
        return DecodeConfig(
            vocab_size=8192,
            d_model=1024,
            num_heads=16,
            num_layers=12,
            batch=8,
            prompt_len=32,
            new_tokens=1024,
            dtype=torch.bfloat16,
        )
    return DecodeConfig()


def _timed_generation(
    model, prompt: torch.Tensor, new_tokens: int, use_cache: bool, checkpoints: set[int]
) -> tuple[torch.Tensor, dict[int, float]]:
    """Greedy :func:`~course_utils.decoding.generate`; returns the tokens and the seconds elapsed when
    each checkpoint count of new tokens was reached (the prompt's prefill included)."""
    elapsed = {}

    def read_clock(count: int) -> None:
        if count in checkpoints:
            synchronize(prompt.device)
            elapsed[count] = time.perf_counter() - start

    synchronize(prompt.device)
    start = time.perf_counter()
    tokens = generate(model, prompt, new_tokens, greedy=True, use_cache=use_cache, on_step=read_clock)
    return tokens, elapsed


def run_decode_benchmark(
    device: torch.device | str | None = None,
    quick: bool = False,
    config: DecodeConfig | None = None,
    progress: Callable[[str], None] | None = print,
) -> BenchmarkResults:
    """Tokens per second of greedy decoding with a KV cache and without one (recomputing the prefix).

    The model is the course's :class:`course_utils.models.DecoderOnlyLM` with random weights: speed does
    not depend on what the weights learned. One generation per mode; the clock is read at 2, 4, 8, ...
    new tokens. Timing includes the prompt (prefill) in both modes.
    """
    from ..models import DecoderOnlyLM

    device = torch.device(device) if device is not None else default_device()
    config = config or decode_config(device, quick)
    started = time.perf_counter()
    meta = machine_info(device)
    meta.update(
        grid="decode",
        dtype=str(config.dtype).replace("torch.", ""),
        model={k: v for k, v in asdict(config).items() if k != "dtype"},
        notes=[
            f"DecoderOnlyLM with random weights, greedy decoding, batch {config.batch}, "
            f"prompt {config.prompt_len} tokens; times include the prompt"
        ],
    )
    torch.manual_seed(0)
    model = DecoderOnlyLM(
        config.vocab_size,
        d_model=config.d_model,
        num_heads=config.num_heads,
        num_layers=config.num_layers,
        max_len=config.prompt_len + config.new_tokens,
        dropout=0.0,
    ).to(device=device, dtype=config.dtype)
    prompt = torch.randint(0, config.vocab_size, (config.batch, config.prompt_len), device=device)
    checkpoints = {2**i for i in range(1, 31) if 2**i <= config.new_tokens} | {config.new_tokens}
    rows, generated = [], {}
    for use_cache in (False, True):  # warm-up: kernels, allocator, caches of the math libraries
        _timed_generation(model, prompt, min(4, config.new_tokens), use_cache, set())
    for use_cache in (False, True):
        mode = "kv-cache" if use_cache else "no-cache"
        generated[mode], elapsed = _timed_generation(model, prompt, config.new_tokens, use_cache, checkpoints)
        for count in sorted(elapsed):
            rows.append(
                DecodeRow(
                    mode=mode, tokens=count, seconds=elapsed[count], tokens_per_s=count * config.batch / elapsed[count]
                )
            )
        if progress:
            progress(f"  {mode:<9} {config.new_tokens} tokens x batch {config.batch}: {rows[-1].seconds:.2f} s")
    seconds = {(r.mode, r.tokens): r.seconds for r in rows}
    for r in rows:
        if r.mode == "kv-cache":
            r.speedup = seconds["no-cache", r.tokens] / r.seconds
    same = (generated["kv-cache"] == generated["no-cache"]).all(dim=0)  # (T,) per position, over the batch
    first_diff = None if bool(same.all()) else int((~same).nonzero()[0]) - config.prompt_len
    meta["wall_s"] = round(time.perf_counter() - started, 1)
    meta["load_average_end"] = load_average()
    summary = [
        {
            "tokens": config.new_tokens,
            "speedup_kv_cache": rows[-1].speedup,
            "tokens_identical": first_diff is None,
            "first_different_token": first_diff,
        }
    ]
    return BenchmarkResults("decode", "decode", meta, rows, summary)
