def benchmark(fn, lengths, batch: int = 1, heads: int = 4, head_dim: int = 32, device="cpu",
              dtype: torch.dtype = torch.float32, warmup: int = 2, repeats: int = 5) -> list[dict]:
    """Median seconds and peak bytes of fn(q, k, v) for each sequence length."""
    device = torch.device(device)
    on_gpu = device.type == "cuda"
    rows = []
    for n in lengths:
        shape = (batch, heads, n, head_dim)
        q = torch.randn(shape, device=device, dtype=dtype)
        k = torch.randn(shape, device=device, dtype=dtype)
        v = torch.randn(shape, device=device, dtype=dtype)
        peak, _ = peak_memory(lambda: fn(q, k, v), device)  # this call also warms up
        for _ in range(warmup):
            fn(q, k, v)
        durations = []
        for _ in range(repeats):
            if on_gpu:
                torch.cuda.synchronize()
            tic = time.perf_counter()
            fn(q, k, v)
            if on_gpu:
                torch.cuda.synchronize()
            durations.append(time.perf_counter() - tic)
        durations.sort()
        middle = len(durations) // 2
        median = durations[middle] if len(durations) % 2 else (durations[middle - 1] + durations[middle]) / 2
        rows.append(dict(length=n, seconds=median, peak_bytes=int(peak)))
    return rows
