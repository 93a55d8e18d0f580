class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with dropout, a residual connection and a LayerNorm.

    The same arithmetic as nn.TransformerEncoderLayer (batch_first=True), written out by hand; the
    blocks below mirror TransformerEncoderLayer._sa_block and TransformerEncoderLayer._ff_block.
    """

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

    def residual(self, x, sublayer, norm):
        """One sublayer with its residual connection: pre-norm or post-norm (like TransformerEncoder)."""
        return x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))

    def self_attention_block(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask)[0])

    def feed_forward_block(self, x, last_dropout=None):
        hidden = self.dropout(F.relu(self.linear1(x)))
        return (last_dropout or self.dropout2)(self.linear2(hidden))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, T, d_model); mask: bool, broadcastable to (B, H, T, T), True = may attend."""
        x = self.residual(x, lambda h: self.self_attention_block(h, mask), self.norm1)
        return self.residual(x, self.feed_forward_block, self.norm2)
