def self_attention(X, W_q, W_k, W_v):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    scores = Q @ K.T / math.sqrt(K.shape[-1])
    # softmax over the queries (axis 0): each column sums to 1 instead of each row
    if isinstance(scores, torch.Tensor):
        weights = torch.softmax(scores, dim=0)
    else:
        exp_scores = np.exp(scores - scores.max(axis=0, keepdims=True))
        weights = exp_scores / exp_scores.sum(axis=0, keepdims=True)
    return weights @ V, weights
