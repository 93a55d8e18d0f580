class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, feed-forward; each with dropout,
    a residual connection and a LayerNorm.

    Functional style, as EncoderLayer: F.linear, F.layer_norm and F.dropout on the parameters of the table.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.p = dropout
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.multihead_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def _norm(self, norm, x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def _drop(self, x):
        return F.dropout(x, self.p, self.training)

    def _feed_forward(self, x):
        hidden = self._drop(F.relu(F.linear(x, self.linear1.weight, self.linear1.bias)))
        return self._drop(F.linear(hidden, self.linear2.weight, self.linear2.bias))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: (B, T, d_model); memory: (B, S, d_model); masks in the course convention."""
        sublayers = [
            lambda h: self._drop(self.self_attn(h, h, h, tgt_mask)[0]),
            lambda h: self._drop(self.multihead_attn(h, memory, memory, memory_mask)[0]),
            self._feed_forward,
        ]
        for sublayer, norm in zip(sublayers, (self.norm1, self.norm2, self.norm3)):
            if self.norm_first:
                x = x + sublayer(self._norm(norm, x))
            else:
                x = self._norm(norm, x + sublayer(x))
        return x
