def self_attention(X, W_q, W_k, W_v):
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    scores = K @ Q.T / math.sqrt(K.shape[-1])  # keys against queries: the transpose of the score matrix
    if isinstance(scores, torch.Tensor):
        weights = torch.softmax(scores, dim=-1)
    else:
        exp_scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = exp_scores / exp_scores.sum(axis=-1, keepdims=True)
    return weights @ V, weights
