@triton.jit
def flash_forward_kernel(
    Q, K, V, Output, Lse,
    stride_qz, stride_qm, stride_qd,
    stride_kz, stride_kn, stride_kd,
    stride_vz, stride_vn, stride_vd,
    stride_oz, stride_om, stride_od,
    n_queries, n_keys, head_dim,
    scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # Another way: exp2 with the scale folded into log2(e), and for causal attention two loops, the key
    # tiles below the diagonal without any mask, then the tiles on the diagonal with the mask.
    start_m = tl.program_id(0) * BLOCK_M
    q_base = Q + tl.program_id(1) * stride_qz
    k_base = K + tl.program_id(1) * stride_kz
    v_base = V + tl.program_id(1) * stride_vz
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    d_ok = offs_d[None, :] < head_dim
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=(offs_m[:, None] < n_queries) & d_ok, other=0.0).to(tl.float32)
    q = q * (scale * 1.4426950408889634)  # scores in log2 units: exp(s) = exp2(s * log2(e))
    running_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    total = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    if CAUSAL:
        below = (start_m // BLOCK_N) * BLOCK_N  # key tiles that end before the first query of the tile
        end = tl.minimum(start_m + BLOCK_M, n_keys)
    else:
        below = 0
        end = n_keys
    for start_n in range(0, below, BLOCK_N):  # wholly visible: no mask
        cols = start_n + offs_n
        k = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                    mask=offs_d[:, None] < head_dim, other=0.0).to(tl.float32)  # (BLOCK_D, BLOCK_N)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=d_ok, other=0.0).to(tl.float32)
        s = tl.dot(q, k, input_precision="ieee")
        new_max = tl.maximum(running_max, tl.max(s, 1))
        weights = tl.math.exp2(s - new_max[:, None])
        correction = tl.math.exp2(running_max - new_max)
        running_sum = running_sum * correction + tl.sum(weights, 1)
        total = total * correction[:, None] + tl.dot(weights, v, input_precision="ieee")
        running_max = new_max
    for start_n in range(below, end, BLOCK_N):  # the diagonal (causal) or every tile (not causal): masked
        cols = start_n + offs_n
        k = tl.load(k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kd,
                    mask=(cols[None, :] < n_keys) & (offs_d[:, None] < head_dim), other=0.0).to(tl.float32)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=(cols[:, None] < n_keys) & d_ok, other=0.0).to(tl.float32)
        s = tl.dot(q, k, input_precision="ieee")
        keep = cols[None, :] < n_keys
        if CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        s = tl.where(keep, s, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(s, 1))
        weights = tl.math.exp2(s - new_max[:, None])
        correction = tl.math.exp2(running_max - new_max)
        running_sum = running_sum * correction + tl.sum(weights, 1)
        total = total * correction[:, None] + tl.dot(weights, v, input_precision="ieee")
        running_max = new_max

    rows_ok = offs_m < n_queries
    tl.store(Output + tl.program_id(1) * stride_oz + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od,
             (total / running_sum[:, None]).to(Output.dtype.element_ty), mask=rows_ok[:, None] & d_ok)
    tl.store(Lse + tl.program_id(1) * n_queries + offs_m,
             (running_max + tl.math.log2(running_sum)) * 0.6931471805599453, mask=rows_ok)
