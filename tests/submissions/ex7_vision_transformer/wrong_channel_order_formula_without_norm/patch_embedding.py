class PatchEmbedding(nn.Module):
    """Images -> one embedding per patch, with a Conv2d of kernel = stride = patch size."""

    def __init__(self, img_size: int, patch_size: int, in_channels: int, embed_dim: int):
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"img_size={img_size} is not a multiple of patch_size={patch_size}")
        self.img_size, self.in_channels = img_size, in_channels
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, img_size, img_size) -> (B, N, embed_dim)."""
        expected = (self.in_channels, self.img_size, self.img_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"expected images of shape (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        return self.proj(images).flatten(2).transpose(1, 2)  # (B, D, h, w) -> (B, N, D)
