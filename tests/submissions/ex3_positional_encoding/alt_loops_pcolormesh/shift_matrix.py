def shift_matrix(k: int, d_model: int) -> torch.Tensor:
    """(d_model, d_model) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every position pos."""
    if d_model % 2 == 1:
        raise ValueError(f"d_model must be even to pair sines with cosines, got {d_model}")
    blocks = []
    for i in range(0, d_model, 2):
        theta = k / 10000.0 ** (i / d_model)
        c, s = math.cos(theta), math.sin(theta)
        blocks.append(torch.tensor([[c, s], [-s, c]]))
    return torch.block_diag(*blocks)
