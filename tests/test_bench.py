"""The benchmark harness of chapter 12 (course_utils.bench): timing, memory, rows, grids, the CLI."""

from __future__ import annotations

import json
import time

import pytest
import torch

from course_utils import bench

REQUIRED_ROW_FIELDS = {
    "method",
    "sdpa_backend",
    "batch",
    "heads",
    "seq_len",
    "head_dim",
    "causal",
    "dtype",
    "device",
    "status",
    "reason",
    "time_ms",
    "time_min_ms",
    "repeats",
    "timer",
    "peak_mem_mib",
    "flops",
    "tflops",
    "pct_of_peak",
    "max_abs_diff",
}
REQUIRED_META_FIELDS = {"device", "device_name", "torch", "cpu_threads", "dtype", "date", "wall_s", "grid"}
CPU = torch.device("cpu")


def test_attention_flops_formula():
    assert bench.attention_flops(1, 8, 1024, 1024, 64, causal=False) == 4 * 8 * 1024 * 1024 * 64
    # Q K^T is (n x d) @ (d x n): 2 n n d multiply-adds counted as FLOPs; P V the same again.
    b, h, n_q, n_k, d = 2, 3, 5, 7, 11
    per_head = 2 * n_q * n_k * d + 2 * n_q * n_k * d
    assert bench.attention_flops(b, h, n_q, n_k, d, causal=False) == b * h * per_head, "4 b h n_q n_k d"
    assert bench.attention_flops(1, 1, 8, 8, 4, causal=True) == 4 * 8 * 8 * 4 // 2, "causal attention does half"


def test_time_call_runs_warmup_and_repeats_and_reports_the_median():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.02)

    timing = bench.time_call(fn, CPU, warmup=2, min_repeats=3, max_repeats=5, budget_s=0.0)
    assert timing.repeats == 3, f"with no time budget the minimum of 3 repeats should run, got {timing.repeats}"
    assert len(calls) == 2 + 3, f"2 warm-up calls + 3 timed calls expected, fn ran {len(calls)} times"
    assert 0.019 <= timing.min_s <= timing.median_s < 0.2, f"a 20 ms sleep measured {timing.median_s * 1e3:.1f} ms"
    assert timing.timer == "perf_counter"


def test_time_call_median_ignores_one_slow_outlier():
    durations = iter([0.0, 0.2, 0.01, 0.01, 0.01, 0.01])  # the first timed call is slow

    def fn():
        time.sleep(next(durations))

    timing = bench.time_call(fn, CPU, warmup=1, min_repeats=5, max_repeats=5)
    assert timing.median_s < 0.1, f"the median should ignore one 200 ms outlier, got {timing.median_s:.3f} s"
    with pytest.raises(ValueError, match="min_repeats"):
        bench.time_call(fn, CPU, min_repeats=0)


def test_process_time_timer_counts_this_process_only():
    # Sleeping stands in for another program using the CPU: wall time sees it, CPU time does not.
    def sleep_then_work():
        time.sleep(0.02)
        sum(i * i for i in range(20_000))

    wall = bench.time_call(sleep_then_work, CPU, warmup=0, min_repeats=3, max_repeats=3)
    cpu = bench.time_call(sleep_then_work, CPU, warmup=0, min_repeats=3, max_repeats=3, timer="process_time")
    assert wall.timer == "perf_counter" and cpu.timer == "process_time"
    assert wall.min_s >= 0.02 > cpu.min_s > 0, f"wall {wall.min_s * 1e3:.1f} ms, CPU {cpu.min_s * 1e3:.1f} ms"
    with pytest.raises(ValueError, match="process_time"):
        bench.time_call(lambda: None, "cuda", timer="process_time")


def test_time_interleaved_takes_turns_and_keeps_each_calls_best_round():
    order, slow_spell = [], iter([0.03, 0, 0, 0, 0, 0])  # the machine is slow for the very first call

    def make(key, work_s):
        def fn():
            order.append(key)
            time.sleep(work_s + next(slow_spell, 0))

        return fn

    timings = bench.time_interleaved(
        {"a": make("a", 0.002), "b": make("b", 0.004)}, CPU, rounds=3, warmup=0, min_repeats=1, max_repeats=1
    )
    assert order == ["a", "b"] * 3, f"the calls should take turns, round after round; ran {order}"
    assert set(timings) == {"a", "b"} and timings["a"].repeats == 3, timings
    assert 0.002 <= timings["a"].min_s < 0.02, f"the slow spell should not be a's best round: {timings['a']}"
    assert timings["a"].min_s < timings["b"].min_s, "a does less work than b"
    with pytest.raises(ValueError, match="round"):
        bench.time_interleaved({"a": lambda: None}, CPU, rounds=0)


