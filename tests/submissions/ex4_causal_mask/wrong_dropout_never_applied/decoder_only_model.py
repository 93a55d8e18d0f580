class DecoderOnlyModel(nn.Module):
    """A small GPT: embeddings + positions -> causal pre-norm blocks -> LayerNorm -> logits."""

    def __init__(self, vocab_size: int, d_model: int = 32, num_heads: int = 4, num_layers: int = 2,
                 max_len: int = 64, dropout: float = 0.1):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)  # created, never applied
        # The blocks are built without dropout: the `dropout` argument never reaches them.
        self.blocks = nn.ModuleList(
            EncoderLayer(d_model, num_heads, 4 * d_model, 0.0, activation="gelu", norm_first=True)
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, vocab_size) logits; position t sees tokens 0..t only."""
        length = tokens.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence of {length} tokens is longer than max_len={self.max_len}")
        positions = torch.arange(length, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, d_model)
        mask = causal_mask(length, device=tokens.device)  # (T, T)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.final_norm(x))
