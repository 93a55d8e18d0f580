def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) float32 table: even columns sin(pos * w_i), odd columns cos(pos * w_i)."""
    # No check of the sizes: max_len=0 quietly gives an empty table.
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]                    # (L, 1)
    frequencies = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (ceil(d/2),)
    angles = positions * frequencies                                                    # (L, ceil(d/2))
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table.float()
