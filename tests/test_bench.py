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
    for r, stored in zip(results.rows, stored_rows):
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