def test_cuda_timer_choice_with_fake_cuda(monkeypatch):
    """The GPU path without a GPU: fast calls go to triton's do_bench, slow ones to CUDA events."""

    class FakeEvent:  # a CUDA event that reads the wall clock
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    do_bench_calls = []

    def fake_do_bench(fn, warmup, rep, quantiles):
        do_bench_calls.append(quantiles)
        fn()
        return [1.5, 1.0]  # milliseconds: median, minimum

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(bench.timing, "synchronize", lambda device: None)
    monkeypatch.setattr(bench.timing, "_do_bench", lambda: fake_do_bench)
    fast = bench.time_call(lambda: None, "cuda", warmup=0, expected_call_s=0.001)
    assert fast.timer == "triton.testing.do_bench" and fast.median_s == pytest.approx(1.5e-3), fast
    assert do_bench_calls == [[0.5, 0.0]], "do_bench must be asked for the median and the minimum"
    slow = bench.time_call(
        lambda: time.sleep(0.01), "cuda", warmup=0, min_repeats=2, max_repeats=2, expected_call_s=0.2
    )
    assert slow.timer == "cuda-events" and slow.repeats == 2, f"a 200 ms call should be timed with events: {slow}"
    assert 0.009 < slow.median_s < 0.2, f"events measured {slow.median_s:.4f} s for a 10 ms call"
    monkeypatch.setattr(bench.timing, "_do_bench", lambda: None)  # no triton: events even for fast calls
    assert bench.time_call(lambda: None, "cuda", warmup=1, min_repeats=1).timer == "cuda-events"
    with pytest.raises(ValueError, match="needs a CUDA device"):
        bench.time_call(lambda: None, "cpu", timer="cuda-events")


def test_cuda_peak_memory_is_the_peak_above_the_start_with_fake_cuda(monkeypatch):
    counters = {"allocated": 300, "peak": 900}
    order = []
    monkeypatch.setattr(bench.memory, "synchronize", lambda device: order.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: order.append("reset"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: counters["allocated"])
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: counters["peak"] + 1000)

    def fn():
        order.append("call")
        return "out"

    peak, result = bench.peak_memory(fn, "cuda")
    assert (peak, result) == (1600, "out"), f"peak above the 300 bytes already allocated should be 1600, got {peak}"
    assert order == ["sync", "reset", "call", "sync"], f"reset before the call, synchronise after it: {order}"


