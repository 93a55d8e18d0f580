def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """(seq_len, seq_len) bool, True where key j <= query i (may attend)."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
