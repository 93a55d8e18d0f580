def self_attention(X, W_q, W_k, W_v):
    """Scaled dot-product self-attention for one sequence.

    X: (n, d_model); W_q, W_k: (d_model, d_k); W_v: (d_model, d_v).
    Returns (output, weights): output (n, d_v), weights (n, n) with rows that sum to 1.
    Accepts NumPy arrays or PyTorch tensors and returns the same kind.
    """
    # One code path for both kinds: copy everything into float64 tensors, convert back at the end.
    # torch.tensor(...) of a tensor works but prints a UserWarning (it suggests clone().detach()).
    given_numpy = isinstance(X, np.ndarray)
    result_dtype = None if given_numpy else X.dtype
    X, W_q, W_k, W_v = (torch.tensor(a, dtype=torch.float64) for a in (X, W_q, W_k, W_v))
    Q, K, V = X @ W_q, X @ W_k, X @ W_v                    # (n, d_k), (n, d_k), (n, d_v)
    weights = torch.softmax(Q @ K.T / math.sqrt(K.shape[1]), dim=1)   # (n, n)
    output = weights @ V                                   # (n, d_v)
    if given_numpy:
        return output.numpy(), weights.numpy()
    return output.to(result_dtype), weights.to(result_dtype)
