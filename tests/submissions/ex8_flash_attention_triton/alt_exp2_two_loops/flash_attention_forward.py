def flash_attention_forward(q, k, v, causal=False, block_m=16, block_n=16):
    """FlashAttention forward with flash_forward_kernel; (out, lse)."""
    home = q.device  # given: the grader sends CPU tensors; the kernel runs on DEVICE
    q, k, v = q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)
    if causal and q.shape[1] != k.shape[1]:
        raise ValueError("causal attention needs as many queries as keys")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    z, n_queries, head_dim = q.shape
    out = torch.empty_like(q)
    lse = torch.empty((z, n_queries), device=q.device, dtype=torch.float32)
    flash_forward_kernel[(triton.cdiv(n_queries, block_m), z)](
        q, k, v, out, lse,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        n_queries, k.shape[1], head_dim, head_dim ** -0.5,
        CAUSAL=causal, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
    )
    return out.to(home), lse.to(home)
