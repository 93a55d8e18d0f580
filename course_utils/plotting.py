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
    "plot_history",
    "loglog_slope",
    "loglog_with_slopes",
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
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=vmax if vmax is not None else max(weights.max(), 1e-12),
                      aspect="auto", interpolation="nearest")
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)), [str(s) for s in x_labels], rotation=90, fontsize=8)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), [str(s) for s in y_labels], fontsize=8)
    return image


def attention_heatmap(weights, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                      title: str = "Attention weights", xlabel: str = "key (attended-to) position",
                      ylabel: str = "query position", figsize: tuple[float, float] | None = None) -> Figure:
    """One attention matrix ``(T_q, T_k)``: row ``i`` is the distribution query ``i`` puts over the keys.

    ``x_labels`` name the keys (columns), ``y_labels`` the queries (rows), e.g. the source and target
    characters of a translation, so that the alignment can be read off the picture.
    """
    weights = _as_array(weights, "weights")
    if weights.ndim != 2:
        raise ValueError(f"attention_heatmap expects one (T_q, T_k) matrix, got shape {weights.shape}; "
                         "use attention_heads_grid for (H, T_q, T_k)")
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


def attention_heads_grid(weights, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                         title: str = "Attention weights per head", ncols: int = 4,
                         xlabel: str = "key position", ylabel: str = "query position") -> Figure:
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


def positional_encoding_heatmap(table, title: str = "Sinusoidal position encoding",
                                max_positions: int | None = None) -> Figure:
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


def plot_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str, ylabel: str,
                title: str, logx: bool = False, logy: bool = False, markers: bool = True) -> Figure:
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


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(values) < window:
        return values
    kernel = np.ones(window) / window
    smoothed = np.convolve(values, kernel, mode="valid")
    return np.concatenate([np.full(window - 1, np.nan), smoothed])


def plot_history(history, title: str = "Training", loss_label: str = "training loss (nats per token)",
                 smooth: int | None = None) -> Figure:
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

    for ax, (name, values) in zip(axes[3:], history.eval_metrics.items()):
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


def loglog_with_slopes(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], xlabel: str,
                       ylabel: str, title: str, fit_from: float | None = None) -> Figure:
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
        ax.plot(fitted_n, np.exp(intercept) * fitted_n ** slope, linestyle="--", color=line.get_color(), alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="fitted power law: dashed")
    return fig
