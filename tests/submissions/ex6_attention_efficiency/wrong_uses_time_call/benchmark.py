from course_utils.bench import time_call as measured  # the course's own harness, under another name


def benchmark(fn, lengths, batch: int = 1, heads: int = 4, head_dim: int = 32, device="cpu",
              dtype: torch.dtype = torch.float32, warmup: int = 2, repeats: int = 5) -> list[dict]:
    """Median seconds and peak bytes of fn(q, k, v) for each sequence length, timed by course_utils.bench."""
    results = []
    for n in lengths:
        q, k, v = (torch.randn(batch, heads, n, head_dim, device=device, dtype=dtype) for _ in range(3))
        timing = measured(lambda: fn(q, k, v), "cpu", warmup=warmup, min_repeats=repeats, max_repeats=repeats,
                          budget_s=0.0, timer="perf_counter")
        peak_bytes, _ = peak_memory(lambda: fn(q, k, v), device)
        results.append({"length": n, "seconds": timing.median_s, "peak_bytes": int(peak_bytes)})
    return results
