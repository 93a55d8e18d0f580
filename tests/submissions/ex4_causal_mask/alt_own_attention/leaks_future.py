def leaks_future(model: nn.Module, vocab_size: int, seq_len: int, num_trials: int = 3, seed: int = 0) -> bool:
    """True if some output at position <= i changes when the tokens after i change (train or eval mode)."""
    original_mode = model.training
    rng = torch.Generator().manual_seed(seed)
    leaked = False
    for mode in (False, True):
        model.train(mode)
        for trial in range(num_trials):
            base = torch.randint(vocab_size, (3, seq_len), generator=rng)
            reference = outputs_with_fixed_dropout(model, base, seed + trial)
            for i in range(seq_len - 1):
                perturbed = base.clone()
                # a random permutation of the ids: every later token is replaced by a different one
                offset = int(torch.randint(1, vocab_size, (1,), generator=rng))
                perturbed[:, i + 1:] = (perturbed[:, i + 1:] + offset) % vocab_size
                outputs = outputs_with_fixed_dropout(model, perturbed, seed + trial)
                difference = (outputs[:, : i + 1] - reference[:, : i + 1]).abs().max().item()
                leaked = leaked or difference > 1e-5
    model.train(original_mode)
    return leaked