def test_cpu_peak_memory_of_known_allocations():
    mib = 2**20
    peak, result = bench.peak_memory(lambda: torch.empty(mib // 4, dtype=torch.float32), CPU)  # 1 MiB
    assert peak == mib, f"one 1 MiB tensor should peak at exactly 1 MiB, measured {peak} bytes"
    assert result.numel() == mib // 4, "peak_memory must hand back the function's result"

    def allocate_free_allocate():
        big = torch.empty(8 * mib, dtype=torch.uint8)
        del big
        return torch.empty(2 * mib, dtype=torch.uint8)

    peak, _ = bench.peak_memory(allocate_free_allocate, CPU)
    assert peak == 8 * mib, f"the peak is the 8 MiB high-water mark, not the sum or the end: got {peak / mib:.2f} MiB"

    existing = torch.empty(16 * mib, dtype=torch.uint8)  # allocated before: must not count
    peak, _ = bench.peak_memory(lambda: existing.view(-1)[:mib].clone(), CPU)
    assert peak == mib, f"only memory allocated during the call counts; got {peak / mib:.2f} MiB"


def test_measure_attention_row_has_every_field_and_consistent_numbers():
    shape = bench.AttentionShape(batch=1, heads=2, seq_len=64, head_dim=16, causal=True)
    settings = bench.MeasureSettings(CPU, torch.float32, min_repeats=2, max_repeats=2)
    row, out = bench.measure_attention("sdpa-math", shape, settings)
    assert REQUIRED_ROW_FIELDS <= set(row.to_json()), f"row lacks {REQUIRED_ROW_FIELDS - set(row.to_json())}"
    assert row.status == "ok", f"sdpa-math should run on the CPU: {row.reason}"
    assert row.sdpa_backend == "MATH"
    assert row.flops == bench.attention_flops(1, 2, 64, 64, 16, True) == shape.flops
    assert row.tflops == pytest.approx(row.flops / (row.time_ms / 1e3) / 1e12), "TFLOP/s = FLOPs / time"
    assert row.repeats == 2 and row.timer == "perf_counter"
    # The 64 x 64 x 2-head fp32 scores alone are 32 KiB; the output is 8 KiB.
    assert row.peak_mem_mib * 2**20 >= 32 * 1024, f"sdpa-math peak {row.peak_mem_mib:.4f} MiB is too small"
    assert row.pct_of_peak is None, "no datasheet peak is known for a CPU"
    assert out.shape == (1, 2, 64, 16)
    inputs = shape.random_inputs(torch.float32, CPU)
    row, _ = bench.measure_attention(
        "flash-pytorch",
        shape,
        settings,
        inputs=inputs,
        reference=("naive", bench.naive_attention(*inputs, causal=True)),
    )
    assert row.diff_vs == "naive" and row.max_abs_diff < 1e-5, f"flash-pytorch differs from naive: {row}"
    assert row.block == settings.block, "a method that tiles records its tile size"
    with pytest.raises(ValueError, match="unknown method 'fastest'"):
        bench.measure_attention("fastest", shape, settings)


def test_rows_round_trip_through_json():
    row = bench.AttentionRow(
        method="naive",
        sdpa_backend=None,
        batch=1,
        heads=2,
        seq_len=8,
        head_dim=4,
        causal=False,
        dtype="float32",
        device="cpu",
        flops=1024,
        time_ms=1.5,
    )
    assert bench.AttentionRow.from_json(json.loads(json.dumps(row.to_json()))) == row
    older = {k: v for k, v in row.to_json().items() if k != "block"}  # the stored tables have no "block" here
    assert bench.AttentionRow.from_json({**older, "future_field": 1}) == row, "unknown fields are ignored"
    with pytest.raises(ValueError, match="lacks a field"):
        bench.AttentionRow.from_json({"method": "naive"})


def test_unsupported_methods_become_rows_not_crashes():
    shape, settings = bench.AttentionShape(1, 1, 32, 16), bench.MeasureSettings(CPU, torch.float32)
    row, out = bench.measure_attention("flash-triton", shape, settings)
    assert row.status == "unsupported" and "CUDA" in row.reason, row
    assert out is None
    if not torch.cuda.is_available():
        row, _ = bench.measure_attention("sdpa-efficient", shape, settings)
        assert row.status == "unsupported", f"memory-efficient SDPA has no CPU kernel; row: {row}"
        assert row.reason, "an unsupported row must say why"


def _raising_method(monkeypatch, name, exc, from_len=0):
    original = bench.METHODS[name]

    def fn(q, k, v, causal, **kwargs):
        if q.shape[-2] >= from_len:
            raise exc
        return original.fn(q, k, v, causal, **kwargs)

    monkeypatch.setitem(bench.METHODS, name, bench.AttentionMethod(name, fn, original.materialises))


def test_out_of_memory_is_recorded_as_a_row(monkeypatch):
    _raising_method(monkeypatch, "naive", torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64 GiB"))
    row, out = bench.measure_attention(
        "naive", bench.AttentionShape(1, 1, 32, 8), bench.MeasureSettings(CPU, torch.float32)
    )
    assert row.status == "oom" and out is None, f"an out-of-memory error must become status 'oom': {row}"
    assert "out of memory" in row.reason
    assert row.time_ms is None and row.peak_mem_mib is None


def test_other_failures_are_recorded_as_errors(monkeypatch):
    _raising_method(monkeypatch, "naive", ZeroDivisionError("kernel exploded"))
    row, _ = bench.measure_attention(
        "naive", bench.AttentionShape(1, 1, 32, 8), bench.MeasureSettings(CPU, torch.float32)
    )
    assert row.status == "error" and "kernel exploded" in row.reason, row


def test_memory_grid_stops_growing_once_naive_runs_out_of_memory(monkeypatch):
    _raising_method(monkeypatch, "naive", torch.OutOfMemoryError("out of memory"), from_len=64)
    grid = bench.AttentionGrid(
        "memory",
        [bench.AttentionShape(batch=1, heads=1, seq_len=n, head_dim=8) for n in (32, 64, 128, 256)],
        bench.MeasureSettings(CPU, torch.float32, min_repeats=1, max_repeats=1),
        methods=["naive", "sdpa-flash"],
        stop_when_oom="naive",
    )
    results = bench.run_grid(grid, progress=None)
    seen = sorted({r.seq_len for r in results.rows})
    assert seen == [32, 64], f"the grid should stop after the first n where naive runs out of memory; ran {seen}"
    statuses = {(r.method, r.seq_len): r.status for r in results.rows}
    assert statuses[("naive", 64)] == "oom" and statuses[("sdpa-flash", 64)] == "ok", statuses


def test_grid_skips_a_method_predicted_to_exceed_its_budget():
    grid = bench.AttentionGrid(
        "cpu",
        [bench.AttentionShape(batch=1, heads=2, seq_len=n, head_dim=16) for n in (32, 2048)],
        bench.MeasureSettings(CPU, torch.float32, min_repeats=1, max_repeats=1, block=16),
        methods=["naive", "flash-pytorch"],
        method_budget_s=1e-6,
    )
    results = bench.run_grid(grid, progress=None)
    large = [r for r in results.rows if r.seq_len == 2048]
    assert all(r.status == "skipped" and "predicted" in r.reason for r in large), large
    assert REQUIRED_META_FIELDS <= set(results.meta), f"meta lacks {REQUIRED_META_FIELDS - set(results.meta)}"
    with pytest.raises(ValueError, match="unknown method"):
        bench.AttentionGrid("cpu", [], bench.MeasureSettings(CPU, torch.float32), methods=["naive", "fastest"])


def test_cli_quick_writes_json_markdown_and_png(tmp_path, capsys):
    code = bench.main(["--grid", "cpu", "--quick", "--out", str(tmp_path)])
    assert code == 0, f"main returned {code}"
    folders = list(tmp_path.iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("cpu-"), f"expected one cpu-<name> folder: {folders}"
    folder = folders[0]
    results = bench.load_results(folder / "cpu.json")
    assert REQUIRED_META_FIELDS <= set(results.meta)
    methods = {r.method for r in results.rows}
    assert methods == set(bench.METHODS), f"every method needs a row, even unsupported ones: {methods}"
    ok = [r for r in results.rows if r.ok]
    assert {"naive", "sdpa-math", "sdpa-flash", "flash-pytorch"} <= {r.method for r in ok}
    stored_rows = json.loads((folder / "cpu.json").read_text())["rows"]
    for r, stored in zip(results.rows, stored_rows, strict=True):
        assert REQUIRED_ROW_FIELDS <= set(stored), f"the json row lacks {REQUIRED_ROW_FIELDS - set(stored)}"
        if r.max_abs_diff is not None:
            assert r.max_abs_diff < 1e-4, f"{r.method} disagrees with {r.diff_vs}: {r.max_abs_diff}"
    markdown = (folder / "cpu.md").read_text()
    assert "| method |" in markdown and "flash-pytorch" in markdown, "the Markdown table is missing"
    png = (folder / "cpu.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, "cpu.png is not a real plot"
    printed = capsys.readouterr().out
    assert "| method |" in printed, "the table should be printed too"


def test_cli_refuses_gpu_grid_without_gpu_and_bad_arguments(tmp_path, capsys):
    if not torch.cuda.is_available():
        assert bench.main(["--grid", "gpu", "--quick", "--out", str(tmp_path)]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
    assert bench.main(["--grid", "cpu", "--methods", "naive,fastest", "--out", str(tmp_path)]) == 2
    assert "fastest" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--grid", "tpu"])
    assert not any(tmp_path.iterdir()), "a refused command must not write results"


def test_decode_benchmark_quick_kv_cache_matches_and_is_recorded(tmp_path):
    results = bench.run_decode_benchmark(CPU, quick=True, progress=None)
    modes = {r.mode for r in results.rows}
    assert modes == {"no-cache", "kv-cache"}, modes
    counts = sorted({r.tokens for r in results.rows})
    assert counts == [2, 4, 8], f"checkpoints at powers of two up to 8 new tokens, got {counts}"
    for r in results.rows:
        assert r.seconds > 0 and r.tokens_per_s == pytest.approx(r.tokens / r.seconds)
        assert (r.speedup is not None) == (r.mode == "kv-cache"), "the cache's speed-up sits on its own rows"
    summary = results.summary[0]
    assert summary["tokens_identical"], "greedy decoding with and without the cache must produce the same tokens (fp32)"
    assert summary["speedup_kv_cache"] > 0
    paths = bench.save_results(results, tmp_path, plot=False)
    assert "KV cache speed-up" in paths["md"].read_text()
    assert bench.load_results(paths["json"]) == results, "a decode table reads back as it was written"


def test_load_results_explains_missing_and_broken_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no benchmark results"):
        bench.load_results(tmp_path / "cpu-x" / "cpu.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        bench.load_results(broken)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"grid": "cpu"}))
    with pytest.raises(ValueError, match="lacks"):
        bench.load_results(other)
    row_missing = tmp_path / "row.json"
    row_missing.write_text(json.dumps({"grid": "cpu", "kind": "attention", "meta": {}, "rows": [{"method": "naive"}]}))
    with pytest.raises(ValueError, match="row.json is not a benchmark results file.*lacks a field"):
        bench.load_results(row_missing)


def test_plot_results_panels_and_bad_metric():
    grid = bench.AttentionGrid(
        "cpu",
        [
            bench.AttentionShape(batch=1, heads=1, seq_len=n, head_dim=8, causal=c)
            for c in (False, True)
            for n in (16, 32)
        ],
        bench.MeasureSettings(CPU, torch.float32, min_repeats=1, max_repeats=1),
        methods=["naive", "sdpa-math"],
    )
    results = bench.run_grid(grid, progress=None)
    fig = bench.plot_results(results)
    assert len(fig.axes) == 4, f"2 metrics x 2 (d, causal) groups = 4 panels, got {len(fig.axes)}"
    with pytest.raises(ValueError, match="unknown metric"):
        bench.plot_results(results, metrics=("speed",))


def test_stored_cpu_results_are_complete():
    stored = [p for p in bench.available_results() if p.name == "cpu.json"]
    assert stored, "benchmarks/<cpu>/cpu.json is missing: run `python -m course_utils.bench --grid cpu`"
    results = bench.load_results(stored[0])
    lengths = sorted({r.seq_len for r in results.rows})
    assert lengths == [256, 512, 1024, 2048, 4096], f"the stored cpu grid covers n={lengths}"
    for method in ("naive", "sdpa-math", "sdpa-flash"):
        row = next(r for r in results.rows if r.method == method and r.seq_len == 4096)
        assert row.ok and row.time_ms > 0 and row.peak_mem_mib > 0, row
    for suffix in (".md", ".png"):
        assert stored[0].with_suffix(suffix).exists(), f"{stored[0].with_suffix(suffix)} is missing"


# What PyTorch says on a GPU older than Ampere (T4: sm75) when a call is pinned to the flash backend.
SM75_FLASH_WARNING = (
    "Flash attention only supports gpu architectures in the range [sm80, sm121]. Attempting to run on a sm 7.5 gpu."
)


def _no_flash_here(monkeypatch, fused_stand_in: bool = True):
    """Make the CPU look like a T4: the pinned flash call warns and raises as PyTorch does on sm75; the
    memory-efficient backend (which a T4 has, in fp16) is played by the CPU's fused kernel."""
    import warnings

    original_flash = bench.METHODS["sdpa-flash"]

    def flash_on_sm75(q, k, v, causal):
        warnings.warn(SM75_FLASH_WARNING, UserWarning, stacklevel=2)
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setitem(
        bench.METHODS,
        "sdpa-flash",
        bench.AttentionMethod("sdpa-flash", flash_on_sm75, False, sdpa_backend="FLASH_ATTENTION"),
    )
    if fused_stand_in:
        monkeypatch.setitem(
            bench.METHODS,
            "sdpa-efficient",
            bench.AttentionMethod("sdpa-efficient", original_flash.fn, False, sdpa_backend="EFFICIENT_ATTENTION"),
        )


def test_grid_and_comparison_work_without_the_flash_backend(monkeypatch):
    """Chapter 12's GPU cell on a GPU without FlashAttention: the grid records why, the comparison uses what ran."""
    _no_flash_here(monkeypatch)
    grid = bench.AttentionGrid(
        "chapter12-gpu",
        [bench.AttentionShape(batch=1, heads=2, seq_len=n, head_dim=16) for n in (64, 256)],
        bench.MeasureSettings(CPU, torch.float32, min_repeats=1, max_repeats=2, budget_s=0.0),
        methods=["naive", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "flash-triton"],
    )
    results = bench.run_grid(grid, progress=None)
    flash_rows = [r for r in results.rows if r.method == "sdpa-flash"]
    assert all(r.status == "unsupported" for r in flash_rows), flash_rows
    assert all("sm80" in r.reason and "sm 7.5" in r.reason for r in flash_rows), "the row must carry PyTorch's reason"
    assert all(r.ok for r in results.rows if r.method in ("naive", "sdpa-math", "sdpa-efficient")), results.rows

    comparison = bench.compare_fused(results, 256)
    assert comparison.baseline.method == "naive", "naive (16-bit on a GPU) is the baseline when it ran"
    assert comparison.fused.method == "sdpa-efficient", "without flash: the fastest fused kernel that ran"
    assert not comparison.preferred_ran
    assert comparison.speedup == pytest.approx(comparison.baseline.time_ms / comparison.fused.time_ms)
    assert "sm80" in comparison.missing["sdpa-flash"] and "unsupported" in comparison.missing["sdpa-flash"]
    assert set(comparison.missing) == {"sdpa-flash", "sdpa-cudnn", "flash-triton"}, comparison.missing
    text = comparison.describe()
    assert text.startswith("sdpa-flash did not run") and "sm 7.5" in text, text
    assert "sdpa-efficient (the fastest fused kernel that ran, instead of sdpa-flash)" in text, text

    # Nothing fused ran at all (a T4 asked for bf16): reported, and no ratio to check.
    only_naive = bench.BenchmarkResults(
        "g", "attention", {}, [r for r in results.rows if r.method not in ("sdpa-efficient",)]
    )
    nothing = bench.compare_fused(only_naive, 256)
    assert nothing.fused is None and nothing.speedup is None
    assert "no fused kernel ran" in nothing.describe()
    with pytest.raises(ValueError, match="no rows"):
        bench.compare_fused(results, 4096)


def test_comparison_prefers_flash_when_it_ran_and_falls_back_to_sdpa_math():
    grid = bench.AttentionGrid(
        "g",
        [bench.AttentionShape(batch=1, heads=2, seq_len=128, head_dim=16, causal=True)],
        bench.MeasureSettings(CPU, torch.float32, min_repeats=1, max_repeats=1, budget_s=0.0),
        methods=["sdpa-math", "sdpa-flash"],
    )
    results = bench.run_grid(grid, progress=None)
    comparison = bench.compare_fused(results, 128, causal=True)
    assert comparison.preferred_ran and comparison.baseline.method == "sdpa-math", comparison
    assert comparison.missing == {
        m: "not measured in this grid" for m in ("sdpa-cudnn", "sdpa-efficient", "flash-triton")
    }
    assert comparison.describe().startswith("sdpa-cudnn did not run either"), comparison.describe()


def test_accuracy_bound_from_bf16_rounding_passes_real_kernels_and_catches_a_wrong_one(monkeypatch):
    """The relative tolerance of chapter 12's GPU cell, exercised on the CPU's bf16 kernels."""
    # A kernel with its softmax scale 25% off, and one that ignores the last 16 keys.
    monkeypatch.setitem(
        bench.METHODS,
        "scale-off",
        bench.AttentionMethod("scale-off", lambda q, k, v, causal: bench.naive_attention(q * 1.25, k, v, causal), True),
    )
    monkeypatch.setitem(
        bench.METHODS,
        "lost-keys",
        bench.AttentionMethod(
            "lost-keys",
            lambda q, k, v, causal: bench.naive_attention(q, k[..., :-16, :], v[..., :-16, :]),  # not causal
            True,
        ),
    )
    for causal in (False, True):
        report = bench.accuracy_against_reference(
            ["naive", "sdpa-math", "sdpa-flash", "flash-pytorch", "flash-triton", "scale-off", "lost-keys"],
            bench.AttentionShape(1, 2, 256, 32, causal),
            CPU,
            torch.bfloat16,
            seed=3,
        )
        assert report.reference_dtype == "float64" and report.dtype == "bfloat16"
        # bf16 keeps 8 significant bits: rounding costs a few tenths of a percent of the largest output.
        assert 1e-4 < report.rounding_error / report.ref_max_abs < 2e-2, report.describe()
        for name in ("naive", "sdpa-math", "sdpa-flash", "flash-pytorch"):
            m = report.methods[name]
            assert m.status == "ok" and m.max_error <= report.bound, report.describe()
        assert report.methods["flash-triton"].status == "unsupported"
        for name in ("scale-off", "lost-keys") if not causal else ("scale-off",):
            assert report.methods[name].max_error > report.bound, f"{name} should fail:\n{report.describe()}"
    assert "bound 4x" in report.describe()


def test_h100_nvl_and_pre_ampere_peaks(monkeypatch):
    cuda = torch.device("cuda")
    for name, dtype, peak in [
        ("NVIDIA H100 NVL", torch.bfloat16, 835.0),
        ("NVIDIA H100 80GB HBM3", torch.bfloat16, 989.0),
        ("NVIDIA H100 PCIe", torch.float16, 756.0),
        ("NVIDIA H200", torch.bfloat16, 989.0),
        ("Tesla T4", torch.float16, 65.0),
        ("Tesla T4", torch.bfloat16, None),  # no bf16 tensor cores before Ampere
        ("Tesla V100-SXM2-16GB", torch.float16, 125.0),
        ("Tesla V100-PCIE-32GB", torch.float16, 112.0),
        ("NVIDIA H200", torch.float32, None),
    ]:
        monkeypatch.setattr(bench.machine, "device_name", lambda device, name=name: name)
        assert bench.peak_tflops(cuda, dtype) == peak, (name, dtype)
    assert bench.peak_tflops(CPU, torch.bfloat16) is None
    assert bench.half_dtype(CPU) == torch.bfloat16


def test_stored_h200_tables_are_complete_and_readable():
    """benchmarks/nvidia-h200/: the gpu and memory grids chapter 12 prints when the learner has no GPU."""
    root = bench.default_results_dir() / "nvidia-h200"
    gpu, memory = bench.load_results(root / "gpu.json"), bench.load_results(root / "memory.json")
    assert gpu.meta["device_name"] == "NVIDIA H200" and gpu.meta["peak_tflops"] == 989.0
    methods = ["naive", "sdpa-math", "sdpa-flash", "sdpa-cudnn", "flash-triton"]
    table = bench.throughput_table(gpu, 16384, methods)
    assert [(e["head_dim"], e["causal"]) for e in table] == [(128, False), (128, True), (64, False), (64, True)]
    assert all(e[m] is not None and e[m].ok and e[m].pct_of_peak > 0 for e in table for m in methods)
    text = bench.format_throughput_table(gpu, 16384, methods)
    assert "| 128, no |" in text and "% of the 989 TFLOP/s" in text, text
    assert bench.compare_fused(gpu, 16384, head_dim=64).preferred_ran
    largest = max(r.seq_len for r in memory.rows)
    statuses = {r.method: r.status for r in memory.rows if r.seq_len == largest}
    assert statuses["naive"] == "oom" and statuses["flash-triton"] == "ok", statuses
    fig = bench.plot_side_by_side(
        [("H200 memory", memory, {}), ("H200 gpu, d = 64", gpu, {"head_dim": 64, "causal": False})], "peak_mem_mib"
    )
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="unknown metric"):
        bench.plot_side_by_side([("x", gpu, {})], "speed")
