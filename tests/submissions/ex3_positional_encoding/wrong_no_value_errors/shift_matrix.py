def shift_matrix(k: int, d_model: int) -> torch.Tensor:
    """(d_model, d_model) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every position pos."""
    # No check for an odd d_model: the last sine then has no partner and indexing fails with an IndexError.
    theta = k * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    matrix[even, even] = torch.cos(theta)
    matrix[even, even + 1] = torch.sin(theta)
    matrix[even + 1, even] = -torch.sin(theta)
    matrix[even + 1, even + 1] = torch.cos(theta)
    return matrix.float()
