def benchmark(fn, lengths, batch: int = 1, heads: int = 4, head_dim: int = 32, device="cpu",
              dtype: torch.dtype = torch.float32, warmup: int = 2, repeats: int = 5) -> list[dict]:
    """Median seconds and peak bytes of fn(q, k, v) for each sequence length."""
    results = []
    for n in lengths:
        q, k, v = (torch.randn(batch, heads, n, head_dim, device=device, dtype=dtype) for _ in range(3))
        for _ in range(warmup):
            fn(q, k, v)
        times = []
        for _ in range(repeats):
            # No torch.cuda.synchronize(): on a GPU this times the kernel launch, not the work.
            start = time.perf_counter()
            fn(q, k, v)
            times.append(time.perf_counter() - start)
        peak_bytes, _ = peak_memory(lambda: fn(q, k, v), device)
        results.append({"length": n, "seconds": statistics.median(times), "peak_bytes": int(peak_bytes)})
    return results
