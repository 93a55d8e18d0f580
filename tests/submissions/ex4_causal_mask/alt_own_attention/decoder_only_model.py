class CausalSelfAttention(nn.Module):
    """Multi-head self-attention written out, masked with causal_mask."""

    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.attention_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        q, k, v = (t.view(batch, length, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5                                     # (B, H, T, T)
        scores = scores.masked_fill(~causal_mask(length, device=x.device), float("-inf"))
        weights = self.attention_dropout(scores.softmax(dim=-1))
        return self.out((weights @ v).transpose(1, 2).reshape(batch, length, width))


class CausalBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(d_model, num_heads, dropout)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DecoderOnlyModel(nn.Module):
    """A small GPT: embeddings + positions -> causal pre-norm blocks -> LayerNorm -> logits."""

    def __init__(self, vocab_size: int, d_model: int = 32, num_heads: int = 4, num_layers: int = 2,
                 max_len: int = 64, dropout: float = 0.1):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Parameter(torch.zeros(max_len, d_model).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[CausalBlock(d_model, num_heads, dropout) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, vocab_size) logits; position t sees tokens 0..t only."""
        x = self.dropout(self.tokens(tokens) + self.positions[: tokens.shape[1]])
        return self.head(self.norm(self.blocks(x)))
