class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.num_heads = num_heads
        self.self_attn = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, length, source_length = x.shape[0], x.shape[1], memory.shape[1]

        def attend_self(h):
            ignore = torch_attention_mask(tgt_mask, batch, self.num_heads, length, length)
            return self.dropout1(self.self_attn(h, h, h, attn_mask=ignore, need_weights=False)[0])

        def attend_memory(h):
            ignore = torch_attention_mask(memory_mask, batch, self.num_heads, length, source_length)
            return self.dropout2(self.multihead_attn(h, memory, memory, attn_mask=ignore, need_weights=False)[0])

        def feed_forward(h):
            return self.dropout3(self.linear2(self.dropout(torch.relu(self.linear1(h)))))

        for sublayer, norm in ((attend_self, self.norm1), (attend_memory, self.norm2), (feed_forward, self.norm3)):
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x
