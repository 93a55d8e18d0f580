"""One measurement, one row: time, peak memory and correctness of one method on one shape.

A method that cannot run is a row too, never a crash: ``unsupported`` (and why), ``oom`` when the
size does not fit, ``skipped`` when it is predicted to take too long or to need too much memory,
``error`` for anything else, with the message.
"""

from __future__ import annotations

import contextlib
import gc
import time
import warnings
from dataclasses import dataclass
from functools import cached_property

import torch

from .machine import peak_tflops
from .memory import peak_memory
from .methods import METHODS, AttentionMethod, attention_flops
from .records import AttentionRow
from .timing import synchronize, time_call

__all__ = ["AttentionShape", "MeasureSettings", "measure_attention"]

_OOM_ERRORS = tuple({torch.cuda.OutOfMemoryError, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)})


@dataclass(frozen=True)
class AttentionShape:
    """The inputs of one call: ``q``, ``k``, ``v`` of shape ``(batch, heads, seq_len, head_dim)``."""

    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool = False

    @property
    def flops(self) -> int:
        return attention_flops(self.batch, self.heads, self.seq_len, self.seq_len, self.head_dim, self.causal)

    def random_inputs(self, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
        return tuple(
            torch.randn(self.batch, self.heads, self.seq_len, self.head_dim, dtype=dtype, device=device)
            for _ in range(3)
        )


@dataclass
class MeasureSettings:
    """How a measurement runs: where, in which precision, for how long, and within which limits.

    ``warmup`` untimed calls come first (on the CPU the memory measurement counts as one); then at
    least ``min_repeats`` timed calls, more until ``budget_s`` seconds or ``max_repeats``. ``timer`` is
    :func:`~course_utils.bench.timing.time_call`'s (``"process_time"`` on a shared CPU). ``block`` is
    the tile size of the methods that take one; a method whose estimated memory is over
    ``memory_cap_bytes`` is skipped without running.
    """

    device: torch.device | str
    dtype: torch.dtype
    warmup: int = 1
    min_repeats: int = 3
    max_repeats: int = 20
    budget_s: float = 1.0
    block: int = 128
    memory_cap_bytes: int | None = None
    timer: str = "auto"

    def __post_init__(self):
        self.device = torch.device(self.device)

    @cached_property
    def peak_tflops(self) -> float | None:
        """The device's datasheet peak for this dtype (known GPUs), for the rows' ``pct_of_peak``."""
        return peak_tflops(self.device, self.dtype)


def _is_unsupported(exc: BaseException) -> bool:
    """PyTorch's words when a pinned SDPA backend cannot take these inputs on this device."""
    text = str(exc)
    return any(s in text for s in ("No viable backend", "No available kernel", "not supported"))


def _is_cpu_oom(exc: BaseException) -> bool:
    text = str(exc)
    return "can't allocate memory" in text or "DefaultCPUAllocator" in text


def _first_line(exc: BaseException, limit: int) -> str:
    return str(exc).splitlines()[0][:limit] if str(exc) else ""


def _estimated_bytes(method: AttentionMethod, shape: AttentionShape, dtype: torch.dtype) -> int:
    b, h, n, d = shape.batch, shape.heads, shape.seq_len, shape.head_dim
    size = torch.finfo(dtype).bits // 8
    if method.materialises:
        return 3 * b * h * n * n * size + 4 * b * h * n * d * size  # scores, weights, a temporary
    return 8 * b * h * n * d * size


class _Unsupported(Exception):
    """Raised inside measure_attention when a method cannot run on these inputs here."""


@contextlib.contextmanager
def refused_as_unsupported():
    """Inside it, a pinned SDPA backend that refuses these inputs on this device (PyTorch's "No available
    kernel") raises ``_Unsupported`` with PyTorch's reasons (its warnings say why each backend declined);
    any other error passes through as it is."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except RuntimeError as exc:
            if _is_unsupported(exc) and not _is_cpu_oom(exc):
                why = "; ".join(str(w.message).splitlines()[0] for w in caught) or _first_line(exc, 400)
                raise _Unsupported(why[:400]) from None
            raise


def _run_measured(
    method: AttentionMethod, shape: AttentionShape, settings: MeasureSettings, inputs, row: AttentionRow
) -> torch.Tensor:
    """Measure memory, then time; fill ``row`` in. Raises what the method raises (``_Unsupported`` for a
    backend that refuses these inputs)."""
    device = settings.device
    q, k, v = inputs
    options = {"block": settings.block} if method.uses_block else {}

    def call():
        return method.fn(q, k, v, shape.causal, **options)

    with refused_as_unsupported():
        if device.type == "cuda":
            # Warm up outside the memory measurement: the first CUDA call may allocate
            # workspaces (cuBLAS, autotuning) that stay for the whole process.
            call()
            synchronize(device)
        # On the CPU the memory measurement doubles as the warm-up call: one-off costs there
        # (thread pools, library init) do not allocate tensors, and slow sizes save a call.
        started = time.perf_counter()
        peak_bytes, output = peak_memory(call, device)
        first_call_s = time.perf_counter() - started
    timing = time_call(
        call,
        device,
        warmup=max(0, settings.warmup - 1),
        min_repeats=settings.min_repeats,
        max_repeats=settings.max_repeats,
        budget_s=settings.budget_s,
        timer=settings.timer,
        expected_call_s=first_call_s,
    )
    row.time_ms = timing.median_s * 1e3
    row.time_min_ms = None if timing.min_s is None else timing.min_s * 1e3
    row.repeats, row.timer = timing.repeats, timing.timer
    row.peak_mem_mib = peak_bytes / 2**20
    row.tflops = row.flops / timing.median_s / 1e12
    if settings.peak_tflops:
        row.pct_of_peak = 100.0 * row.tflops / settings.peak_tflops
    return output


def measure_attention(
    method_name: str,
    shape: AttentionShape,
    settings: MeasureSettings,
    *,
    inputs: tuple[torch.Tensor, ...] | None = None,
    reference: tuple[str, torch.Tensor] | None = None,
    skip_reason: str | None = None,
) -> tuple[AttentionRow, torch.Tensor | None]:
    """Time and measure one method on one shape. Returns ``(row, output or None)``.

    ``inputs`` are ``(q, k, v)`` (random ones of ``shape`` when not given); ``reference`` is
    ``(method name, its output on the same inputs)``, which the row's ``max_abs_diff`` compares with;
    ``skip_reason`` records the row as skipped without running it. Never raises for out-of-memory,
    unsupported backends or other runtime failures: those become the row's status.
    """
    if method_name not in METHODS:
        raise ValueError(f"unknown method {method_name!r}; choose from {list(METHODS)}")
    method, device = METHODS[method_name], settings.device
    row = AttentionRow(
        method=method_name,
        sdpa_backend=method.sdpa_backend,
        batch=shape.batch,
        heads=shape.heads,
        seq_len=shape.seq_len,
        head_dim=shape.head_dim,
        causal=shape.causal,
        dtype=str(settings.dtype).replace("torch.", ""),
        device=device.type,
        flops=shape.flops,
        block=settings.block if method.uses_block else None,
    )
    need = _estimated_bytes(method, shape, settings.dtype)
    if method.cuda_only and device.type != "cuda":
        row.status, row.reason = "unsupported", "needs a CUDA GPU"
    elif skip_reason:
        row.status, row.reason = "skipped", skip_reason
    elif settings.memory_cap_bytes is not None and need > settings.memory_cap_bytes:
        row.status, row.reason = (
            "skipped",
            (f"needs ~{need / 2**30:.1f} GiB, over this grid's cap of {settings.memory_cap_bytes / 2**30:.1f} GiB"),
        )
    if not row.ok:
        return row, None

    failure = None
    try:
        inputs = inputs if inputs is not None else shape.random_inputs(settings.dtype, device)
        output = _run_measured(method, shape, settings, inputs, row)
        if reference is not None:
            row.diff_vs = reference[0]
            row.max_abs_diff = (output.float() - reference[1].float()).abs().max().item()
    except _Unsupported as exc:
        failure = ("unsupported", str(exc))
    except _OOM_ERRORS as exc:
        failure = ("oom", _first_line(exc, 200) or "out of memory")
    except RuntimeError as exc:
        failure = (
            ("oom", _first_line(exc, 200))
            if _is_cpu_oom(exc)
            else ("error", f"{type(exc).__name__}: {_first_line(exc, 300)}")
        )
    except Exception as exc:  # a compiler error in a kernel, say: record it and go on with the grid
        failure = ("error", f"{type(exc).__name__}: {_first_line(exc, 300)}")
    if failure is None:
        return row, output
    row.status, row.reason = failure
    row.time_ms = row.time_min_ms = row.repeats = row.timer = row.peak_mem_mib = row.tflops = None
    row.pct_of_peak = row.max_abs_diff = row.diff_vs = None
    if row.status != "unsupported":
        # The traceback held the failed call's tensors until now; hand the memory back.
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row, None
