class PatchEmbedding(nn.Module):
    """Images -> one embedding per patch, with a Conv2d of kernel = stride = patch size."""

    def __init__(self, img_size: int, patch_size: int, in_channels: int, embed_dim: int):
        super().__init__()
        if img_size % patch_size != 0:
            raise ValueError(f"patch_size={patch_size} does not divide img_size={img_size}")
        self.expected_shape = (in_channels, img_size, img_size)
        self.num_patches = (img_size // patch_size) * (img_size // patch_size)
        self.proj = nn.Conv2d(in_channels, embed_dim, patch_size, stride=patch_size)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, img_size, img_size) -> (B, N, embed_dim)."""
        if images.dim() != 4 or tuple(images.shape[1:]) != self.expected_shape:
            raise ValueError(f"PatchEmbedding expects (B, {self.expected_shape}) images, got {tuple(images.shape)}")
        features = self.proj(images)                                  # (B, D, h, w)
        return torch.flatten(features, start_dim=2).permute(0, 2, 1)  # (B, N, D)
