def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C * P * P), patches row by row, each flattened channel first."""
    if images.dim() != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    batch, channels, height, width = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not a multiple of patch_size={patch_size}")
    rows, cols = height // patch_size, width // patch_size
    patches = images.reshape(batch, channels, rows, patch_size, cols, patch_size)  # (B, C, r, P, c, P)
    patches = patches.permute(0, 2, 4, 3, 5, 1)                                    # (B, r, c, P, P, C)
    return patches.reshape(batch, rows * cols, channels * patch_size * patch_size)
