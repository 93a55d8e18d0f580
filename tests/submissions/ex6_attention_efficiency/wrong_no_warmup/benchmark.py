def benchmark(fn, lengths, batch: int = 1, heads: int = 4, head_dim: int = 32, device="cpu",
              dtype: torch.dtype = torch.float32, warmup: int = 2, repeats: int = 5) -> list[dict]:
    """Median seconds and peak bytes of fn(q, k, v) for each sequence length."""
    device = torch.device(device)

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    results = []
    for n in lengths:
        q, k, v = (torch.randn(batch, heads, n, head_dim, device=device, dtype=dtype) for _ in range(3))
        synchronize()  # (no warm-up calls before the timing)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn(q, k, v)
            synchronize()
            times.append(time.perf_counter() - start)
        peak_bytes, _ = peak_memory(lambda: fn(q, k, v), device)
        results.append({"length": n, "seconds": statistics.median(times), "peak_bytes": int(peak_bytes)})
    return results
