def plot_encoding(table: torch.Tensor) -> Figure:
    """Heatmap of a (positions, dimensions) table; returns the figure."""
    values = table.detach().cpu().numpy()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    image = ax.imshow(values, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_title(f"Sinusoidal position encoding, {values.shape[0]} positions x {values.shape[1]} dimensions")
    fig.colorbar(image, ax=ax, label="value")
    return fig
