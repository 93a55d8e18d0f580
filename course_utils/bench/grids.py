"""Sweeps: every method on every shape of a grid, with a time budget, and the summary against naive."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .machine import default_device, half_dtype, load_average, machine_info
from .measure import AttentionShape, MeasureSettings, measure_attention
from .methods import METHODS
from .records import AttentionRow, BenchmarkResults

__all__ = ["AttentionGrid", "make_grid", "run_grid", "summarize"]


@dataclass
class AttentionGrid:
    """One sweep: a list of shapes, each run with every method under the same settings.

    ``method_budget_s``: a method is skipped at a size where it is predicted (from the last size it
    ran, scaled by the FLOPs) to need longer than this for its calls. ``stop_when_oom``: the memory
    grid stops growing ``n`` once this method has run out of memory.
    """

    name: str
    shapes: list[AttentionShape]
    settings: MeasureSettings
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    method_budget_s: float = 30.0
    stop_when_oom: str | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; choose from {list(METHODS)}")


def make_grid(name: str, device: torch.device | str | None = None, quick: bool = False) -> AttentionGrid:
    """The named attention grid (``cpu``, ``gpu`` or ``memory``) for ``device``; ``quick`` = tiny sizes."""
    if name not in ("cpu", "gpu", "memory"):
        raise ValueError(f"unknown attention grid {name!r}; choose cpu, gpu or memory (decode is separate)")
    if name == "cpu":
        device = torch.device("cpu")
    elif name == "gpu":
        device = torch.device("cuda")
    else:
        device = torch.device(device) if device is not None else default_device()
    on_gpu = device.type == "cuda"

    if name == "cpu":
        lengths = [64, 128] if quick else [256, 512, 1024, 2048, 4096]
        heads, head_dim = (2, 16) if quick else (8, 64)
        return AttentionGrid(
            name,
            [AttentionShape(1, heads, n, head_dim) for n in lengths],
            MeasureSettings(
                device,
                torch.float32,
                min_repeats=2 if quick else 3,
                max_repeats=3 if quick else 10,
                budget_s=0.05 if quick else 1.0,
                block=32 if quick else 256,
                memory_cap_bytes=6 * 2**30,
            ),
            method_budget_s=60.0,
            notes=["fp32, batch 1, 8 heads, head dim 64, not causal" if not quick else "quick: tiny sizes"],
        )
    if name == "gpu":
        half = half_dtype(device)  # bf16; fp16 on GPUs older than Ampere, which have no bf16 tensor cores
        tokens = 1024 if quick else 16384  # batch * seq_len stays constant: the work per token is fixed
        lengths = [128, 256] if quick else [512, 1024, 2048, 4096, 8192, 16384]
        shapes = [
            AttentionShape(tokens // n, 2048 // d, n, d, causal)
            for d in (64, 128)
            for causal in (False, True)
            for n in lengths
        ]
        return AttentionGrid(
            name,
            shapes,
            MeasureSettings(device, half, min_repeats=3, max_repeats=50, budget_s=0.2, block=1024),
            method_budget_s=15.0,
            notes=[
                f"{'bf16' if half == torch.bfloat16 else 'fp16'} forward, hidden size 2048 (32 heads of 64 or 16 "
                "heads of 128), batch x seq_len = 16384"
            ],
        )
    # memory
    if quick:
        lengths = [64, 128, 256]
    elif on_gpu:
        lengths = [512 * 2**i for i in range(9)]  # up to 131072; the grid stops once naive runs out of memory
    else:
        lengths = [256, 512, 1024, 2048, 4096]
    settings = MeasureSettings(
        device,
        half_dtype(device) if on_gpu else torch.float32,
        min_repeats=1,
        max_repeats=3,
        budget_s=0.5,
        block=32 if quick else (1024 if on_gpu else 256),
    )
    grid = AttentionGrid(
        name,
        [AttentionShape(1, 2 if quick else 16, n, 16 if quick else 64) for n in lengths],
        settings,
        method_budget_s=90.0,
        stop_when_oom="naive" if on_gpu else None,
    )
    if on_gpu:
        grid.notes.append(
            f"batch 1, 16 heads, head dim 64, {str(settings.dtype).replace('torch.', '')}; n doubles until naive "
            "attention runs out of memory"
        )
    elif not quick:
        settings.memory_cap_bytes = 6 * 2**30
        grid.notes.append(
            "CPU: n stops at 4096. Naive attention there already peaks at ~2 GiB (two 16 x 4096 x 4096 fp32 "
            "matrices); n = 8192 would need ~8 GiB of this 24 GiB machine shared with other users, and "
            "minutes per call."
        )
    return grid


def _predicted_skip(grid: AttentionGrid, shape: AttentionShape, last_ok: tuple[int, float] | None) -> str | None:
    """Why to skip this size, if the last size that ran predicts it to exceed the method's budget."""
    if last_ok is None:
        return None
    prev_flops, prev_s = last_ok
    calls = grid.settings.warmup + grid.settings.min_repeats + (1 if grid.settings.device.type == "cuda" else 0)
    predicted = prev_s * shape.flops / prev_flops * calls  # time grows with the FLOPs
    if predicted > grid.method_budget_s:
        return f"predicted {predicted:.0f} s for this size, over the {grid.method_budget_s:.0f} s budget"
    return None


