class Transformer(nn.Module):
    """Encoder-decoder Transformer (post-norm): token ids in, next-token logits out."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 64, num_heads: int = 4,
                 num_encoder_layers: int = 2, num_decoder_layers: int = 2, d_ff: int = 128,
                 dropout: float = 0.1, max_len: int = 256, pad_id: int = 0):
        super().__init__()
        self.d_model = d_model
        self.pad_id = pad_id
        self.src_embedding = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, d_model)
        self.positions = SinusoidalPositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_decoder_layers)
        )
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def embed_source(self, src: torch.Tensor) -> torch.Tensor:
        """(B, S) ids -> (B, S, d_model): scaled embeddings plus sinusoidal positions (paper, section 3.4)."""
        return self.positions(self.src_embedding(src) * math.sqrt(self.d_model))

    def embed_target(self, tgt_in: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, d_model)."""
        return self.positions(self.tgt_embedding(tgt_in) * math.sqrt(self.d_model))

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """(B, S) source ids -> memory (B, S, d_model)."""
        src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, S)
        x = self.embed_source(src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """(B, T) decoder input ids, memory (B, S, d_model), source ids (B, S) -> logits (B, T, V)."""
        length = tgt_in.shape[1]
        tgt_mask = combine_masks(causal_mask(length, device=tgt_in.device),
                                 padding_mask(tgt_in, self.pad_id))  # (B, 1, T, T)
        memory_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, S)
        y = self.embed_target(tgt_in)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, memory_mask)
        return self.generator(y)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(tgt_in, self.encode(src), src)
