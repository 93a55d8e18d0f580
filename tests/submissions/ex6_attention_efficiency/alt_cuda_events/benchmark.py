def benchmark(fn, lengths, batch: int = 1, heads: int = 4, head_dim: int = 32, device="cpu",
              dtype: torch.dtype = torch.float32, warmup: int = 2, repeats: int = 5) -> list[dict]:
    """Median seconds and peak bytes of fn(q, k, v) for each sequence length."""
    device = torch.device(device)

    def seconds_of_one_call(q, k, v):
        if device.type == "cuda":
            # CUDA events are recorded on the GPU's stream: they measure the work itself, not the launch.
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(q, k, v)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
        start = time.perf_counter()
        fn(q, k, v)
        return time.perf_counter() - start

    rows = []
    for n in lengths:
        q, k, v = (torch.randn(batch, heads, n, head_dim, device=device, dtype=dtype) for _ in range(3))
        for _ in range(warmup):
            fn(q, k, v)
        times = [seconds_of_one_call(q, k, v) for _ in range(repeats)]
        peak_bytes, _ = peak_memory(lambda: fn(q, k, v), device)
        rows.append({"length": n, "seconds": statistics.median(times), "peak_bytes": int(peak_bytes)})
    return rows
