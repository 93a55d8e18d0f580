class PreNormBlock(nn.Module):
    """LayerNorm -> nn.MultiheadAttention -> residual, LayerNorm -> MLP (GELU) -> residual."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.norm_attention = nn.LayerNorm(d_model)
        self.attention = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.norm_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model),
                                 nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm_attention(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm_mlp(x))


class ViT(nn.Module):
    """Patches -> [CLS] + positions -> pre-norm encoder -> LayerNorm -> head on [CLS]."""

    def __init__(self, img_size: int = 8, patch_size: int = 2, in_channels: int = 1, num_classes: int = 10,
                 d_model: int = 64, num_heads: int = 4, num_layers: int = 2, d_ff: int = 128, dropout: float = 0.0):
        super().__init__()
        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, d_model))
        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, self.patch_embed.num_patches + 1, d_model))
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.Sequential(*[PreNormBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, num_classes) logits."""
        tokens = self.patch_embed(images)
        cls = self.cls_token.expand(len(tokens), 1, tokens.shape[-1])
        x = self.dropout(torch.cat((cls, tokens), dim=1) + self.pos_embedding)
        return self.head(self.norm(self.encoder(x))[:, 0])


def vit_parameter_count(img_size: int, patch_size: int, in_channels: int, num_classes: int, d_model: int,
                        num_layers: int, d_ff: int) -> int:
    """Number of parameters of ViT(...) with these sizes, from a formula."""
    tokens = (img_size // patch_size) ** 2 + 1                  # patches and [CLS]
    embedding = (in_channels * patch_size * patch_size + 1) * d_model + d_model + tokens * d_model
    per_block = (4 * d_model + 4) * d_model + 2 * d_ff * d_model + d_ff + d_model + 4 * d_model
    classifier = 2 * d_model + (d_model + 1) * num_classes
    return embedding + num_layers * per_block + classifier
