def attention_memory_bytes(batch: int, heads: int, n: int, dtype: torch.dtype) -> int:
    """Bytes of the (batch, heads, n, n) attention matrix in dtype."""
    bytes_per_number = (torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits) // 8
    return batch * heads * n ** 2 * bytes_per_number
