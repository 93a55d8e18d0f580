def attention_memory_bytes(batch: int, heads: int, n: int, dtype: torch.dtype) -> int:
    """Bytes of the (batch, heads, n, n) attention matrix in dtype."""
    return batch * heads * n * n * torch.empty((), dtype=dtype).element_size()
