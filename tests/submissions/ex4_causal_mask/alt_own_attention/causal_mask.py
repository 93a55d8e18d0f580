def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """(seq_len, seq_len) bool, True where key j <= query i (may attend)."""
    positions = torch.arange(seq_len, device=device)
    return positions[None, :] <= positions[:, None]  # column (key) <= row (query)
