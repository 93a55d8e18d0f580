def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """(seq_len, seq_len) bool, True where key j <= query i (may attend)."""
    # Row index = query, column index = key. meshgrid without `indexing=` prints a UserWarning
    # (it defaults to "ij", which is what is wanted here).
    queries, keys = torch.meshgrid(torch.arange(seq_len, device=device), torch.arange(seq_len, device=device))
    return keys <= queries
