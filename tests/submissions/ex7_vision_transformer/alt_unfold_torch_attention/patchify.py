def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C * P * P), patches row by row, each flattened channel first."""
    if images.dim() != 4:
        raise ValueError(f"expected (B, C, H, W) images, got shape {tuple(images.shape)}")
    height, width = images.shape[-2:]
    if height % patch_size != 0 or width % patch_size != 0:
        raise ValueError(f"{height}x{width} images cannot be cut into {patch_size}x{patch_size} patches")
    # tensor.unfold along H then W: (B, C, rows, cols, P, P)
    tiles = images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)
    batch, channels, rows, cols = tiles.shape[:4]
    return tiles.permute(0, 2, 3, 1, 4, 5).reshape(batch, rows * cols, channels * patch_size * patch_size)
