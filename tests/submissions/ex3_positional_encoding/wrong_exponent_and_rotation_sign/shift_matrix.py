def shift_matrix(k: int, d_model: int) -> torch.Tensor:
    """(d_model, d_model) matrix M_k with PE[pos + k] = M_k @ PE[pos] for every position pos."""
    if d_model % 2:
        raise ValueError(f"the shift matrix rotates (sin, cos) pairs: d_model={d_model} is odd")
    theta = k * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    # new sin = sin * cos(theta) + cos * sin(theta);  new cos = cos * cos(theta) - sin * sin(theta)
    matrix[even, even] = torch.cos(theta)
    matrix[even, even + 1] = -torch.sin(theta)
    matrix[even + 1, even] = torch.sin(theta)
    matrix[even + 1, even + 1] = torch.cos(theta)
    return matrix.float()
