def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v with the (T_q, T_k) scores materialised."""
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    if causal and n_queries != n_keys:
        raise ValueError(f"a causal mask needs square scores, got {n_queries} queries and {n_keys} keys")
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if causal:
        query_index = torch.arange(n_queries, device=q.device)[:, None]
        key_index = torch.arange(n_keys, device=q.device)[None, :]
        scores = torch.where(key_index > query_index, torch.full_like(scores, float("-inf")), scores)
    scores = scores - scores.amax(dim=-1, keepdim=True)  # stable softmax, written out
    weights = scores.exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return torch.einsum("...qk,...kd->...qd", weights, v)
