"""Peak memory of one call: the high-water mark *during* the call, on CUDA and on the CPU.

Attention's ``n x n`` matrix is freed before the call returns, so the memory left afterwards says
nothing. On CUDA the caching allocator keeps a peak counter. On the CPU PyTorch keeps no such counter,
so we replay the allocator's own record of every allocation and free that the profiler collects
(``profile_memory=True``) and take the running maximum. Both report the bytes *above* what was
allocated before the call (inputs excluded, output included).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable

import torch

from .timing import synchronize

__all__ = ["peak_memory"]


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
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before, result
    if device.type == "cpu":
        return _cpu_peak_memory(fn)
    raise ValueError(f"peak memory is measured on cpu or cuda, not {device.type}")
