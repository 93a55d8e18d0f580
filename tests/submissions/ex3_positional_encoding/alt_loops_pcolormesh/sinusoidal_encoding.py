def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) float32 table: even columns sin(pos * w_i), odd columns cos(pos * w_i)."""
    if max_len <= 0 or d_model <= 0:
        raise ValueError(f"need a positive length and width, got max_len={max_len} and d_model={d_model}")
    table = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / math.pow(10000.0, i / d_model)
            table[pos, i] = math.sin(angle)
            if i + 1 < d_model:
                table[pos, i + 1] = math.cos(angle)
    return table
