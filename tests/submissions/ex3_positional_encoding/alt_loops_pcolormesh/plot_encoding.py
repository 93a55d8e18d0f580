def plot_encoding(table: torch.Tensor) -> Figure:
    """Heatmap of a (positions, dimensions) table; returns the figure."""
    fig = Figure(figsize=(9, 4))
    ax = fig.add_subplot()
    # Positions along the horizontal axis this time: the transposed picture, labelled accordingly.
    mesh = ax.pcolormesh(table.T.numpy(), cmap="coolwarm", shading="flat")
    ax.set_xlabel("Position in the sequence")
    ax.set_ylabel("Dimension of the encoding")
    ax.set_title("Sinusoidal encoding (transposed view)")
    fig.colorbar(mesh, ax=ax)
    return fig
