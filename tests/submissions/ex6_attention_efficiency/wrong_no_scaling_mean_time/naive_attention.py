def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with the (T_q, T_k) scores materialised."""
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal=True needs as many queries as keys, got T_q={q.shape[-2]} and T_k={k.shape[-2]}")
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(dim=-1) @ v  # (..., T_q, d_v)
