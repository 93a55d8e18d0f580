r"""Timing and memory measurement of attention, correct on CPU and CUDA (chapter 12's lab).

Measuring right
---------------
- **Warm-up.** The first call pays one-off costs (kernel compilation, cuBLAS/cuDNN plans, the
  allocator growing its pool). It is run and thrown away before anything is timed.
- **Synchronise.** CUDA calls return before the GPU has finished. A wall clock around them times
  the *launch*, not the work. We time on the GPU itself: ``triton.testing.do_bench`` when Triton is
  installed (it also flushes the L2 cache between calls), else CUDA events around each call.
- **Median of repeats.** Other processes, clock boosts and the OS add noise that only ever slows
  a call down; the median ignores the occasional outlier, and the minimum is kept too.
- **Compare in turns.** Calls that will be compared (one method at several sizes, to fit an
  exponent) are timed round-robin by :func:`time_interleaved`, so a slow spell of the machine falls
  on all of them alike.
- **Peak memory, not final memory.** Attention's ``n x n`` matrix is freed before the call returns,
  so what matters is the high-water mark *during* the call. On CUDA:
  ``torch.cuda.reset_peak_memory_stats`` then ``max_memory_allocated``. On the CPU PyTorch keeps no
  such counter, so we replay the allocator's own record of every allocation and free that the
  profiler collects (``profile_memory=True``) and take the running maximum.
  Both report the bytes *above* what was allocated before the call (inputs excluded, output
  included).
- **FLOPs.** ``Q K^T`` and ``P V`` each cost ``2 n_q n_k d`` per (batch, head): ``4 b h n^2 d`` in
  all, half of it under a causal mask (FlashAttention's own accounting; softmax is not counted).

The methods
-----------
========================  ==========================================================================
``naive``                 ``softmax(Q K^T / sqrt(d)) V`` with the ``n x n`` matrix materialised
``sdpa-math``             ``F.scaled_dot_product_attention`` pinned to its math backend (also ``n x n``)
``sdpa-flash``            pinned to the FlashAttention backend (on CPU: PyTorch's tiled CPU kernel)
``sdpa-efficient``        pinned to the memory-efficient (xFormers) backend, CUDA only
``sdpa-cudnn``            pinned to cuDNN's fused attention, CUDA only
``flash-pytorch``         :func:`course_utils.flash.flash_attention`, our tiled Python version
``flash-triton``          :func:`course_utils.flash_triton.flash_attention_triton`, our GPU kernel
========================  ==========================================================================

A method that cannot run in a setting is recorded with status ``unsupported`` (and why), a size
that does not fit with ``oom``, one predicted to take too long with ``skipped``: a row, never a crash.

Grids and the command line
--------------------------
``python -m course_utils.bench --grid cpu|gpu|memory|decode|all [--quick] [--out benchmarks]``
writes ``<out>/<device>/<grid>.json``, ``<grid>.md`` and ``<grid>.png`` and prints the table.
Chapter 12 reads the stored tables with :func:`load_results` and draws them with :func:`plot_results`.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gc
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

__all__ = [
    "naive_attention",
    "AttentionGrid",
    "DecodeConfig",
    "METHODS",
    "attention_flops",
    "time_call",
    "time_interleaved",
    "peak_memory",
    "Timing",
    "measure_attention",
    "make_grid",
    "run_grid",
    "run_decode_benchmark",
    "save_results",
    "load_results",
    "available_results",
    "plot_results",
    "format_table",
    "device_slug",
    "default_results_dir",
    "main",
]

GRIDS = ("cpu", "gpu", "memory", "decode")

_OOM_ERRORS = tuple({torch.cuda.OutOfMemoryError, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)})

# Dense (no sparsity) bf16/fp16 tensor-core peaks from NVIDIA's datasheets, TFLOP/s. The first name
# contained in the device name wins, so the more specific names come first.
_PEAK_TFLOPS_16BIT = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("A100", 312.0))


# --------------------------------------------------------------------------------------------
# 1. What we measure: attention implementations
# --------------------------------------------------------------------------------------------

def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """``softmax(Q K^T / sqrt(d)) V`` the textbook way: the ``(T_q, T_k)`` scores are materialised.

    ``q (..., T_q, d)``, ``k (..., T_k, d)``, ``v (..., T_k, d_v)`` -> ``(..., T_q, d_v)``.
    ``causal=True`` hides key ``j > i`` from query ``i`` (needs ``T_q == T_k``).
    This is the baseline of the benchmark; chapter 3 builds the same thing with masks and weights.
    """
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal=True needs T_q == T_k; got {q.shape[-2]} and {k.shape[-2]}")
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)  # (T_q, T_k)
        scores.masked_fill_(future, -math.inf)  # in place: the benchmark should not pay for a copy
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k), the second n x n matrix
    return weights @ v


def _sdpa(backend_name: str) -> Callable:
    def run(q, k, v, causal):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, backend_name)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def _flash_pytorch(q, k, v, causal, block: int = 128):
    from course_utils.flash import flash_attention

    return flash_attention(q, k, v, causal=causal, block_q=block, block_k=block)


def _flash_triton(q, k, v, causal):
    from course_utils.flash_triton import flash_attention_triton

    return flash_attention_triton(q, k, v, causal=causal)


@dataclass(frozen=True)
class AttentionMethod:
    name: str
    fn: Callable  # fn(q, k, v, causal) -> out
    materialises: bool  # holds the n x n matrix (memory grows as n^2)
    cuda_only: bool = False
    sdpa_backend: str | None = None  # the SDPBackend the call is pinned to
    uses_block: bool = False  # takes the grid's tile size


METHODS: dict[str, AttentionMethod] = {
    "naive": AttentionMethod("naive", naive_attention, materialises=True),
    "sdpa-math": AttentionMethod("sdpa-math", _sdpa("MATH"), materialises=True, sdpa_backend="MATH"),
    "sdpa-flash": AttentionMethod("sdpa-flash", _sdpa("FLASH_ATTENTION"), False, sdpa_backend="FLASH_ATTENTION"),
    "sdpa-efficient": AttentionMethod("sdpa-efficient", _sdpa("EFFICIENT_ATTENTION"), False,
                                      sdpa_backend="EFFICIENT_ATTENTION"),
    "sdpa-cudnn": AttentionMethod("sdpa-cudnn", _sdpa("CUDNN_ATTENTION"), False, sdpa_backend="CUDNN_ATTENTION"),
    "flash-pytorch": AttentionMethod("flash-pytorch", _flash_pytorch, False, uses_block=True),
    "flash-triton": AttentionMethod("flash-triton", _flash_triton, False, cuda_only=True),
}


def attention_flops(batch: int, heads: int, n_queries: int, n_keys: int, head_dim: int, causal: bool) -> int:
    """Matrix-multiply FLOPs of attention's forward pass: ``4 b h n_q n_k d``, halved when causal.

    >>> attention_flops(1, 8, 1024, 1024, 64, causal=False)
    2147483648
    """
    flops = 4 * batch * heads * n_queries * n_keys * head_dim
    return flops // 2 if causal else flops


# --------------------------------------------------------------------------------------------
# 2. Timing
# --------------------------------------------------------------------------------------------

@dataclass
class Timing:
    median_s: float
    min_s: float | None
    repeats: int | None  # None when triton's do_bench chose the count itself
    timer: str


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _do_bench():
    try:
        from triton.testing import do_bench
    except Exception:
        return None
    return do_bench


def time_call(fn: Callable[[], object], device: torch.device | str = "cpu", *, warmup: int = 1,
              min_repeats: int = 3, max_repeats: int = 30, budget_s: float = 1.0,
              timer: str = "auto", expected_call_s: float | None = None) -> Timing:
    """Median wall time of ``fn()`` after ``warmup`` discarded calls.

    Repeats at least ``min_repeats`` times and then until ``budget_s`` seconds are spent or
    ``max_repeats`` is reached. ``timer``: ``"auto"``, ``"perf_counter"`` (CPU wall time),
    ``"process_time"`` (CPU time of this process, all its threads: time other programs on a shared
    machine take cannot be added to it, so exponents fitted from it are steadier), ``"cuda-events"``
    or ``"do_bench"`` (CUDA). ``"auto"`` on CUDA uses Triton's ``do_bench`` for calls under 50 ms
    (it needs many calls) and CUDA events for slower ones; the duration of the last warm-up call
    decides, or ``expected_call_s`` when the caller has already run ``fn`` (``warmup=0``).
    """
    device = torch.device(device)
    if min_repeats < 1 or max_repeats < min_repeats:
        raise ValueError(f"need 1 <= min_repeats <= max_repeats; got {min_repeats}, {max_repeats}")
    if timer not in ("auto", "perf_counter", "process_time", "cuda-events", "do_bench"):
        raise ValueError(f"unknown timer {timer!r}")
    if device.type != "cuda" and timer in ("cuda-events", "do_bench"):
        raise ValueError(f"timer {timer!r} needs a CUDA device, got {device}")
    if device.type == "cuda" and timer == "process_time":
        raise ValueError("timer 'process_time' measures the CPU; a CUDA kernel runs asynchronously on the GPU")

    last_call_s = expected_call_s or 0.0
    for _ in range(warmup):
        start = time.perf_counter()
        fn()
        _sync(device)
        last_call_s = time.perf_counter() - start

    if device.type == "cuda":
        do_bench = _do_bench()
        want_do_bench = timer == "do_bench" or (timer == "auto" and last_call_s < 0.05)
        if want_do_bench and do_bench is not None:
            try:
                median_ms, min_ms = do_bench(fn, warmup=25, rep=max(100, int(budget_s * 1000)),
                                             quantiles=[0.5, 0.0])
                return Timing(median_ms / 1e3, min_ms / 1e3, None, "triton.testing.do_bench")
            except TypeError:  # an older do_bench signature: fall back to our own events
                pass
        times = []
        while len(times) < min_repeats or (len(times) < max_repeats and sum(times) < budget_s):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return Timing(statistics.median(times), min(times), len(times), "cuda-events")

    clock = time.process_time if timer == "process_time" else time.perf_counter
    times = []
    while len(times) < min_repeats or (len(times) < max_repeats and sum(times) < budget_s):
        start = clock()
        fn()
        times.append(clock() - start)
    return Timing(statistics.median(times), min(times), len(times), clock.__name__)


def time_interleaved(calls: dict, device: torch.device | str = "cpu", *, rounds: int = 5,
                     progress: Callable[[int], None] | None = None, **time_call_options) -> dict:
    """Time every call of ``calls`` (key -> function) ``rounds`` times, round-robin; keep each one's best.

    Timed one after another, the calls of a comparison (one method at several sizes, say) meet
    different machine conditions: a slow spell of the machine (another program, a cache it fills)
    falls on whichever call is being timed then and tilts an exponent fitted across sizes. Taking
    turns spreads such spells over all of them, and each call's fastest round is the one least
    disturbed. Returns key -> :class:`Timing` whose ``median_s`` is the median of the rounds' medians,
    ``min_s`` the fastest call seen and ``repeats`` the calls timed over all rounds. Other keyword
    arguments go to :func:`time_call` (each round warms up again, as a function's caches may have
    been evicted since its last turn); ``progress(round_number)`` is called after each round.
    """
    if rounds < 1:
        raise ValueError(f"need at least one round, got {rounds}")
    per_round: dict = {key: [] for key in calls}
    for round_number in range(1, rounds + 1):
        for key, fn in calls.items():
            per_round[key].append(time_call(fn, device, **time_call_options))
        if progress:
            progress(round_number)
    result = {}
    for key, timings in per_round.items():
        repeats = [t.repeats for t in timings]
        result[key] = Timing(statistics.median(t.median_s for t in timings),
                             min(t.min_s if t.min_s is not None else t.median_s for t in timings),
                             None if None in repeats else sum(repeats), timings[0].timer)
    return result


# --------------------------------------------------------------------------------------------
# 3. Peak memory
# --------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _stderr_silenced():
    """Mute file descriptor 2 (the profiler's C++ side prints a line per start and stop there)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (some notebook frontends): nothing to mute
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _cpu_peak_memory(fn: Callable[[], object]) -> tuple[int, object]:
    from torch.profiler import ProfilerActivity, profile

    with _stderr_silenced():
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            result = fn()
    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError as exc:  # the profiler's internals moved in this torch version
        raise RuntimeError(
            f"cannot read allocation events from torch {torch.__version__}'s profiler to measure CPU memory"
        ) from exc
    # Each "[memory]" event is one allocation (+bytes) or free (-bytes) by PyTorch's CPU allocator.
    changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    live = peak = 0
    for _, nbytes in changes:
        live += nbytes
        peak = max(peak, live)
    return peak, result


def peak_memory(fn: Callable[[], object], device: torch.device | str = "cpu") -> tuple[int, object]:
    """Run ``fn()`` once; return ``(peak bytes allocated above the starting point, fn's result)``.

    CUDA: the caching allocator's peak counter. CPU: the profiler's allocation record, replayed.
    Only PyTorch tensors count (not Python objects or a library's private buffers).
    """
    device = torch.device(device)
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        _sync(device)
        return torch.cuda.max_memory_allocated(device) - before, result
    if device.type == "cpu":
        return _cpu_peak_memory(fn)
    raise ValueError(f"peak memory is measured on cpu or cuda, not {device.type}")


# --------------------------------------------------------------------------------------------
# 4. The machine
# --------------------------------------------------------------------------------------------

def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_name()


def device_slug(device: torch.device | str) -> str:
    """Folder name for a device's results: ``nvidia-h200``, ``cpu-amd-epyc``..."""
    device = torch.device(device)
    return _slugify(device_name(device), device.type == "cuda")


def _slugify(name: str, is_gpu: bool) -> str:
    name = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@.*$|\d+-Core", " ", name)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"
    return slug if is_gpu else f"cpu-{slug}"


def peak_tflops(device: torch.device, dtype: torch.dtype) -> float | None:
    """The datasheet's dense bf16/fp16 peak of a known GPU, else ``None`` (CPU, fp32, unknown GPU)."""
    if device.type != "cuda" or dtype not in (torch.bfloat16, torch.float16):
        return None
    name = device_name(device)
    for key, tflops in _PEAK_TFLOPS_16BIT:
        if key in name:
            return tflops
    return None


def machine_info(device: torch.device) -> dict:
    info = {
        "device": str(device),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if hasattr(os, "getloadavg"):
        info["load_average_start"] = [round(x, 2) for x in os.getloadavg()]
    if device.type == "cuda":
        info["cuda"] = torch.version.cuda
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    return info


# --------------------------------------------------------------------------------------------
# 5. One measurement -> one row
# --------------------------------------------------------------------------------------------

def _is_unsupported(exc: BaseException) -> bool:
    """PyTorch's words when a pinned SDPA backend cannot take these inputs on this device."""
    text = str(exc)
    return any(s in text for s in ("No viable backend", "No available kernel", "not supported"))


def _is_cpu_oom(exc: BaseException) -> bool:
    text = str(exc)
    return "can't allocate memory" in text or "DefaultCPUAllocator" in text


def _estimated_bytes(method: AttentionMethod, b: int, h: int, n: int, d: int, dtype: torch.dtype) -> int:
    size = torch.finfo(dtype).bits // 8
    if method.materialises:
        return 3 * b * h * n * n * size + 4 * b * h * n * d * size  # scores, weights, a temporary
    return 8 * b * h * n * d * size


class _Unsupported(Exception):
    """Raised inside measure_attention when a method cannot run on these inputs here."""


def measure_attention(method_name: str, *, batch: int, heads: int, seq_len: int, head_dim: int,
                      causal: bool, dtype: torch.dtype, device: torch.device, inputs=None,
                      reference: torch.Tensor | None = None, reference_method: str | None = None,
                      warmup: int = 1, min_repeats: int = 3, max_repeats: int = 20, budget_s: float = 1.0,
                      block: int = 128, memory_cap_bytes: int | None = None, skip_reason: str | None = None,
                      device_peak_tflops: float | None = None, timer: str = "auto") -> tuple[dict, torch.Tensor | None]:
    """Time and measure one method on one shape. Returns ``(row, output or None)``; never raises
    for out-of-memory, unsupported backends or other runtime failures: those become the row's status.
    """
    method = METHODS[method_name]
    flops = attention_flops(batch, heads, seq_len, seq_len, head_dim, causal)
    row = {
        "method": method_name, "sdpa_backend": method.sdpa_backend, "batch": batch, "heads": heads,
        "seq_len": seq_len, "head_dim": head_dim, "causal": causal, "dtype": str(dtype).replace("torch.", ""),
        "device": device.type, "status": "ok", "reason": None, "time_ms": None, "time_min_ms": None,
        "repeats": None, "timer": None, "peak_mem_mib": None, "flops": flops, "tflops": None,
        "pct_of_peak": None, "max_abs_diff": None, "diff_vs": None,
    }
    if method.uses_block:
        row["block"] = block
    if method.cuda_only and device.type != "cuda":
        row.update(status="unsupported", reason="needs a CUDA GPU")
        return row, None
    if skip_reason:
        row.update(status="skipped", reason=skip_reason)
        return row, None
    if memory_cap_bytes is not None:
        need = _estimated_bytes(method, batch, heads, seq_len, head_dim, dtype)
        if need > memory_cap_bytes:
            row.update(status="skipped", reason=f"needs ~{need / 2**30:.1f} GiB, over this grid's cap of "
                                                f"{memory_cap_bytes / 2**30:.1f} GiB")
            return row, None

    fn_kwargs = {"block": block} if method.uses_block else {}
    output = None
    failure = None
    try:
        if inputs is None:
            inputs = tuple(torch.randn(batch, heads, seq_len, head_dim, dtype=dtype, device=device) for _ in range(3))
        q, k, v = inputs

        def call():
            return method.fn(q, k, v, causal, **fn_kwargs)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                if device.type == "cuda":
                    # Warm up outside the memory measurement: the first CUDA call may allocate
                    # workspaces (cuBLAS, autotuning) that stay for the whole process.
                    call()
                    _sync(device)
                # On the CPU the memory measurement doubles as the warm-up call: one-off costs there
                # (thread pools, library init) do not allocate tensors, and slow sizes save a call.
                started = time.perf_counter()
                peak_bytes, output = peak_memory(call, device)
                first_call_s = time.perf_counter() - started
            except RuntimeError as exc:
                if _is_unsupported(exc) and not _is_cpu_oom(exc):
                    why = "; ".join(str(w.message).splitlines()[0] for w in caught) or str(exc).splitlines()[0]
                    raise _Unsupported(why[:400]) from None
                raise
        timing = time_call(call, device, warmup=max(0, warmup - 1), min_repeats=min_repeats,
                           max_repeats=max_repeats, budget_s=budget_s, timer=timer, expected_call_s=first_call_s)
        row.update(
            time_ms=timing.median_s * 1e3, time_min_ms=None if timing.min_s is None else timing.min_s * 1e3,
            repeats=timing.repeats, timer=timing.timer, peak_mem_mib=peak_bytes / 2**20,
            tflops=flops / timing.median_s / 1e12,
        )
        if device_peak_tflops:
            row["pct_of_peak"] = 100.0 * row["tflops"] / device_peak_tflops
        if reference is not None:
            row["max_abs_diff"] = (output.float() - reference.float()).abs().max().item()
            row["diff_vs"] = reference_method
    except _Unsupported as exc:
        failure = ("unsupported", str(exc))
    except _OOM_ERRORS as exc:
        failure = ("oom", str(exc).splitlines()[0][:200] if str(exc) else "out of memory")
    except RuntimeError as exc:
        failure = ("oom", str(exc).splitlines()[0][:200]) if _is_cpu_oom(exc) else \
            ("error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
    except Exception as exc:  # a compiler error in a kernel, say: record it and go on with the grid
        failure = ("error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
    if failure is not None:
        output = None
        row.update(status=failure[0], reason=failure[1])
        if failure[0] != "unsupported":
            # The traceback held the failed call's tensors until now; hand the memory back.
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return row, output


# --------------------------------------------------------------------------------------------
# 6. Grids
# --------------------------------------------------------------------------------------------

@dataclass
class AttentionGrid:
    """One sweep: a list of shapes, run with every method."""

    name: str
    device: torch.device
    dtype: torch.dtype
    shapes: list[dict]  # each: batch, heads, seq_len, head_dim, causal
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    warmup: int = 1  # untimed calls before timing; on the CPU the memory measurement counts as one
    min_repeats: int = 3
    max_repeats: int = 20
    budget_s: float = 1.0  # timing budget of one measurement
    method_budget_s: float = 30.0  # skip a method when one measurement is predicted to take longer
    block: int = 128  # tile size of flash-pytorch
    memory_cap_bytes: int | None = None
    stop_when_oom: str | None = None  # memory grid: stop growing n once this method runs out of memory
    timer: str = "auto"  # see time_call; "process_time" on a shared CPU
    notes: list[str] = field(default_factory=list)


def make_grid(name: str, device: torch.device | str | None = None, quick: bool = False) -> AttentionGrid:
    """The named attention grid (``cpu``, ``gpu`` or ``memory``) for ``device``; ``quick`` = tiny sizes."""
    if name not in ("cpu", "gpu", "memory"):
        raise ValueError(f"unknown attention grid {name!r}; choose cpu, gpu or memory (decode is separate)")
    if name == "cpu":
        device = torch.device("cpu")
    elif name == "gpu":
        device = torch.device("cuda")
    else:
        device = torch.device(device) if device is not None else _default_device()
    on_gpu = device.type == "cuda"

    if name == "cpu":
        lengths = [64, 128] if quick else [256, 512, 1024, 2048, 4096]
        heads, head_dim = (2, 16) if quick else (8, 64)
        return AttentionGrid(
            name, device, torch.float32,
            [dict(batch=1, heads=heads, seq_len=n, head_dim=head_dim, causal=False) for n in lengths],
            min_repeats=2 if quick else 3, max_repeats=3 if quick else 10, budget_s=0.05 if quick else 1.0,
            method_budget_s=60.0, block=32 if quick else 256, memory_cap_bytes=6 * 2**30,
            notes=["fp32, batch 1, 8 heads, head dim 64, not causal" if not quick else "quick: tiny sizes"],
        )
    if name == "gpu":
        tokens = 1024 if quick else 16384  # batch * seq_len stays constant: the work per token is fixed
        lengths = [128, 256] if quick else [512, 1024, 2048, 4096, 8192, 16384]
        shapes = [dict(batch=tokens // n, heads=2048 // d, seq_len=n, head_dim=d, causal=causal)
                  for d in (64, 128) for causal in (False, True) for n in lengths]
        return AttentionGrid(
            name, device, torch.bfloat16, shapes, min_repeats=3, max_repeats=50, budget_s=0.2,
            method_budget_s=15.0, block=1024,
            notes=["bf16 forward, hidden size 2048 (32 heads of 64 or 16 heads of 128), batch x seq_len = 16384"],
        )
    # memory
    dtype = torch.bfloat16 if on_gpu else torch.float32
    if quick:
        lengths = [64, 128, 256]
    elif on_gpu:
        lengths = [512 * 2**i for i in range(9)]  # up to 131072; the grid stops once naive runs out of memory
    else:
        lengths = [256, 512, 1024, 2048, 4096]
    grid = AttentionGrid(
        name, device, dtype,
        [dict(batch=1, heads=2 if quick else 16, seq_len=n, head_dim=16 if quick else 64, causal=False)
         for n in lengths],
        min_repeats=1, max_repeats=3, budget_s=0.5, method_budget_s=90.0,
        block=32 if quick else (1024 if on_gpu else 256), stop_when_oom="naive" if on_gpu else None,
    )
    if on_gpu:
        grid.notes.append("batch 1, 16 heads, head dim 64, bf16; n doubles until naive attention runs out of memory")
    elif not quick:
        grid.memory_cap_bytes = 6 * 2**30
        grid.notes.append(
            "CPU: n stops at 4096. Naive attention there already peaks at ~2 GiB (two 16 x 4096 x 4096 fp32 "
            "matrices); n = 8192 would need ~8 GiB of this 24 GiB machine shared with other users, and "
            "minutes per call."
        )
    return grid


def _default_device() -> torch.device:
    try:
        from course_utils.env import get_device

        return get_device()
    except ImportError:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def run_grid(grid: AttentionGrid, progress: Callable[[str], None] | None = print,
             checkpoint: Callable[[dict], None] | None = None) -> dict:
    """Measure every method on every shape of ``grid``; return the results dict (see :func:`save_results`).

    ``progress`` receives one line per row; ``checkpoint`` receives the partial results after each
    shape (the command line saves them, so a run cut short by a time limit still leaves its rows).
    """
    started = time.perf_counter()
    meta = machine_info(grid.device)
    meta.update(grid=grid.name, dtype=str(grid.dtype).replace("torch.", ""), block=grid.block,
                notes=list(grid.notes), methods=list(grid.methods))
    peak = peak_tflops(grid.device, grid.dtype)
    meta["peak_tflops"] = peak
    rows = []
    last_ok: dict[tuple, tuple[int, float]] = {}  # (method, head_dim, causal) -> (flops, seconds)
    stop = False
    for shape in grid.shapes:
        if stop:
            break
        inputs = tuple(torch.randn(shape["batch"], shape["heads"], shape["seq_len"], shape["head_dim"],
                                   dtype=grid.dtype, device=grid.device) for _ in range(3))
        reference, reference_method = None, None
        for name in grid.methods:
            key = (name, shape["head_dim"], shape["causal"])
            flops = attention_flops(shape["batch"], shape["heads"], shape["seq_len"], shape["seq_len"],
                                    shape["head_dim"], shape["causal"])
            skip_reason = None
            if key in last_ok:  # predict from the last size that ran: time grows with the FLOPs
                prev_flops, prev_s = last_ok[key]
                calls = grid.warmup + grid.min_repeats + (1 if grid.device.type == "cuda" else 0)
                predicted = prev_s * flops / prev_flops * calls
                if predicted > grid.method_budget_s:
                    skip_reason = f"predicted {predicted:.0f} s for this size, over the {grid.method_budget_s:.0f} s budget"
            row, output = measure_attention(
                name, **shape, dtype=grid.dtype, device=grid.device, inputs=inputs, reference=reference,
                reference_method=reference_method, warmup=grid.warmup, min_repeats=grid.min_repeats,
                max_repeats=grid.max_repeats, budget_s=grid.budget_s, block=grid.block,
                memory_cap_bytes=grid.memory_cap_bytes, skip_reason=skip_reason, device_peak_tflops=peak,
                timer=grid.timer,
            )
            rows.append(row)
            if row["status"] == "ok":
                last_ok[key] = (flops, row["time_ms"] / 1e3)
                if reference is None:
                    reference, reference_method = output, name
            if progress:
                progress(_row_line(row))
            del output
            if name == grid.stop_when_oom and row["status"] == "oom":
                stop = True
        del inputs, reference
        if grid.device.type == "cuda":
            torch.cuda.empty_cache()
        if checkpoint is not None:
            checkpoint({"grid": grid.name, "kind": "attention", "meta": {**meta, "partial": True}, "rows": rows,
                        "summary": []})
    if hasattr(os, "getloadavg"):
        meta["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    meta["wall_s"] = round(time.perf_counter() - started, 1)
    results = {"grid": grid.name, "kind": "attention", "meta": meta, "rows": rows}
    results["summary"] = summarize(results)
    return results


def _row_line(row: dict) -> str:
    shape = f"b={row['batch']} h={row['heads']} n={row['seq_len']} d={row['head_dim']}" + (" causal" if row["causal"] else "")
    if row["status"] != "ok":
        return f"  {row['method']:<15} {shape:<34} {row['status']}: {row['reason']}"
    return (f"  {row['method']:<15} {shape:<34} {row['time_ms']:10.3f} ms  {row['tflops']:8.3f} TFLOP/s  "
            f"{row['peak_mem_mib']:10.1f} MiB")


def summarize(results: dict) -> list[dict]:
    """Per (head dim, causal): at the largest n where naive ran, each method's speed-up and memory vs naive."""
    rows = results["rows"]
    summary = []
    for head_dim, causal in sorted({(r["head_dim"], r["causal"]) for r in rows}):
        group = [r for r in rows if r["head_dim"] == head_dim and r["causal"] == causal]
        naive_ok = [r for r in group if r["method"] == "naive" and r["status"] == "ok"]
        if not naive_ok:
            continue
        base = max(naive_ok, key=lambda r: r["seq_len"])
        for r in group:
            if r["seq_len"] == base["seq_len"] and r["status"] == "ok" and r["method"] != "naive":
                summary.append({
                    "method": r["method"], "head_dim": head_dim, "causal": causal, "seq_len": base["seq_len"],
                    "batch": base["batch"],
                    "speedup_vs_naive": base["time_ms"] / r["time_ms"],
                    "memory_vs_naive": r["peak_mem_mib"] / base["peak_mem_mib"] if base["peak_mem_mib"] else None,
                })
        largest = max(r["seq_len"] for r in group)
        naive_at_largest = [r for r in group if r["method"] == "naive" and r["seq_len"] == largest]
        if largest > base["seq_len"] and naive_at_largest:
            summary.append({"method": "naive", "head_dim": head_dim, "causal": causal, "seq_len": largest,
                            "batch": naive_at_largest[0]["batch"], "note": naive_at_largest[0]["status"]})
    return summary


# --------------------------------------------------------------------------------------------
# 7. Decoding with and without a KV cache
# --------------------------------------------------------------------------------------------

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
        return DecodeConfig(vocab_size=8192, d_model=1024, num_heads=16, num_layers=12, batch=8,
                            prompt_len=32, new_tokens=1024, dtype=torch.bfloat16)
    return DecodeConfig()


def _generate(model, prompt: torch.Tensor, new_tokens: int, use_cache: bool,
              checkpoints: set[int]) -> tuple[torch.Tensor, dict[int, float]]:
    """Greedy generation; returns the tokens and the elapsed seconds after each checkpoint count."""
    device = prompt.device
    caches = model.new_caches() if use_cache else None
    tokens, step_input = prompt, prompt  # (B, T)
    elapsed = {}
    _sync(device)
    start = time.perf_counter()
    for step in range(1, new_tokens + 1):
        # With a cache only the new token goes through the model; without one, the whole prefix again.
        logits = model(step_input, caches) if use_cache else model(tokens)  # (B, T_in, vocab)
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
        step_input = next_token if use_cache else tokens
        if step in checkpoints:
            _sync(device)
            elapsed[step] = time.perf_counter() - start
    return tokens, elapsed


def run_decode_benchmark(device: torch.device | str | None = None, quick: bool = False,
                         config: DecodeConfig | None = None, progress: Callable[[str], None] | None = print) -> dict:
    """Tokens per second of greedy decoding with a KV cache and without one (recomputing the prefix).

    The model is the course's :class:`course_utils.models.DecoderOnlyLM` with random weights: speed does
    not depend on what the weights learned. Timing includes the prompt (prefill) in both modes.
    """
    from course_utils.models import DecoderOnlyLM

    device = torch.device(device) if device is not None else _default_device()
    config = config or decode_config(device, quick)
    started = time.perf_counter()
    meta = machine_info(device)
    meta.update(grid="decode", dtype=str(config.dtype).replace("torch.", ""),
                model={k: v for k, v in vars(config).items() if k != "dtype"},
                notes=[f"DecoderOnlyLM with random weights, greedy decoding, batch {config.batch}, "
                       f"prompt {config.prompt_len} tokens; times include the prompt"])
    torch.manual_seed(0)
    model = DecoderOnlyLM(config.vocab_size, d_model=config.d_model, num_heads=config.num_heads,
                          num_layers=config.num_layers, max_len=config.prompt_len + config.new_tokens,
                          dropout=0.0).to(device=device, dtype=config.dtype).eval()
    prompt = torch.randint(0, config.vocab_size, (config.batch, config.prompt_len), device=device)
    checkpoints = {2**i for i in range(1, 31) if 2**i <= config.new_tokens} | {config.new_tokens}
    rows, generated = [], {}
    with torch.inference_mode():
        for use_cache in (False, True):  # warm-up: kernels, allocator, caches of the math libraries
            _generate(model, prompt, min(4, config.new_tokens), use_cache, set())
        for use_cache in (False, True):
            mode = "kv-cache" if use_cache else "no-cache"
            tokens, elapsed = _generate(model, prompt, config.new_tokens, use_cache, checkpoints)
            generated[mode] = tokens
            for count in sorted(elapsed):
                rows.append({"mode": mode, "tokens": count, "seconds": elapsed[count],
                             "tokens_per_s": count * config.batch / elapsed[count], "status": "ok"})
            if progress:
                progress(f"  {mode:<9} {config.new_tokens} tokens x batch {config.batch}: "
                         f"{elapsed[config.new_tokens]:.2f} s")
    by_mode = {(r["mode"], r["tokens"]): r for r in rows}
    for r in rows:
        if r["mode"] == "kv-cache":
            r["speedup"] = by_mode[("no-cache", r["tokens"])]["seconds"] / r["seconds"]
    same = (generated["kv-cache"] == generated["no-cache"]).all(dim=0)  # (T,) per position, over the batch
    first_diff = None if bool(same.all()) else int((~same).nonzero()[0]) - config.prompt_len
    meta["wall_s"] = round(time.perf_counter() - started, 1)
    if hasattr(os, "getloadavg"):
        meta["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    final = by_mode[("kv-cache", config.new_tokens)]
    summary = [{"tokens": config.new_tokens, "speedup_kv_cache": final["speedup"],
                "tokens_identical": first_diff is None, "first_different_token": first_diff}]
    return {"grid": "decode", "kind": "decode", "meta": meta, "rows": rows, "summary": summary}


# --------------------------------------------------------------------------------------------
# 8. Storing, reading, printing and plotting results
# --------------------------------------------------------------------------------------------

def default_results_dir() -> Path:
    """The repository's ``benchmarks/`` folder (the stored tables of chapter 12), or ``./benchmarks``
    when the package runs from an installed copy rather than from the repository."""
    in_repository = Path(__file__).resolve().parent.parent / "benchmarks"
    return in_repository if in_repository.is_dir() else Path.cwd() / "benchmarks"


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000 or abs(value) < 10 ** -(digits):
            return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def format_table(results: dict) -> str:
    """The results as a Markdown document: a header about the machine, the table, the summary."""
    meta = results["meta"]
    lines = [f"# Benchmark `{results['grid']}` on {meta['device_name']}", ""]
    facts = [f"torch {meta['torch']}", f"device `{meta['device']}`", f"dtype {meta['dtype']}",
             f"CPU threads {meta['cpu_threads']}", f"date {meta['date']}"]
    if meta.get("triton"):
        facts.append(f"triton {meta['triton']}")
    if meta.get("load_average_start"):
        facts.append(f"load average (1/5/15 min) {meta['load_average_start']} at start, "
                     f"{meta.get('load_average_end')} at end")
    if meta.get("peak_tflops"):
        facts.append(f"peak {meta['peak_tflops']:.0f} TFLOP/s (datasheet, dense)")
    if meta.get("partial"):
        facts.append("**partial results**: the run ended before the grid was complete")
    else:
        facts.append(f"wall time {meta.get('wall_s')} s")
    lines += [f"- {f}" for f in facts] + [f"- {n}" for n in meta.get("notes", [])] + [""]

    if results["kind"] == "decode":
        lines += ["| mode | new tokens | seconds | tokens/s | speed-up of the cache |", "|---|---:|---:|---:|---:|"]
        for r in results["rows"]:
            lines.append(f"| {r['mode']} | {r['tokens']} | {_fmt(r['seconds'])} | {_fmt(r['tokens_per_s'])} | "
                         f"{_fmt(r.get('speedup'))} |")
        s = results["summary"][0]
        lines += ["", f"KV cache speed-up at {s['tokens']} tokens: **{s['speedup_kv_cache']:.2f}x**; "
                      + ("both modes generated identical tokens."
                         if s["tokens_identical"] else
                         f"the tokens first differ at new token {s['first_different_token']} (rounding in "
                         f"{meta['dtype']} changes a near-tie in the argmax)."), ""]
        return "\n".join(lines)

    lines += ["| method | batch | heads | n | d | causal | time (ms) | TFLOP/s | % peak | peak mem (MiB) "
              "| max abs diff | status |",
              "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in results["rows"]:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
        status = status.replace("|", "/")
        lines.append(
            f"| {r['method']} | {r['batch']} | {r['heads']} | {r['seq_len']} | {r['head_dim']} | "
            f"{'yes' if r['causal'] else 'no'} | {_fmt(r['time_ms'])} | {_fmt(r['tflops'])} | "
            f"{_fmt(r['pct_of_peak'], 2)} | {_fmt(r['peak_mem_mib'])} | {_fmt(r['max_abs_diff'], 2)} | {status} |"
        )
    if results.get("summary"):
        lines += ["", "## Against naive attention at the largest n it ran", "",
                  "| method | d | causal | n | speed-up vs naive | peak memory vs naive |", "|---|---:|---|---:|---:|---:|"]
        for s in results["summary"]:
            if "note" in s:
                continue
            lines.append(f"| {s['method']} | {s['head_dim']} | {'yes' if s['causal'] else 'no'} | {s['seq_len']} | "
                         f"{s['speedup_vs_naive']:.2f}x | {_fmt(s['memory_vs_naive'])} |")
        for s in results["summary"]:
            if "note" in s:
                lines.append(f"\nNaive attention at n = {s['seq_len']} (d={s['head_dim']}, "
                             f"{'causal' if s['causal'] else 'not causal'}): {s['note']}.")
    lines += ["", "`max abs diff` compares each output with the first method that ran on that shape "
                  "(`diff_vs` in the json).", ""]
    return "\n".join(lines)


def save_results(results: dict, out_dir: str | Path, plot: bool = True) -> dict[str, Path]:
    """Write ``<out_dir>/<device slug>/<grid>.json``, ``.md`` and (``plot=True``) ``.png``; return the paths."""
    meta = results["meta"]
    folder = Path(out_dir) / _slugify(meta["device_name"], torch.device(meta["device"]).type == "cuda")
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"json": folder / f"{results['grid']}.json", "md": folder / f"{results['grid']}.md"}
    paths["json"].write_text(json.dumps(results, indent=1) + "\n")
    paths["md"].write_text(format_table(results))
    if plot:
        paths["png"] = folder / f"{results['grid']}.png"
        plot_results(results, path=paths["png"])
    return paths


def available_results(root: str | Path | None = None) -> list[Path]:
    """Every stored ``<device>/<grid>.json`` under ``root`` (default: the repository's benchmarks/)."""
    root = Path(root) if root is not None else default_results_dir()
    return sorted(root.glob("*/*.json"))


def load_results(path: str | Path) -> dict:
    """Read a results file written by :func:`save_results` (``benchmarks/<device>/<grid>.json``)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; pass one of its .json files: "
                                f"{[p.name for p in sorted(path.glob('*.json'))]}")
    if not path.exists():
        stored = [str(p) for p in available_results(path.parent.parent if path.parent.name else None)]
        raise FileNotFoundError(f"no benchmark results at {path}. Stored results: {stored or 'none'}. "
                                "Make them with `python -m course_utils.bench --grid cpu`.")
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); rerun the benchmark to rewrite it") from exc
    missing = {"grid", "kind", "meta", "rows"} - set(results)
    if missing:
        raise ValueError(f"{path} is not a benchmark results file: it lacks {sorted(missing)}")
    return results


_METRIC_LABELS = {
    "time_ms": "time per call (ms)",
    "tflops": "TFLOP/s",
    "peak_mem_mib": "peak memory (MiB)",
}


def plot_results(results: dict, metrics: tuple[str, ...] | None = None, path: str | Path | None = None):
    """Log-log plots of stored results: one column per (head dim, causal), one row per metric.

    Default metrics: time and peak memory (``cpu``, ``memory`` grids), time and TFLOP/s (``gpu``).
    The memory panels carry dashed ``~n`` and ``~n^2`` guides. Decode results get time vs tokens.
    Returns a matplotlib ``Figure`` (shown by Jupyter when it is a cell's last value); ``path`` saves it.
    """
    from matplotlib.figure import Figure

    if results["kind"] == "decode":
        fig = _plot_decode(results)
    else:
        if metrics is None:
            metrics = ("time_ms", "tflops") if results["grid"] == "gpu" else ("time_ms", "peak_mem_mib")
        unknown = set(metrics) - set(_METRIC_LABELS)
        if unknown:
            raise ValueError(f"unknown metric(s) {sorted(unknown)}; choose from {sorted(_METRIC_LABELS)}")
        rows = results["rows"]
        groups = sorted({(r["head_dim"], r["causal"]) for r in rows})
        methods = [m for m in results["meta"].get("methods", METHODS) if any(r["method"] == m for r in rows)]
        fig = Figure(figsize=(4.6 * len(groups), 3.6 * len(metrics)), layout="constrained")
        axes = fig.subplots(len(metrics), len(groups), squeeze=False)
        for j, (head_dim, causal) in enumerate(groups):
            group = [r for r in rows if r["head_dim"] == head_dim and r["causal"] == causal]
            for i, metric in enumerate(metrics):
                ax = axes[i][j]
                for method in methods:
                    ok = sorted((r["seq_len"], r[metric]) for r in group
                                if r["method"] == method and r["status"] == "ok" and r[metric])
                    failed = sorted(r["seq_len"] for r in group if r["method"] == method and r["status"] == "oom")
                    if not ok:
                        continue
                    label = method + (f" (OOM at n={failed[0]})" if failed else "")
                    ax.plot([n for n, _ in ok], [y for _, y in ok], marker="o", label=label)
                if metric == "peak_mem_mib":
                    _add_slope_guides(ax, group)
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                lengths = sorted({r["seq_len"] for r in group})
                ax.set_xticks(lengths, labels=[f"{n // 1024}k" if n >= 1024 else str(n) for n in lengths])
                ax.set_xlabel("sequence length n")
                ax.set_ylabel(_METRIC_LABELS[metric])
                ax.grid(True, which="both", alpha=0.3)
                ax.set_title(f"d={head_dim}, {'causal' if causal else 'not causal'}", fontsize=10)
                if j == 0 and (i == 0 or metric == "peak_mem_mib"):
                    ax.legend(fontsize=7)
        fig.suptitle(f"{results['grid']}: {results['meta']['device_name']}, {results['meta']['dtype']}")
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _add_slope_guides(ax, group: list[dict]) -> None:
    """Dashed lines of slope 1 (from the lowest first point) and 2 (from the highest) in log-log."""
    ok = [r for r in group if r["status"] == "ok" and r["peak_mem_mib"]]
    if not ok:
        return
    n0 = min(r["seq_len"] for r in ok)
    n1 = max(r["seq_len"] for r in ok)
    first = [r["peak_mem_mib"] for r in ok if r["seq_len"] == n0]
    xs = [n0, n1]
    ax.plot(xs, [min(first), min(first) * n1 / n0], "k--", lw=0.8, alpha=0.5, label="grows as n")
    ax.plot(xs, [max(first), max(first) * (n1 / n0) ** 2], "k:", lw=0.8, alpha=0.5, label="grows as n²")


def _plot_decode(results: dict):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.5, 3.6), layout="constrained")
    ax_time, ax_rate = fig.subplots(1, 2)
    for mode in ("no-cache", "kv-cache"):
        rows = [r for r in results["rows"] if r["mode"] == mode and r["status"] == "ok"]
        ax_time.plot([r["tokens"] for r in rows], [r["seconds"] for r in rows], marker="o", label=mode)
        ax_rate.plot([r["tokens"] for r in rows], [r["tokens_per_s"] for r in rows], marker="o", label=mode)
    counts = sorted({r["tokens"] for r in results["rows"]})
    for ax, label in ((ax_time, "total time (s)"), (ax_rate, "tokens per second")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(counts, labels=[str(c) for c in counts])
        ax.set_xlabel("new tokens generated")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"decode: {results['meta']['device_name']}, {results['meta']['dtype']}")
    return fig


# --------------------------------------------------------------------------------------------
# 9. Command line
# --------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.bench",
        description="Attention benchmarks of chapter 12: time, TFLOP/s and peak memory of naive attention, "
                    "PyTorch's SDPA backends and our FlashAttention; decoding with and without a KV cache.",
    )
    parser.add_argument("--grid", choices=(*GRIDS, "all"), default="all",
                        help="cpu: fp32 sweep on the CPU; gpu: bf16 sweep on CUDA; memory: n doubles; "
                             "decode: KV cache on/off; all: every grid this machine can run (default)")
    parser.add_argument("--out", default=str(default_results_dir()),
                        help="folder for <device>/<grid>.json, .md and .png (default: the repository's benchmarks/)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for tests (seconds)")
    parser.add_argument("--device", default=None, help="device of the memory and decode grids (default: GPU if any)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for PyTorch (default: leave as is)")
    parser.add_argument("--methods", default=None,
                        help=f"comma-separated subset of the attention methods: {','.join(METHODS)}")
    parser.add_argument("--no-plot", action="store_true", help="write json and md only")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``course bench`` / ``make bench``. Returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            print(f"error: --threads must be at least 1, got {args.threads}", file=sys.stderr)
            return 2
        torch.set_num_threads(args.threads)
    methods = None
    if args.methods:
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            print(f"error: unknown method(s) {unknown}; choose from {list(METHODS)}", file=sys.stderr)
            return 2
    has_gpu = torch.cuda.is_available()
    if args.grid == "all":
        grids = ["gpu", "memory", "decode"] if has_gpu else ["cpu", "memory", "decode"]
    else:
        grids = [args.grid]
    if "gpu" in grids and not has_gpu:
        print("error: the gpu grid needs a CUDA GPU and none is visible here; run `--grid cpu` instead, "
              "or benchmarks/gpu_grid.sh on a GPU machine", file=sys.stderr)
        return 2
    if args.device is not None:
        try:
            device = torch.device(args.device)
        except RuntimeError:
            print(f"error: --device {args.device!r} is not a device name (cpu, cuda, cuda:1...)", file=sys.stderr)
            return 2
        if device.type == "cuda" and not has_gpu:
            print(f"error: --device {args.device} was asked for but no CUDA GPU is visible", file=sys.stderr)
            return 2
    else:
        device = None

    for name in grids:
        print(f"== grid {name}{' (quick)' if args.quick else ''} ==", flush=True)
        if name == "decode":
            results = run_decode_benchmark(device, quick=args.quick)
        else:
            grid = make_grid(name, device, quick=args.quick)
            if methods:
                grid.methods = methods
            results = run_grid(grid, checkpoint=lambda partial: save_results(partial, args.out, plot=False))
        paths = save_results(results, args.out, plot=not args.no_plot)
        print()
        print(format_table(results))
        print("wrote " + ", ".join(str(p) for p in paths.values()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
