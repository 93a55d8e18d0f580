def cross_attention_maps(model: Seq2SeqTransformer, src_string: str) -> torch.Tensor:
    """(layers, heads, T_out, T_in) cross-attention of the greedy translation of src_string."""
    # Greedy decoding written out, one token per step with the KV cache; every step adds one row per
    # layer and head: the cross-attention of the query that produces the next token.
    previous_mode = model.training
    model.eval()
    model.store_attention(True)
    rows = []  # one (layers, heads, T_in) tensor per generated token
    try:
        with torch.no_grad():
            src = task.src_tokenizer.encode_batch([src_string])
            memory, src_mask = model.encode(src)
            caches = model.new_caches()
            token = torch.tensor([[task.bos_id]])
            for _ in range(task.max_target_len):
                logits = model.decode(token, memory, src_mask, caches)  # (1, 1, V)
                rows.append(torch.stack([layer.last_cross_attention[0, :, -1] for layer in model.decoder.layers]))
                token = logits[:, -1].argmax(-1, keepdim=True)
                if token.item() == task.eos_id:
                    break
    finally:
        model.store_attention(False)
        model.train(previous_mode)
    return torch.stack(rows, dim=2)
