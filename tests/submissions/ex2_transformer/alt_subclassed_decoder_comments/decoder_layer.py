class DecoderLayer(EncoderLayer):
    """An EncoderLayer plus cross-attention (the TransformerDecoderLayer of PyTorch, by hand): the
    self-attention, the feed-forward block and the residual wiring are inherited."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__(d_model, num_heads, d_ff, dropout, norm_first)
        self.multihead_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, T, d_model); memory: (B, S, d_model); masks in the course convention."""
        x = self.residual(x, lambda h: self.self_attention_block(h, tgt_mask), self.norm1)
        x = self.residual(x, lambda h: self.dropout2(self.multihead_attn(h, memory, memory, memory_mask)[0]),
                          self.norm2)
        return self.residual(x, lambda h: self.feed_forward_block(h, self.dropout3), self.norm3)
