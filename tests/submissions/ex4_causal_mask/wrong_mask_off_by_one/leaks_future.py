def leaks_future(model: nn.Module, vocab_size: int, seq_len: int, num_trials: int = 3, seed: int = 0) -> bool:
    """True if some output at position <= i changes when the tokens after i change (train or eval mode)."""
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    try:
        for training in (True, False):
            model.train(training)
            for _ in range(num_trials):
                tokens = torch.randint(0, vocab_size, (2, seq_len), generator=generator)  # (B, T)
                reference = outputs_with_fixed_dropout(model, tokens, seed)
                for i in range(seq_len - 1):
                    # Adding 1..vocab_size-1 modulo vocab_size changes every later token for sure.
                    shift = torch.randint(1, vocab_size, (2, seq_len - i - 1), generator=generator)
                    changed = tokens.clone()
                    changed[:, i + 1:] = (tokens[:, i + 1:] + shift) % vocab_size
                    outputs = outputs_with_fixed_dropout(model, changed, seed)
                    if not torch.allclose(outputs[:, : i + 1], reference[:, : i + 1], atol=1e-5):
                        return True
        return False
    finally:
        model.train(was_training)
