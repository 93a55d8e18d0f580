class ViT(nn.Module):
    """Patches -> [CLS] + positions -> pre-norm encoder -> LayerNorm -> head on the last token (should be [CLS])."""

    def __init__(
        self,
        img_size: int = 8,
        patch_size: int = 2,
        in_channels: int = 1,
        num_classes: int = 10,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_embedding = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, d_model))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embedding, std=0.02)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, activation="gelu", norm_first=True)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, num_classes) logits."""
        patches = self.patch_embed(images)  # (B, N, D)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)  # (B, 1, D)
        x = self.dropout(torch.cat([cls, patches], dim=1) + self.pos_embedding)  # (B, N + 1, D)
        for block in self.blocks:
            x = block(x)
        # The mistake: the head reads the last token (the bottom-right patch), not [CLS] at position 0.
        return self.head(self.norm(x)[:, -1])


def vit_parameter_count(
    img_size: int, patch_size: int, in_channels: int, num_classes: int, d_model: int, num_layers: int, d_ff: int
) -> int:
    """Number of parameters of ViT(...) with these sizes, from a formula."""
    num_patches = (img_size // patch_size) ** 2
    patch_embedding = in_channels * patch_size**2 * d_model + d_model
    cls_and_positions = d_model + (num_patches + 1) * d_model
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = d_model * d_ff + d_ff + d_ff * d_model + d_model
    layer_norms = 2 * 2 * d_model
    head = 2 * d_model + d_model * num_classes + num_classes  # final LayerNorm + classifier
    return patch_embedding + cls_and_positions + num_layers * (attention + feed_forward + layer_norms) + head
