def self_attention(X, W_q, W_k, W_v):
    """Plain Python loops over lists of floats; converts back to the input's kind at the end."""
    def matmul(A, B):
        return [[sum(a * b for a, b in zip(row, column)) for column in zip(*B)] for row in A]

    X_rows, Wq_rows, Wk_rows, Wv_rows = (M.tolist() for M in (X, W_q, W_k, W_v))
    Q, K, V = matmul(X_rows, Wq_rows), matmul(X_rows, Wk_rows), matmul(X_rows, Wv_rows)
    d_k = len(Wk_rows[0])
    weights = []
    for q in Q:
        scores = [sum(qi * ki for qi, ki in zip(q, k)) / math.sqrt(d_k) for k in K]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        weights.append([e / total for e in exps])
    output = matmul(weights, V)
    if isinstance(X, torch.Tensor):
        return torch.tensor(output, dtype=X.dtype), torch.tensor(weights, dtype=X.dtype)
    return np.array(output), np.array(weights)
