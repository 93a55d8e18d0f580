class DecoderOnlyModel(nn.Module):
    """A small GPT from PyTorch's own encoder: embeddings + positions -> nn.TransformerEncoder with a causal
    mask -> LayerNorm -> logits."""

    def __init__(self, vocab_size: int, d_model: int = 32, num_heads: int = 4, num_layers: int = 2,
                 max_len: int = 64, dropout: float = 0.1):
        super().__init__()
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        block = nn.TransformerEncoderLayer(d_model, num_heads, 4 * d_model, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(block, num_layers)
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, vocab_size) logits; position t sees tokens 0..t only."""
        length = tokens.shape[1]
        positions = torch.arange(length, device=tokens.device)
        x = self.dropout(self.token_embedding(tokens) + self.position_embedding(positions))  # (B, T, d_model)
        # PyTorch's boolean attn_mask means "True = may NOT attend": the opposite of the course's mask.
        x = self.encoder(x, mask=~causal_mask(length, device=tokens.device))
        return self.head(self.final_norm(x))
