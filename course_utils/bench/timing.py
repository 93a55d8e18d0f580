"""Timing a call correctly on the CPU and on CUDA: warm-up, synchronisation, median of repeats, turns."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["Timing", "time_call", "time_interleaved", "synchronize"]


@dataclass
class Timing:
    median_s: float
    min_s: float | None
    repeats: int | None  # None when triton's do_bench chose the count itself
    timer: str


def synchronize(device: torch.device) -> None:
    """Wait for the GPU to finish what was queued (CUDA calls return before the work is done)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _do_bench():
    try:
        from triton.testing import do_bench
    except Exception:
        return None
    return do_bench


def time_call(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    *,
    warmup: int = 1,
    min_repeats: int = 3,
    max_repeats: int = 30,
    budget_s: float = 1.0,
    timer: str = "auto",
    expected_call_s: float | None = None,
) -> Timing:
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
        synchronize(device)
        last_call_s = time.perf_counter() - start

    if device.type == "cuda":
        do_bench = _do_bench()
        want_do_bench = timer == "do_bench" or (timer == "auto" and last_call_s < 0.05)
        if want_do_bench and do_bench is not None:
            try:
                median_ms, min_ms = do_bench(fn, warmup=25, rep=max(100, int(budget_s * 1000)), quantiles=[0.5, 0.0])
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


def time_interleaved(
    calls: dict,
    device: torch.device | str = "cpu",
    *,
    rounds: int = 5,
    progress: Callable[[int], None] | None = None,
    **time_call_options,
) -> dict:
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
        result[key] = Timing(
            statistics.median(t.median_s for t in timings),
            min(t.min_s if t.min_s is not None else t.median_s for t in timings),
            None if None in repeats else sum(repeats),
            timings[0].timer,
        )
    return result
