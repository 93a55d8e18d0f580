def torch_attention_mask(mask, batch, heads, queries, keys):
    """Course mask (True = may attend, broadcastable to (B, H, T_q, T_k)) -> the (B * H, T_q, T_k)
    attn_mask of nn.MultiheadAttention, where True means *ignore*."""
    if mask is None:
        return None
    full = torch.broadcast_to(mask, (batch, heads, queries, keys))
    return ~full.reshape(batch * heads, queries, keys)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with dropout, a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.num_heads = num_heads
        self.self_attn = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        def attend(h):
            ignore = torch_attention_mask(mask, h.shape[0], self.num_heads, h.shape[1], h.shape[1])
            return self.dropout1(self.self_attn(h, h, h, attn_mask=ignore, need_weights=False)[0])

        def feed_forward(h):
            return self.dropout2(self.linear2(self.dropout(torch.relu(self.linear1(h)))))

        for sublayer, norm in ((attend, self.norm1), (feed_forward, self.norm2)):
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x
