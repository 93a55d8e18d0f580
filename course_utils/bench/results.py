"""Storing, finding, reading and printing results: ``benchmarks/<device>/<grid>.json``, ``.md`` and ``.png``."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..plotting import plot_benchmark
from .machine import slugify
from .records import BenchmarkResults

__all__ = ["default_results_dir", "available_results", "load_results", "save_results", "format_table"]


def default_results_dir() -> Path:
    """The repository's ``benchmarks/`` folder (the stored tables of chapter 12), or ``./benchmarks``
    when the package runs from an installed copy rather than from the repository."""
    in_repository = Path(__file__).resolve().parents[2] / "benchmarks"
    return in_repository if in_repository.is_dir() else Path.cwd() / "benchmarks"


def available_results(root: str | Path | None = None) -> list[Path]:
    """Every stored ``<device>/<grid>.json`` under ``root`` (default: the repository's benchmarks/)."""
    root = Path(root) if root is not None else default_results_dir()
    return sorted(root.glob("*/*.json"))


def load_results(path: str | Path) -> BenchmarkResults:
    """Read a results file written by :func:`save_results` (``benchmarks/<device>/<grid>.json``)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"{path} is a folder; pass one of its .json files: {[p.name for p in sorted(path.glob('*.json'))]}"
        )
    if not path.exists():
        stored = [str(p) for p in available_results(path.parent.parent if path.parent.name else None)]
        raise FileNotFoundError(
            f"no benchmark results at {path}. Stored results: {stored or 'none'}. "
            "Make them with `python -m course_utils.bench --grid cpu`."
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); rerun the benchmark to rewrite it") from exc
    try:
        return BenchmarkResults.from_json(data)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not a benchmark results file: {exc}") from None


def save_results(results: BenchmarkResults, out_dir: str | Path, plot: bool = True) -> dict[str, Path]:
    """Write ``<out_dir>/<device slug>/<grid>.json``, ``.md`` and (``plot=True``) ``.png``; return the paths."""
    meta = results.meta
    folder = Path(out_dir) / slugify(meta["device_name"], torch.device(meta["device"]).type == "cuda")
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"json": folder / f"{results.grid}.json", "md": folder / f"{results.grid}.md"}
    paths["json"].write_text(json.dumps(results.to_json(), indent=1) + "\n")
    paths["md"].write_text(format_table(results))
    if plot:
        paths["png"] = folder / f"{results.grid}.png"
        plot_benchmark(results, path=paths["png"])
    return paths


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000 or abs(value) < 10**-(digits):
            return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def _header(results: BenchmarkResults) -> list[str]:
    meta = results.meta
    facts = [
        f"torch {meta['torch']}",
        f"device `{meta['device']}`",
        f"dtype {meta['dtype']}",
        f"CPU threads {meta['cpu_threads']}",
        f"date {meta['date']}",
    ]
    if meta.get("triton"):
        facts.append(f"triton {meta['triton']}")
    if meta.get("load_average_start"):
        facts.append(
            f"load average (1/5/15 min) {meta['load_average_start']} at start, {meta.get('load_average_end')} at end"
        )
    if meta.get("compute_capability"):
        facts.append(f"compute capability {meta['compute_capability']}")
    if meta.get("peak_tflops"):
        facts.append(f"peak {meta['peak_tflops']:.0f} TFLOP/s (datasheet, dense)")
    if "fp16_bf16_reduction_math_sdp_allowed" in meta:
        allowed = meta["fp16_bf16_reduction_math_sdp_allowed"]
        facts.append(
            f"`fp16_bf16_reduction_math_sdp_allowed` {allowed}: "
            + (
                "sdpa-math computed in the inputs' 16-bit dtype"
                if allowed
                else "sdpa-math upcast its 16-bit inputs to fp32"
            )
        )
    if meta.get("partial"):
        facts.append("**partial results**: the run ended before the grid was complete")
    else:
        facts.append(f"wall time {meta.get('wall_s')} s")
    return (
        [f"# Benchmark `{results.grid}` on {meta['device_name']}", ""]
        + [f"- {f}" for f in facts]
        + [f"- {n}" for n in meta.get("notes", [])]
        + [""]
    )


def _decode_table(results: BenchmarkResults) -> list[str]:
    lines = ["| mode | new tokens | seconds | tokens/s | speed-up of the cache |", "|---|---:|---:|---:|---:|"]
    for r in results.rows:
        lines.append(f"| {r.mode} | {r.tokens} | {_fmt(r.seconds)} | {_fmt(r.tokens_per_s)} | {_fmt(r.speedup)} |")
    s = results.summary[0]
    outcome = (
        "both modes generated identical tokens."
        if s["tokens_identical"]
        else f"the tokens first differ at new token {s['first_different_token']} (rounding in "
        f"{results.meta['dtype']} changes a near-tie in the argmax)."
    )
    return lines + ["", f"KV cache speed-up at {s['tokens']} tokens: **{s['speedup_kv_cache']:.2f}x**; {outcome}", ""]


def _attention_table(results: BenchmarkResults) -> list[str]:
    lines = [
        "| method | batch | heads | n | d | causal | time (ms) | TFLOP/s | % peak | peak mem (MiB) "
        "| max abs diff | status |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results.rows:
        status = (r.status if r.ok else f"{r.status}: {r.reason}").replace("|", "/")
        lines.append(
            f"| {r.method} | {r.batch} | {r.heads} | {r.seq_len} | {r.head_dim} | {'yes' if r.causal else 'no'} | "
            f"{_fmt(r.time_ms)} | {_fmt(r.tflops)} | {_fmt(r.pct_of_peak, 2)} | {_fmt(r.peak_mem_mib)} | "
            f"{_fmt(r.max_abs_diff, 2)} | {status} |"
        )
    comparisons = [s for s in results.summary if "note" not in s]
    if results.summary:
        lines += [
            "",
            "## Against naive attention at the largest n it ran",
            "",
            "| method | d | causal | n | speed-up vs naive | peak memory vs naive |",
            "|---|---:|---|---:|---:|---:|",
        ]
        for s in comparisons:
            lines.append(
                f"| {s['method']} | {s['head_dim']} | {'yes' if s['causal'] else 'no'} | {s['seq_len']} | "
                f"{s['speedup_vs_naive']:.2f}x | {_fmt(s['memory_vs_naive'])} |"
            )
        for s in results.summary:
            if "note" in s:
                lines.append(
                    f"\nNaive attention at n = {s['seq_len']} (d={s['head_dim']}, "
                    f"{'causal' if s['causal'] else 'not causal'}): {s['note']}."
                )
    return lines + [
        "",
        "`max abs diff` compares each output with the first method that ran on that shape (`diff_vs` in the json).",
        "",
    ]


def format_table(results: BenchmarkResults) -> str:
    """The results as a Markdown document: a header about the machine, the table, the summary."""
    body = _decode_table(results) if results.kind == "decode" else _attention_table(results)
    return "\n".join(_header(results) + body)