def run_grid(
    grid: AttentionGrid,
    progress: Callable[[str], None] | None = print,
    checkpoint: Callable[[BenchmarkResults], None] | None = None,
) -> BenchmarkResults:
    """Measure every method on every shape of ``grid``; return the results (see :func:`save_results`).

    ``progress`` receives one line per row; ``checkpoint`` receives the partial results after each
    shape (the command line saves them, so a run cut short by a time limit still leaves its rows).
    """
    settings = grid.settings
    started = time.perf_counter()
    meta = machine_info(settings.device)
    meta.update(
        grid=grid.name,
        dtype=str(settings.dtype).replace("torch.", ""),
        block=settings.block,
        notes=list(grid.notes),
        methods=list(grid.methods),
        peak_tflops=settings.peak_tflops,
    )
    results = BenchmarkResults(grid.name, "attention", {**meta, "partial": True})
    last_ok: dict[tuple, tuple[int, float]] = {}  # (method, head_dim, causal) -> (flops, seconds)
    for shape in grid.shapes:
        inputs = shape.random_inputs(settings.dtype, settings.device)
        reference = None  # (method, output) of the first method that ran on these inputs
        out_of_memory = False
        for name in grid.methods:
            key = (name, shape.head_dim, shape.causal)
            row, output = measure_attention(
                name,
                shape,
                settings,
                inputs=inputs,
                reference=reference,
                skip_reason=_predicted_skip(grid, shape, last_ok.get(key)),
            )
            results.rows.append(row)
            if row.ok:
                last_ok[key] = (row.flops, row.time_ms / 1e3)
                reference = reference or (name, output)
            if progress:
                progress(row.describe())
            del output
            out_of_memory |= name == grid.stop_when_oom and row.status == "oom"
        del inputs, reference
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()
        if checkpoint is not None:
            checkpoint(results)
        if out_of_memory:
            break
    meta["load_average_end"] = load_average()
    meta["wall_s"] = round(time.perf_counter() - started, 1)
    results.meta = meta
    results.summary = summarize(results.rows)
    return results


def summarize(rows: list[AttentionRow]) -> list[dict]:
    """Per (head dim, causal): at the largest n where naive ran, each method's speed-up and memory vs naive."""
    summary = []
    for head_dim, causal in sorted({(r.head_dim, r.causal) for r in rows}):
        group = [r for r in rows if r.head_dim == head_dim and r.causal == causal]
        naive_ok = [r for r in group if r.method == "naive" and r.ok]
        if not naive_ok:
            continue
        base = max(naive_ok, key=lambda r: r.seq_len)
        for r in group:
            if r.seq_len == base.seq_len and r.ok and r.method != "naive":
                summary.append(
                    {
                        "method": r.method,
                        "head_dim": head_dim,
                        "causal": causal,
                        "seq_len": base.seq_len,
                        "batch": base.batch,
                        "speedup_vs_naive": base.time_ms / r.time_ms,
                        "memory_vs_naive": r.peak_mem_mib / base.peak_mem_mib if base.peak_mem_mib else None,
                    }
                )
        largest = max(r.seq_len for r in group)
        naive_at_largest = [r for r in group if r.method == "naive" and r.seq_len == largest]
        if largest > base.seq_len and naive_at_largest:
            summary.append(
                {
                    "method": "naive",
                    "head_dim": head_dim,
                    "causal": causal,
                    "seq_len": largest,
                    "batch": naive_at_largest[0].batch,
                    "note": naive_at_largest[0].status,
                }
            )
    return summary
