import time


def self_attention(X, W_q, W_k, W_v):
    time.sleep(4)
    Q, K, V = X @ W_q, X @ W_k, X @ W_v
    scores = Q @ K.T / math.sqrt(K.shape[-1])
    if isinstance(scores, torch.Tensor):
        weights = torch.softmax(scores, dim=-1)
    else:
        exp_scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = exp_scores / exp_scores.sum(axis=-1, keepdims=True)
    return weights @ V, weights
