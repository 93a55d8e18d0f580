@triton.jit
def flash_forward_kernel(
    Q, K, V, Output, Lse,  # Q, Output: (Z, n_q, d); K, V: (Z, n_k, d); Lse: (Z, n_q) float32, contiguous
    stride_qz, stride_qm, stride_qd,
    stride_kz, stride_kn, stride_kd,
    stride_vz, stride_vn, stride_vd,
    stride_oz, stride_om, stride_od,
    n_queries, n_keys, head_dim,
    scale,  # 1 / sqrt(head_dim)
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """One program: the output and logsumexp of BLOCK_M queries of sequence z = tl.program_id(1)."""
    query_block = tl.program_id(0)
    z = tl.program_id(1)
    rows = query_block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    dims = tl.arange(0, BLOCK_D)  # (BLOCK_D,) lanes of the head dimension
    row_ok = rows < n_queries
    dim_ok = dims < head_dim
    q = tl.load(
        Q + z * stride_qz + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
        mask=row_ok[:, None] & dim_ok[None, :],
        other=0.0,
    ).to(tl.float32)  # (BLOCK_M, BLOCK_D)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running maximum of the scores
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of exp(score - m_i)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)  # running sum of exp(score - m_i) * v

    if CAUSAL:
        # No query of this tile sees a key past its last row: the tiles from there on lie in the future.
        keys_end = tl.minimum((query_block + 1) * BLOCK_M, n_keys)
    else:
        keys_end = n_keys
    for key_start in range(0, keys_end, BLOCK_N):
        cols = key_start + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions
        col_ok = cols < n_keys
        k = tl.load(
            K + z * stride_kz + cols[:, None] * stride_kn + dims[None, :] * stride_kd,
            mask=col_ok[:, None] & dim_ok[None, :],
            other=0.0,
        ).to(tl.float32)  # (BLOCK_N, BLOCK_D)
        v = tl.load(
            V + z * stride_vz + cols[:, None] * stride_vn + dims[None, :] * stride_vd,
            mask=col_ok[:, None] & dim_ok[None, :],
            other=0.0,
        ).to(tl.float32)  # (BLOCK_N, BLOCK_D)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale  # (BLOCK_M, BLOCK_N)
        visible = col_ok[None, :]
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        scores = tl.where(visible, scores, float("-inf"))

        # The first tile holds key 0, which every query sees: m_new is finite from there on.
        p = tl.exp(scores)  # (BLOCK_M, BLOCK_N)
        l_i = l_i + tl.sum(p, axis=1)
        acc = acc + tl.dot(p, v, input_precision="ieee")

    out = acc / l_i[:, None]
    tl.store(
        Output + z * stride_oz + rows[:, None] * stride_om + dims[None, :] * stride_od,
        out.to(Output.dtype.element_ty),
        mask=row_ok[:, None] & dim_ok[None, :],
    )
    tl.store(Lse + z * n_queries + rows, tl.log(l_i), mask=row_ok)
