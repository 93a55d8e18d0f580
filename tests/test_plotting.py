"""Tests for course_utils.plotting: every figure has a title, labelled axes, and the data it claims."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from course_utils import plotting, training
from course_utils.positional import sinusoidal_table


def _visible_axes(fig: Figure):
    """The plotting axes of a figure: visible, and not a colour bar."""
    return [ax for ax in fig.axes if ax.axison and ax.get_label() != "<colorbar>"]


def _render(fig: Figure) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)  # renders without a GUI or pyplot
    assert buffer.getvalue()[:4] == b"\x89PNG", "the figure must render to PNG"


def _assert_labelled(fig: Figure):
    assert isinstance(fig, Figure), f"expected a matplotlib Figure, got {type(fig).__name__}"
    for ax in _visible_axes(fig):
        assert ax.get_xlabel(), f"axes {ax.get_title()!r} has no x label"
        assert ax.get_ylabel(), f"axes {ax.get_title()!r} has no y label"
        assert ax.get_title() or fig.get_suptitle(), "every panel needs a title (or the figure a suptitle)"


def test_attention_heatmap_shows_the_weights_with_labels():
    weights = torch.softmax(torch.randn(3, 5), dim=-1)
    fig = plotting.attention_heatmap(weights, x_labels=list("abcde"), y_labels=["x", "y", "z"], title="Toy")
    _assert_labelled(fig)
    ax = _visible_axes(fig)[0]
    assert ax.get_title() == "Toy"
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde"), "keys label the columns"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"], "queries label the rows"
    np.testing.assert_allclose(ax.images[0].get_array(), weights.numpy(), rtol=1e-6)
    assert any(a.get_label() == "<colorbar>" for a in fig.axes), "a heatmap needs a colour bar"
    _render(fig)


def test_attention_heatmap_rejects_bad_input():
    with pytest.raises(ValueError, match="x_labels has 2 labels"):
        plotting.attention_heatmap(torch.rand(3, 4), x_labels=["a", "b"])
    with pytest.raises(ValueError, match="attention_heads_grid"):
        plotting.attention_heatmap(torch.rand(2, 3, 4))
    with pytest.raises(ValueError, match="NaN"):
        plotting.attention_heatmap(torch.tensor([[float("nan"), 1.0]]))


def test_attention_heads_grid_has_one_panel_per_head():
    weights = torch.softmax(torch.randn(3, 4, 4), dim=-1)
    fig = plotting.attention_heads_grid(weights, x_labels=list("abcd"), y_labels=list("abcd"), ncols=2, title="Layer 1")
    _assert_labelled(fig)
    panels = _visible_axes(fig)
    assert [ax.get_title() for ax in panels] == ["head 0", "head 1", "head 2"], "one titled panel per head"
    assert fig.get_suptitle() == "Layer 1"
    assert all(ax.images[0].get_clim() == (0.0, 1.0) for ax in panels), "heads share one colour scale"


def test_positional_encoding_heatmap():
    table = sinusoidal_table(50, 32)
    fig = plotting.positional_encoding_heatmap(table)
    _assert_labelled(fig)
    ax = _visible_axes(fig)[0]
    assert ax.images[0].get_array().shape == (50, 32)
    assert "position" in ax.get_ylabel() and "dimension" in ax.get_xlabel()


def test_plot_curves_draws_each_named_curve():
    fig = plotting.plot_curves(
        {"rnn": ([1, 2, 4], [0.9, 0.5, 0.2]), "transformer": ([1, 2, 4], [1.0, 1.0, 0.9])},
        xlabel="sequence length (tokens)",
        ylabel="accuracy",
        title="Copy task",
        logx=True,
    )
    _assert_labelled(fig)
    ax = _visible_axes(fig)[0]
    assert [line.get_label() for line in ax.get_lines()] == ["rnn", "transformer"]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
    assert ax.get_legend() is not None
    with pytest.raises(ValueError, match="equal length"):
        plotting.plot_curves({"bad": ([1, 2], [1.0])}, "x", "y", "t")
    with pytest.raises(ValueError, match="log axis"):
        plotting.plot_curves({"bad": ([0, 1], [1.0, 2.0])}, "x", "y", "t", logx=True)
    with pytest.raises(ValueError, match="title"):
        plotting.plot_curves({"ok": ([1], [1.0])}, "", "y", "t")


def test_plot_history_has_a_labelled_panel_per_quantity():
    steps = list(range(1, 101))
    history = training.History(
        step=steps,
        loss=[2.0 / s for s in steps],
        lr=[training.noam_lr(s, 64, 20) for s in steps],
        grad_norm=[1.0 + 1.0 / s for s in steps],
        time_s=[0.01 * s for s in steps],
        eval_step=[50, 100],
        eval_metrics={"accuracy": [0.5, 0.9]},
        total_time_s=1.0,
    )
    fig = plotting.plot_history(history, title="Tiny")
    _assert_labelled(fig)
    titles = [ax.get_title() for ax in _visible_axes(fig)]
    assert titles == ["loss", "learning rate", "gradient norm", "evaluation: accuracy"]
    assert all(ax.get_xlabel() == "optimizer step" for ax in _visible_axes(fig))
    assert fig.get_suptitle().startswith("Tiny")
    _render(fig)
    with pytest.raises(ValueError, match="empty"):
        plotting.plot_history(training.History())


def test_loglog_slope_recovers_the_exponent():
    n = np.array([64, 128, 256, 512, 1024])
    assert plotting.loglog_slope(n, 3 * n**2.0) == pytest.approx(2.0)
    assert plotting.loglog_slope(n, 0.5 * n) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive"):
        plotting.loglog_slope([1, 2], [0, 1])


def test_loglog_with_slopes_annotates_the_fit():
    n = np.array([64, 128, 256, 512, 1024])
    fig = plotting.loglog_with_slopes(
        {"memory": (n, 4.0 * n**2), "time": (n, 1e-3 * n**1.5)},
        xlabel="sequence length n (tokens)",
        ylabel="cost (bytes or s)",
        title="Attention cost",
    )
    _assert_labelled(fig)
    ax = _visible_axes(fig)[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["memory (slope 2.00)", "time (slope 1.50)"], f"the legend must state the slopes, got {legend}"
    assert ax.get_xscale() == ax.get_yscale() == "log"
    fitted = plotting.loglog_with_slopes({"t": (n, np.where(n < 200, 1.0, 1e-4 * n**2))}, "n", "t", "t", fit_from=200)
    assert "slope 2.00" in _visible_axes(fitted)[0].get_legend().get_texts()[0].get_text(), (
        "fit_from must leave the small sizes out of the fit"
    )


def test_figures_do_not_touch_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    plotting.attention_heatmap(torch.rand(2, 2))
    assert plt.get_fignums() == before, "figures are built without pyplot, so none accumulate in its registry"
    assert matplotlib.get_backend()  # any backend works, Agg included


def test_plot_spread_draws_mean_and_band():
    runs = [[0.5, 0.8, 0.9], [0.6, 0.9, 0.95], [0.4, 0.85, 0.97]]
    fig = plotting.plot_spread(
        {"ViT": ([72, 360, 1438], runs)}, "training images", "test accuracy", "spread", logx=True
    )
    ax = fig.axes[0]
    assert np.allclose(ax.lines[0].get_ydata(), np.mean(runs, axis=0)), "the line is the mean over runs"
    assert len(ax.collections) == 1, "one band for the curve measured several times"
    assert "mean of 3 seeds" in ax.get_legend().get_texts()[0].get_text()
    with pytest.raises(ValueError, match="runs must have shape"):
        plotting.plot_spread({"bad": ([1, 2], [[1.0, 2.0, 3.0]])}, "x", "y", "t")
