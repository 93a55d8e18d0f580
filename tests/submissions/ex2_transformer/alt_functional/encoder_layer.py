class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with dropout, a residual connection and a LayerNorm.

    The parameters live in nn.Linear / nn.LayerNorm modules with the names of the table; forward applies
    them with torch.nn.functional (F.linear, F.layer_norm) and drops out with F.dropout: no dropout modules.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.p = dropout
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def _norm(self, norm, x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def _drop(self, x):
        return F.dropout(x, self.p, self.training)

    def _attention(self, x, mask):
        return self._drop(self.self_attn(x, x, x, mask)[0])

    def _feed_forward(self, x):
        hidden = self._drop(F.relu(F.linear(x, self.linear1.weight, self.linear1.bias)))
        return self._drop(F.linear(hidden, self.linear2.weight, self.linear2.bias))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, T, d_model); mask: bool, broadcastable to (B, H, T, T), True = may attend."""
        if self.norm_first:
            x = x + self._attention(self._norm(self.norm1, x), mask)
            return x + self._feed_forward(self._norm(self.norm2, x))
        x = self._norm(self.norm1, x + self._attention(x, mask))
        return self._norm(self.norm2, x + self._feed_forward(x))
