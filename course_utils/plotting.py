"""Figures every chapter uses: attention maps, position-encoding maps, curves, training histories.

Every function builds a :class:`matplotlib.figure.Figure` directly (not through ``pyplot``), gives it
a title, axis labels and units, and returns it. Such a figure needs no GUI and no ``plt.show()``: in
Jupyter it is drawn when it is the value of the cell (or with ``display(fig)``); elsewhere save it
with ``fig.savefig("name.png")``. Because ``pyplot`` never holds on to it, making many figures in a
loop does not leak memory.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure

__all__ = [
    "attention_heatmap",
    "attention_heads_grid",
    "positional_encoding_heatmap",
    "plot_curves",
    "plot_spread",
    "plot_history",
    "loglog_slope",
    "loglog_with_slopes",
    "plot_benchmark",
]


def _as_array(values, name: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    array = np.asarray(values, dtype=float)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return array


def _check_labels(labels: Sequence[str] | None, size: int, name: str, axis: str) -> None:
    if labels is not None and len(labels) != size:
        raise ValueError(f"{name} has {len(labels)} labels but the weights have {size} {axis}")


def _draw_attention(ax, weights: np.ndarray, x_labels, y_labels, vmax: float | None = None):
    image = ax.imshow(
        weights,
        cmap="viridis",
        vmin=0.0,
        vmax=vmax if vmax is not None else max(weights.max(), 1e-12),
        aspect="auto",
        interpolation="nearest",
    )
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)), [str(s) for s in x_labels], rotation=90, fontsize=8)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), [str(s) for s in y_labels], fontsize=8)
    return image


def attention_heatmap(
    weights,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str = "Attention weights",
    xlabel: str = "key (attended-to) position",
    ylabel: str = "query position",
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """One attention matrix ``(T_q, T_k)``: row ``i`` is the distribution query ``i`` puts over the keys.

    ``x_labels`` name the keys (columns), ``y_labels`` the queries (rows), e.g. the source and target
    characters of a translation, so that the alignment can be read off the picture.
    """
    weights = _as_array(weights, "weights")
    if weights.ndim != 2:
        raise ValueError(
            f"attention_heatmap expects one (T_q, T_k) matrix, got shape {weights.shape}; "
            "use attention_heads_grid for (H, T_q, T_k)"
        )
    _check_labels(x_labels, weights.shape[1], "x_labels", "keys (columns)")
    _check_labels(y_labels, weights.shape[0], "y_labels", "queries (rows)")
    if figsize is None:
        figsize = (min(12, 2 + 0.3 * weights.shape[1]), min(10, 1.5 + 0.3 * weights.shape[0]))
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()
    image = _draw_attention(ax, weights, x_labels, y_labels)
    fig.colorbar(image, ax=ax, label="attention weight (probability)")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig


def attention_heads_grid(
    weights,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str = "Attention weights per head",
    ncols: int = 4,
    xlabel: str = "key position",
    ylabel: str = "query position",
) -> Figure:
    """All heads of one layer side by side, ``weights`` of shape ``(H, T_q, T_k)``, on one shared colour
    scale from 0 to 1 so the heads can be compared."""
    weights = _as_array(weights, "weights")
    if weights.ndim != 3:
        raise ValueError(f"attention_heads_grid expects (H, T_q, T_k), got shape {weights.shape}")
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    heads = weights.shape[0]
    _check_labels(x_labels, weights.shape[2], "x_labels", "keys (columns)")
    _check_labels(y_labels, weights.shape[1], "y_labels", "queries (rows)")
    ncols = min(ncols, heads)
    nrows = math.ceil(heads / ncols)
    cell = 0.22 * max(weights.shape[1], weights.shape[2]) + 1.2
    fig = Figure(figsize=(min(18, ncols * cell + 1), min(16, nrows * cell + 0.8)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for h, ax in enumerate(axes.flat):
        if h >= heads:
            ax.set_axis_off()
            continue
        image = _draw_attention(ax, weights[h], x_labels, y_labels, vmax=1.0)
        ax.set_title(f"head {h}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    fig.colorbar(image, ax=axes, label="attention weight (probability)", shrink=0.8)
    fig.suptitle(title)
    return fig


def positional_encoding_heatmap(
    table, title: str = "Sinusoidal position encoding", max_positions: int | None = None
) -> Figure:
    """A ``(positions, d_model)`` table as an image: one row per position, one column per dimension.
    Low dimensions oscillate fast, high ones slowly (wavelengths from 2*pi to 10000 * 2*pi)."""
    table = _as_array(table, "table")
    if table.ndim != 2:
        raise ValueError(f"positional_encoding_heatmap expects (positions, d_model), got shape {table.shape}")
    if max_positions is not None:
        table = table[:max_positions]
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.add_subplot()
    limit = max(abs(table.min()), abs(table.max()), 1e-12)
    image = ax.imshow(table, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="encoding value")
    ax.set_title(title)
    ax.set_xlabel("embedding dimension i")
    ax.set_ylabel("position pos (token index)")
    return fig


def plot_curves(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    logy: bool = False,
    markers: bool = True,
) -> Figure:
    """Several named curves on one axes: ``curves = {"RNN": (lengths, accuracy), "Transformer": (...)}``.

    Give units in the labels, e.g. ``xlabel="sequence length (tokens)"``, ``ylabel="time per step (ms)"``.
    """
    if not curves:
        raise ValueError("plot_curves needs at least one curve")
    if not xlabel or not ylabel or not title:
        raise ValueError("every figure needs a title and both axis labels (with units)")
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for name, (xs, ys) in curves.items():
        xs, ys = _as_array(xs, f"x values of {name!r}"), _as_array(ys, f"y values of {name!r}")
        if xs.shape != ys.shape or xs.ndim != 1:
            raise ValueError(f"curve {name!r}: x and y must be 1-D of equal length, got {xs.shape} and {ys.shape}")
        if (logx and (xs <= 0).any()) or (logy and (ys <= 0).any()):
            raise ValueError(f"curve {name!r} has values <= 0, which a log axis cannot show")
        ax.plot(xs, ys, marker="o" if markers else None, markersize=3, label=str(name))
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def plot_spread(
    curves: Mapping[str, tuple[Sequence[float], Sequence[Sequence[float]]]],
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    ax=None,
    spread_name: str = "seeds",
) -> Figure:
    """Curves measured several times (one run per seed): the mean as a line with markers, the range
    from the lowest to the highest run as a shaded band.

    ``curves = {"ViT": (train_sizes, accuracies)}`` with ``accuracies`` of shape ``(runs, len(train_sizes))``.
    Draws into ``ax`` when given (for panels side by side), else into a new figure; returns the figure.
    """
    if not curves:
        raise ValueError("plot_spread needs at least one curve")
    if not xlabel or not ylabel or not title:
        raise ValueError("every figure needs a title and both axis labels (with units)")
    if ax is None:
        fig = Figure(figsize=(7, 4.5), layout="constrained")
        ax = fig.add_subplot()
    for name, (xs, runs) in curves.items():
        xs, runs = _as_array(xs, f"x values of {name!r}"), _as_array(runs, f"runs of {name!r}")
        if runs.ndim == 1:
            runs = runs[None]
        if xs.ndim != 1 or runs.ndim != 2 or runs.shape[1] != xs.shape[0]:
            raise ValueError(
                f"curve {name!r}: runs must have shape (runs, {xs.shape[0]}) for {xs.shape[0]} x values, "
                f"got {runs.shape}"
            )
        if logx and (xs <= 0).any():
            raise ValueError(f"curve {name!r} has x values <= 0, which a log axis cannot show")
        count = runs.shape[0]
        (line,) = ax.plot(
            xs,
            runs.mean(0),
            marker="o",
            markersize=3,
            label=f"{name} (mean of {count} {spread_name})" if count > 1 else str(name),
        )
        if count > 1:
            ax.fill_between(xs, runs.min(0), runs.max(0), color=line.get_color(), alpha=0.2, linewidth=0)
    if logx:
        ax.set_xscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(
        title=f"band: lowest to highest of the {spread_name}"
        if any(np.ndim(runs) == 2 and len(runs) > 1 for _, runs in curves.values())
        else None,
        fontsize=9,
        title_fontsize=9,
    )
    return ax.figure


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(values) < window:
        return values
    kernel = np.ones(window) / window
    smoothed = np.convolve(values, kernel, mode="valid")
    return np.concatenate([np.full(window - 1, np.nan), smoothed])


def plot_history(
    history, title: str = "Training", loss_label: str = "training loss (nats per token)", smooth: int | None = None
) -> Figure:
    """A :class:`~course_utils.training.History` as panels: loss (raw and smoothed), learning rate,
    gradient norm, and each evaluation metric, all against the optimizer step."""
    if not history.step:
        raise ValueError("the history is empty: nothing was trained")
    steps = np.asarray(history.step)
    loss = np.asarray(history.loss, dtype=float)
    smooth = smooth if smooth is not None else max(1, len(loss) // 50)
    panels = 3 + len(history.eval_metrics)
    ncols = min(panels, 3)
    nrows = math.ceil(panels / ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.3 * nrows), layout="constrained")
    axes = list(fig.subplots(nrows, ncols, squeeze=False).flat)

    ax = axes[0]
    ax.plot(steps, loss, alpha=0.3, label="per step")
    if smooth > 1:
        ax.plot(steps, _moving_average(loss, smooth), label=f"mean of {smooth} steps")
    ax.set_yscale("log" if (loss > 0).all() else "linear")
    ax.set_title("loss")
    ax.set_ylabel(loss_label)
    ax.legend()

    axes[1].plot(steps, history.lr)
    axes[1].set_title("learning rate")
    axes[1].set_ylabel("learning rate")

    axes[2].plot(steps, history.grad_norm, alpha=0.7)
    axes[2].set_title("gradient norm")
    axes[2].set_ylabel("global L2 norm (before clipping)")

    for ax, (name, values) in zip(axes[3:], history.eval_metrics.items(), strict=False):
        ax.plot(history.eval_step, values, marker="o")
        ax.set_title(f"evaluation: {name}")
        ax.set_ylabel(name)
    for ax in axes[:panels]:
        ax.set_xlabel("optimizer step")
        ax.grid(True, alpha=0.3)
    for ax in axes[panels:]:
        ax.set_axis_off()
    fig.suptitle(f"{title} ({history.steps} steps, {history.total_time_s:.1f} s)")
    return fig


def loglog_slope(x, y) -> float:
    """Least-squares slope of ``log y`` against ``log x``: the exponent ``b`` of ``y ~ a x^b``."""
    x, y = _as_array(x, "x"), _as_array(y, "y")
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"need two 1-D arrays of the same length >= 2, got shapes {x.shape} and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("a log-log slope needs strictly positive values")
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)


def loglog_with_slopes(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    xlabel: str,
    ylabel: str,
    title: str,
    fit_from: float | None = None,
) -> Figure:
    """Log-log plot of each ``name -> (n, values)`` with its fitted power law drawn dashed and its
    slope in the legend: slope 2 means the cost grows as ``n^2`` (e.g. attention memory vs length).

    ``fit_from`` fits only the points with ``n >= fit_from`` (small sizes are often dominated by
    fixed overheads).
    """
    if not series:
        raise ValueError("loglog_with_slopes needs at least one series")
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for name, (n, values) in series.items():
        n, values = _as_array(n, f"n of {name!r}"), _as_array(values, f"values of {name!r}")
        keep = n >= fit_from if fit_from is not None else np.ones_like(n, dtype=bool)
        if keep.sum() < 2:
            raise ValueError(f"series {name!r} has fewer than 2 points to fit from n >= {fit_from}")
        slope = loglog_slope(n[keep], values[keep])
        intercept = np.mean(np.log(values[keep]) - slope * np.log(n[keep]))
        (line,) = ax.plot(n, values, marker="o", markersize=4, label=f"{name} (slope {slope:.2f})")
        fitted_n = n[keep]
        ax.plot(fitted_n, np.exp(intercept) * fitted_n**slope, linestyle="--", color=line.get_color(), alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="fitted power law: dashed")
    return fig


# --------------------------------------------------------------------------------------------
# Benchmark results (course_utils.bench)
# --------------------------------------------------------------------------------------------

_BENCHMARK_METRICS = {
    "time_ms": "time per call (ms)",
    "tflops": "TFLOP/s",
    "peak_mem_mib": "peak memory (MiB)",
}


def _n_label(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 else str(n)


def _add_slope_guides(ax, group: list) -> None:
    """Dashed lines of slope 1 (from the lowest first point) and 2 (from the highest) in log-log."""
    ok = [r for r in group if r.status == "ok" and r.peak_mem_mib]
    if not ok:
        return
    n0 = min(r.seq_len for r in ok)
    n1 = max(r.seq_len for r in ok)
    first = [r.peak_mem_mib for r in ok if r.seq_len == n0]
    xs = [n0, n1]
    ax.plot(xs, [min(first), min(first) * n1 / n0], "k--", lw=0.8, alpha=0.5, label="grows as n")
    ax.plot(xs, [max(first), max(first) * (n1 / n0) ** 2], "k:", lw=0.8, alpha=0.5, label="grows as n²")


def _plot_attention_benchmark(results, metrics: Sequence[str]) -> Figure:
    rows = results.rows
    groups = sorted({(r.head_dim, r.causal) for r in rows})
    stored_order = results.meta.get("methods") or list(dict.fromkeys(r.method for r in rows))
    methods = [m for m in stored_order if any(r.method == m for r in rows)]
    fig = Figure(figsize=(4.6 * len(groups), 3.6 * len(metrics)), layout="constrained")
    axes = fig.subplots(len(metrics), len(groups), squeeze=False)
    for j, (head_dim, causal) in enumerate(groups):
        group = [r for r in rows if r.head_dim == head_dim and r.causal == causal]
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for method in methods:
                ok = sorted(
                    (r.seq_len, getattr(r, metric))
                    for r in group
                    if r.method == method and r.status == "ok" and getattr(r, metric)
                )
                failed = sorted(r.seq_len for r in group if r.method == method and r.status == "oom")
                if ok:
                    label = method + (f" (OOM at n={failed[0]})" if failed else "")
                    ax.plot([n for n, _ in ok], [y for _, y in ok], marker="o", label=label)
            if metric == "peak_mem_mib":
                _add_slope_guides(ax, group)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            lengths = sorted({r.seq_len for r in group})
            ax.set_xticks(lengths, labels=[_n_label(n) for n in lengths])
            ax.set_xlabel("sequence length n")
            ax.set_ylabel(_BENCHMARK_METRICS[metric])
            ax.grid(True, which="both", alpha=0.3)
            ax.set_title(f"d={head_dim}, {'causal' if causal else 'not causal'}", fontsize=10)
            if j == 0 and (i == 0 or metric == "peak_mem_mib"):
                ax.legend(fontsize=7)
    fig.suptitle(f"{results.grid}: {results.meta['device_name']}, {results.meta['dtype']}")
    return fig


def _plot_decode_benchmark(results) -> Figure:
    fig = Figure(figsize=(9.5, 3.6), layout="constrained")
    ax_time, ax_rate = fig.subplots(1, 2)
    for mode in ("no-cache", "kv-cache"):
        rows = [r for r in results.rows if r.mode == mode and r.status == "ok"]
        ax_time.plot([r.tokens for r in rows], [r.seconds for r in rows], marker="o", label=mode)
        ax_rate.plot([r.tokens for r in rows], [r.tokens_per_s for r in rows], marker="o", label=mode)
    counts = sorted({r.tokens for r in results.rows})
    for ax, label in ((ax_time, "total time (s)"), (ax_rate, "tokens per second")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(counts, labels=[str(c) for c in counts])
        ax.set_xlabel("new tokens generated")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"decode: {results.meta['device_name']}, {results.meta['dtype']}")
    return fig


def plot_benchmark(results, metrics: Sequence[str] | None = None, path=None) -> Figure:
    """Log-log plots of benchmark results (:class:`course_utils.bench.BenchmarkResults`): one column per
    (head dim, causal), one row per metric.

    Default metrics: time and peak memory (``cpu``, ``memory`` grids), time and TFLOP/s (``gpu``).
    The memory panels carry dashed ``~n`` and ``~n^2`` guides. Decode results get time and tokens per
    second against the number of new tokens. ``path`` also saves the figure there.
    """
    if results.kind == "decode":
        fig = _plot_decode_benchmark(results)
    else:
        if metrics is None:
            metrics = ("time_ms", "tflops") if results.grid == "gpu" else ("time_ms", "peak_mem_mib")
        unknown = set(metrics) - set(_BENCHMARK_METRICS)
        if unknown:
            raise ValueError(f"unknown metric(s) {sorted(unknown)}; choose from {sorted(_BENCHMARK_METRICS)}")
        fig = _plot_attention_benchmark(results, metrics)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
