"""Reading a grid: fused kernels against a baseline, throughput as a share of the peak, 16-bit accuracy.

Chapter 12 uses these on the grid it measures on a learner's GPU and on the stored tables:

- :func:`compare_fused`: at one shape, a baseline that stores the ``n x n`` matrix (``naive``, else
  ``sdpa-math``) against ``sdpa-flash``, or, where that backend did not run (GPUs older than Ampere have
  no FlashAttention kernel), against the fastest fused kernel that did; with the reasons of every fused
  kernel that did not run.
- :func:`throughput_table` / :func:`format_throughput_table`: TFLOP/s and % of the datasheet peak of
  chosen methods at one ``n``, one line per (head dim, causal).
- :func:`accuracy_against_reference`: each method's 16-bit output against a high-precision reference,
  with a bound derived from the rounding error that 16-bit inputs and outputs alone cause.
- :func:`plot_side_by_side`: one metric of several stored tables in panels next to each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..attention import naive_attention
from .measure import AttentionShape, _Unsupported, refused_as_unsupported
from .methods import METHODS
from .records import AttentionRow, BenchmarkResults

__all__ = [
    "FUSED_METHODS",
    "BASELINE_METHODS",
    "FusedComparison",
    "compare_fused",
    "throughput_table",
    "format_throughput_table",
    "MethodAccuracy",
    "AccuracyReport",
    "accuracy_against_reference",
    "plot_side_by_side",
]

# Kernels that never store the n x n matrix, in the order the chapter prefers them.
FUSED_METHODS = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "flash-triton")
# Implementations that store it: naive first, because it computes in the inputs' 16-bit dtype, while
# sdpa-math upcasts 16-bit inputs to fp32 unless the math backend is allowed reduced precision.
BASELINE_METHODS = ("naive", "sdpa-math")


def _rows_at(results: BenchmarkResults, seq_len: int, causal: bool, head_dim: int | None) -> list[AttentionRow]:
    rows = [r for r in results.rows if r.seq_len == seq_len and r.causal == causal]
    head_dims = sorted({r.head_dim for r in rows})
    if head_dim is None:
        if len(head_dims) > 1:
            raise ValueError(f"the grid has head dims {head_dims} at n = {seq_len}; pass head_dim=")
        return rows
    return [r for r in rows if r.head_dim == head_dim]


@dataclass
class FusedComparison:
    """A baseline that stores the n x n matrix against a fused kernel, at one shape of a grid.

    ``fused`` is the ``sdpa-flash`` row when that backend ran, else the fastest fused kernel that ran,
    else ``None``; ``missing`` maps every fused method that did not run here to its status and reason.
    """

    seq_len: int
    head_dim: int | None
    causal: bool
    baseline: AttentionRow | None
    fused: AttentionRow | None
    missing: dict[str, str] = field(default_factory=dict)
    preferred: str = "sdpa-flash"

    @property
    def speedup(self) -> float | None:
        """Baseline time / fused time; ``None`` when either did not run."""
        if self.baseline is None or self.fused is None:
            return None
        return self.baseline.time_ms / self.fused.time_ms

    @property
    def preferred_ran(self) -> bool:
        return self.fused is not None and self.fused.method == self.preferred

    def describe(self) -> str:
        """What ran, what did not and why, and the ratio: the lines the chapter prints."""
        shape = f"n = {self.seq_len}" + (f", d = {self.head_dim}" if self.head_dim else "")
        shape += ", causal" if self.causal else ", not causal"
        lines = []
        if self.preferred in self.missing:
            lines.append(f"{self.preferred} did not run ({shape}): {self.missing[self.preferred]}")
        for method, why in self.missing.items():
            if method != self.preferred:
                lines.append(f"{method} did not run either: {why}")
        if self.baseline is None:
            lines.append(f"no baseline ({' or '.join(BASELINE_METHODS)}) ran at {shape}: nothing to compare")
        elif self.fused is None:
            lines.append(f"no fused kernel ran at {shape}: nothing to compare {self.baseline.method} with")
        else:
            which = "" if self.preferred_ran else f" (the fastest fused kernel that ran, instead of {self.preferred})"
            lines.append(
                f"{shape}: {self.baseline.method} {self.baseline.time_ms:.3f} ms, {self.fused.method}{which} "
                f"{self.fused.time_ms:.3f} ms: {self.speedup:.1f}x faster"
            )
        return "\n".join(lines)


def compare_fused(
    results: BenchmarkResults,
    seq_len: int,
    causal: bool = False,
    head_dim: int | None = None,
    *,
    baselines: tuple[str, ...] = BASELINE_METHODS,
    fused: tuple[str, ...] = FUSED_METHODS,
    prefer: str = "sdpa-flash",
) -> FusedComparison:
    """Compare, at one shape of ``results``, the first baseline that ran with ``prefer`` (``sdpa-flash``)
    or, when that did not run, with the fastest of the other ``fused`` methods that ran.

    Rows that did not run (``unsupported`` on a GPU without the backend, ``error``, ``oom``, ``skipped``)
    are reported in ``missing`` with their reason; a fused method the grid did not include is reported too.
    """
    rows = {r.method: r for r in _rows_at(results, seq_len, causal, head_dim)}
    if not rows:
        raise ValueError(f"the grid has no rows at n = {seq_len}, causal={causal}, head_dim={head_dim}")
    baseline = next((rows[m] for m in baselines if m in rows and rows[m].ok), None)
    missing = {}
    for method in fused:
        row = rows.get(method)
        if row is None:
            missing[method] = "not measured in this grid"
        elif not row.ok:
            missing[method] = f"{row.status}: {row.reason}"
    ran = [rows[m] for m in fused if m in rows and rows[m].ok]
    chosen = rows[prefer] if prefer in rows and rows[prefer].ok else min(ran, key=lambda r: r.time_ms, default=None)
    head_dim = head_dim if head_dim is not None else next(iter(rows.values())).head_dim
    return FusedComparison(seq_len, head_dim, causal, baseline, chosen, missing, prefer)


def throughput_table(results: BenchmarkResults, seq_len: int, methods: list[str] | tuple[str, ...]) -> list[dict]:
    """One dict per (head dim, causal) at ``seq_len``: ``{"head_dim", "causal", "batch", "heads", method:
    row}`` with the row of each method (``None`` if the grid has none)."""
    table = []
    groups = {(r.head_dim, r.causal) for r in results.rows if r.seq_len == seq_len}
    for head_dim, causal in sorted(groups, key=lambda group: (-group[0], group[1])):  # widest heads first
        rows = {r.method: r for r in _rows_at(results, seq_len, causal, head_dim)}
        first = next(iter(rows.values()))
        table.append(
            {"head_dim": head_dim, "causal": causal, "batch": first.batch, "heads": first.heads}
            | {m: rows.get(m) for m in methods}
        )
    return table


def _cell(row: AttentionRow | None, with_peak: bool) -> str:
    if row is None:
        return "not measured"
    if not row.ok:
        return row.status
    text = f"{row.tflops:.0f}" if row.tflops >= 10 else f"{row.tflops:.2g}"
    if with_peak and row.pct_of_peak is not None:
        text += f" ({row.pct_of_peak:.0f} %)"
    return text


def format_throughput_table(results: BenchmarkResults, seq_len: int, methods: list[str] | tuple[str, ...]) -> str:
    """:func:`throughput_table` as Markdown: TFLOP/s, with the share of the datasheet peak in brackets."""
    peak = results.meta.get("peak_tflops")
    head = "| d, causal | " + " | ".join(methods) + " |"
    lines = [
        f"TFLOP/s at n = {seq_len} ({results.meta['device_name']}, {results.meta['dtype']}"
        + (f"; in brackets: % of the {peak:.0f} TFLOP/s datasheet peak)" if peak else ")"),
        "",
        head,
        "|---|" + "---:|" * len(methods),
    ]
    for entry in throughput_table(results, seq_len, methods):
        cells = " | ".join(_cell(entry[m], with_peak=bool(peak)) for m in methods)
        lines.append(f"| {entry['head_dim']}, {'yes' if entry['causal'] else 'no'} | {cells} |")
    return "\n".join(lines)


@dataclass
class MethodAccuracy:
    method: str
    status: str  # "ok", "unsupported" or "error"
    max_error: float | None = None  # max |output - reference|
    reason: str | None = None


@dataclass
class AccuracyReport:
    """Each method's 16-bit output against a high-precision reference computed from the unrounded inputs.

    ``rounding_error`` is what rounding alone costs: the largest difference between the reference and
    the reference computed exactly from the 16-bit-rounded inputs and rounded to 16 bits itself, that is
    the output of an ideal 16-bit kernel. A kernel also rounds intermediate results (the weights P
    before ``P V``, the scores in a plain 16-bit implementation), so it may err by a few times that:
    ``bound = factor * rounding_error``.
    """

    shape: AttentionShape
    dtype: str
    reference_dtype: str
    ref_max_abs: float
    rounding_error: float
    factor: float
    methods: dict[str, MethodAccuracy]

    @property
    def bound(self) -> float:
        return self.factor * self.rounding_error

    def describe(self) -> str:
        lines = [
            f"{self.dtype} against a {self.reference_dtype} reference: max |reference| {self.ref_max_abs:.3g}, "
            f"rounding inputs and output to {self.dtype} alone: {self.rounding_error:.2e} "
            f"({self.rounding_error / self.ref_max_abs:.2%} of max |reference|); bound {self.factor:g}x that = "
            f"{self.bound:.2e}"
        ]
        for m in self.methods.values():
            if m.status == "ok":
                lines.append(
                    f"  {m.method:15s} max error {m.max_error:.2e} = {m.max_error / self.rounding_error:.1f}x "
                    "the rounding error"
                )
            else:
                lines.append(f"  {m.method:15s} {m.status}: {m.reason}")
        return "\n".join(lines)


def accuracy_against_reference(
    methods: list[str] | tuple[str, ...],
    shape: AttentionShape,
    device: torch.device | str,
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
    factor: float = 4.0,
) -> AccuracyReport:
    """Run each method on ``dtype`` inputs and compare with a float64 (CPU) or float32 (GPU, full fp32
    matmuls) reference computed from the unrounded float32 inputs. A method that cannot run here gets
    status ``unsupported`` (PyTorch's "No available kernel" and its reasons) or ``error``."""
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)
    size = (shape.batch, shape.heads, shape.seq_len, shape.head_dim)
    q32, k32, v32 = (torch.randn(size, generator=generator).to(device) for _ in range(3))
    ref_dtype = torch.float64 if device.type == "cpu" else torch.float32
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # no TF32 in the reference
    try:
        reference = naive_attention(q32.to(ref_dtype), k32.to(ref_dtype), v32.to(ref_dtype), causal=shape.causal)
        q, k, v = (t.to(dtype) for t in (q32, k32, v32))
        ideal = naive_attention(q.to(ref_dtype), k.to(ref_dtype), v.to(ref_dtype), causal=shape.causal)
        rounding_error = (ideal.to(dtype).to(ref_dtype) - reference).abs().max().item()
        del ideal
    finally:
        torch.set_float32_matmul_precision(precision)
    accuracy = {}
    for name in methods:
        method = METHODS[name]
        if method.cuda_only and device.type != "cuda":
            accuracy[name] = MethodAccuracy(name, "unsupported", reason="needs a CUDA GPU")
            continue
        try:
            with refused_as_unsupported():
                out = method.fn(q, k, v, shape.causal)
        except _Unsupported as why:  # a backend this GPU lacks
            accuracy[name] = MethodAccuracy(name, "unsupported", reason=str(why))
            continue
        except Exception as exc:  # a kernel that does not compile here, say
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            accuracy[name] = MethodAccuracy(name, "error", reason=f"{type(exc).__name__}: {text[:300]}")
            continue
        error = (out.to(ref_dtype) - reference).abs().max().item()
        accuracy[name] = MethodAccuracy(name, "ok", max_error=error)
        del out
    return AccuracyReport(
        shape,
        str(dtype).replace("torch.", ""),
        str(ref_dtype).replace("torch.", ""),
        reference.abs().max().item(),
        rounding_error,
        factor,
        accuracy,
    )


