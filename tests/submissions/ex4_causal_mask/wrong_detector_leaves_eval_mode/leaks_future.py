def leaks_future(model: nn.Module, vocab_size: int, seq_len: int, num_trials: int = 3, seed: int = 0) -> bool:
    """True if some output at position <= i changes when the tokens after i change (train or eval mode)."""
    generator = torch.Generator().manual_seed(seed)
    # Both modes are checked, but the model is never given back in the mode it came in: it ends in eval mode.
    for training in (True, False):
        model.train(training)
        for _ in range(num_trials):
            tokens = torch.randint(0, vocab_size, (2, seq_len), generator=generator)  # (B, T)
            reference = outputs_with_fixed_dropout(model, tokens, seed)
            for i in range(seq_len - 1):
                shift = torch.randint(1, vocab_size, (2, seq_len - i - 1), generator=generator)
                changed = tokens.clone()
                changed[:, i + 1:] = (tokens[:, i + 1:] + shift) % vocab_size
                outputs = outputs_with_fixed_dropout(model, changed, seed)
                if not torch.allclose(outputs[:, : i + 1], reference[:, : i + 1], atol=1e-5):
                    return True
    return False
