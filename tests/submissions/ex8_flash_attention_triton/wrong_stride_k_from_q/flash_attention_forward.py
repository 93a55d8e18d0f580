def flash_attention_forward(q, k, v, causal=False, block_m=16, block_n=16):
    """FlashAttention forward with flash_forward_kernel.

    q: (Z, n_q, d); k, v: (Z, n_k, d); one dtype, float32 or bfloat16; any strides. causal needs n_q == n_k.
    block_m, block_n: the query and key tile sizes (powers of two, at least 16).
    Returns (out, lse): out (Z, n_q, d) in q's dtype, lse (Z, n_q) float32, the natural-log logsumexp of
    each query's scaled scores.
    """
    home = q.device  # given: the grader sends CPU tensors; the kernel runs on DEVICE
    q, k, v = q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)
    n_batch, n_queries, head_dim = q.shape
    n_keys = k.shape[1]
    if causal and n_queries != n_keys:
        raise ValueError(f"causal attention needs n_q == n_k, got {n_queries} and {n_keys}")
    out = torch.empty(q.shape, dtype=q.dtype, device=DEVICE)  # contiguous, whatever q's strides are
    lse = torch.empty(n_batch, n_queries, dtype=torch.float32, device=DEVICE)
    grid = (triton.cdiv(n_queries, block_m), n_batch)
    flash_forward_kernel[grid](
        q, k, v, out, lse,
        *q.stride(), *q.stride(), *v.stride(), *out.stride(),
        n_queries, n_keys, head_dim,
        1.0 / math.sqrt(head_dim),
        CAUSAL=bool(causal),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
    )
    return out.to(home), lse.to(home)