_METRIC_LABELS = {"time_ms": "time per call (ms)", "tflops": "TFLOP/s", "peak_mem_mib": "peak memory (MiB)"}


def plot_side_by_side(
    panels: list[tuple[str, BenchmarkResults, dict]],
    metric: str,
    methods: list[str] | tuple[str, ...] | None = None,
    title: str | None = None,
):
    """One log-log panel per ``(title, results, filter)``, sharing nothing but the metric: ``filter``
    picks a group of rows (``{"head_dim": 64, "causal": False}``; empty: every row). Methods keep one
    colour across the panels; a method's rows that did not run are left out of its line."""
    import matplotlib.pyplot as plt

    if metric not in _METRIC_LABELS:
        raise ValueError(f"unknown metric {metric!r}; choose from {sorted(_METRIC_LABELS)}")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.0), squeeze=False)
    names = methods or sorted({r.method for _, results, _ in panels for r in results.rows})
    colours = {m: f"C{i}" for i, m in enumerate(names)}
    for ax, (panel_title, results, chosen) in zip(axes[0], panels, strict=True):
        rows = [r for r in results.rows if all(getattr(r, key) == value for key, value in chosen.items())]
        for m in names:
            points = sorted((r.seq_len, getattr(r, metric)) for r in rows if r.method == m and r.ok)
            if points:
                ax.plot(*zip(*points, strict=True), "o-", color=colours[m], label=m, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (tokens)")
        ax.set_ylabel(_METRIC_LABELS[metric])
        ax.set_title(panel_title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(len(handles), 7), frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    plt.close(fig)
    return fig
