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
- **Peak memory, not final memory** (:func:`peak_memory`): the high-water mark *during* the call,
  above what was allocated before it (inputs excluded, output included).
- **FLOPs.** ``Q K^T`` and ``P V`` each cost ``2 n_q n_k d`` per (batch, head): ``4 b h n^2 d`` in
  all, half of it under a causal mask (FlashAttention's own accounting; softmax is not counted).

The methods
-----------
========================  ==========================================================================
``naive``                 :func:`course_utils.attention.naive_attention`: the ``n x n`` matrix materialised
``sdpa-math``             ``F.scaled_dot_product_attention`` pinned to its math backend (also ``n x n``)
``sdpa-flash``            pinned to the FlashAttention backend (on CPU: PyTorch's tiled CPU kernel)
``sdpa-efficient``        pinned to the memory-efficient (xFormers) backend, CUDA only
``sdpa-cudnn``            pinned to cuDNN's fused attention, CUDA only
``flash-pytorch``         :func:`course_utils.flash.flash_attention`, our tiled Python version
``flash-triton``          :func:`course_utils.flash_triton.flash_attention_triton`, our GPU kernel
========================  ==========================================================================

A method that cannot run in a setting is recorded with status ``unsupported`` (and why), a size
that does not fit with ``oom``, one predicted to take too long with ``skipped``: a row, never a crash.
On a GPU older than Ampere (T4, V100: compute capability below 8.0) PyTorch has no FlashAttention
kernel: the pinned ``sdpa-flash`` call raises "No available kernel" and its row says why; the grids
measure such GPUs in fp16 (:func:`~course_utils.bench.machine.half_dtype`), and
:func:`compare_fused` compares with the fastest fused kernel that did run.

On CUDA the ``meta`` of a table records ``fp16_bf16_reduction_math_sdp_allowed``: False by default,
which means the ``sdpa-math`` rows computed their bf16/fp16 inputs in fp32.

The package, in the order a measurement flows
---------------------------------------------
``methods``   the implementations and their FLOPs      ``timing``   :func:`time_call`, :func:`time_interleaved`
``memory``    :func:`peak_memory`                      ``machine``  device names, datasheet peaks, load
``records``   the typed rows and results               ``measure``  one method on one shape -> one row
``grids``     sweeps and their summary                 ``decode``   generation with and without a KV cache
``results``   storing, reading, printing the tables    ``cli``      the command line
``compare``   reading a grid: fused kernels against a baseline (and what did not run, and why),
              TFLOP/s as a share of the peak, 16-bit accuracy against a reference, panels side by side

Grids and the command line
--------------------------
``python -m course_utils.bench --grid cpu|gpu|memory|decode|all [--quick] [--out benchmarks]``
writes ``<out>/<device>/<grid>.json``, ``<grid>.md`` and ``<grid>.png`` and prints the table.
Chapter 12 reads the stored tables with :func:`load_results` and draws them with :func:`plot_results`
(:func:`course_utils.plotting.plot_benchmark`).
"""

from __future__ import annotations

from ..attention import naive_attention
from ..plotting import plot_benchmark as plot_results
from .cli import main
from .compare import (
    BASELINE_METHODS,
    FUSED_METHODS,
    AccuracyReport,
    FusedComparison,
    accuracy_against_reference,
    compare_fused,
    format_throughput_table,
    plot_side_by_side,
    throughput_table,
)
from .decode import DecodeConfig, run_decode_benchmark
from .grids import AttentionGrid, make_grid, run_grid
from .machine import half_dtype, math_sdp_reduced_precision, peak_tflops
from .measure import AttentionShape, MeasureSettings, measure_attention
from .memory import peak_memory
from .methods import METHODS, AttentionMethod, attention_flops
from .records import AttentionRow, BenchmarkResults, DecodeRow
from .results import available_results, default_results_dir, format_table, load_results, save_results
from .timing import Timing, time_call, time_interleaved

__all__ = [
    "naive_attention",
    "AttentionMethod",
    "METHODS",
    "attention_flops",
    "Timing",
    "time_call",
    "time_interleaved",
    "peak_memory",
    "AttentionShape",
    "MeasureSettings",
    "AttentionRow",
    "DecodeRow",
    "BenchmarkResults",
    "measure_attention",
    "AttentionGrid",
    "make_grid",
    "run_grid",
    "DecodeConfig",
    "run_decode_benchmark",
    "save_results",
    "load_results",
    "available_results",
    "plot_results",
    "format_table",
    "default_results_dir",
    "main",
    "FUSED_METHODS",
    "BASELINE_METHODS",
    "FusedComparison",
    "compare_fused",
    "throughput_table",
    "format_throughput_table",
    "AccuracyReport",
    "accuracy_against_reference",
    "plot_side_by_side",
    "half_dtype",
    "math_sdp_reduced_precision",
    "peak_tflops",
]
