def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with the (T_q, T_k) scores materialised.

    What F.scaled_dot_product_attention computes, without its fused kernels: the whole score matrix is
    kept in memory (unlike nn.MultiheadAttention's fast path or course_utils' FlashAttention).
    """
    t_q, t_k = q.shape[-2], k.shape[-2]
    if causal and t_q != t_k:
        raise ValueError(f"causal attention needs T_q == T_k, got {t_q} queries and {t_k} keys")
    scores = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5  # (..., T_q, T_k)
    if causal:
        allowed = torch.arange(t_k, device=q.device)[None, :] <= torch.arange(t_q, device=q.device)[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v  # (..., T_q, d_v)
