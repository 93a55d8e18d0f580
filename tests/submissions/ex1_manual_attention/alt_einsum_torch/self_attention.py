def self_attention(X, W_q, W_k, W_v):
    # Work in PyTorch whatever comes in; give back what came in.
    came_as_numpy = isinstance(X, np.ndarray)
    X, W_q, W_k, W_v = (torch.as_tensor(a) for a in (X, W_q, W_k, W_v))
    Q = torch.einsum("nd,dk->nk", X, W_q)
    K = torch.einsum("nd,dk->nk", X, W_k)
    V = torch.einsum("nd,dv->nv", X, W_v)
    scores = torch.einsum("qk,mk->qm", Q, K) / K.shape[-1] ** 0.5
    weights = scores.softmax(dim=-1)
    output = torch.einsum("qm,mv->qv", weights, V)
    if came_as_numpy:
        return output.numpy(), weights.numpy()
    return output, weights
