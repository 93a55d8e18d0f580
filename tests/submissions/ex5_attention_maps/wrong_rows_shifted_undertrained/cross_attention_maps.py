def cross_attention_maps(model: Seq2SeqTransformer, src_string: str) -> torch.Tensor:
    """(layers, heads, T_out, T_in) cross-attention of the greedy translation of src_string."""
    src = task.src_tokenizer.encode_batch([src_string])  # (1, T_in)
    generated = greedy_decode(model, src, task.bos_id, task.eos_id, task.max_target_len)  # (1, T_out)
    decoder_input = torch.cat([torch.full((1, 1), task.bos_id), generated], dim=1)  # every generated token fed back
    was_training = model.training
    model.eval()
    model.store_attention(True)
    try:
        with torch.no_grad():
            memory, src_mask = model.encode(src)
            model.decode(decoder_input, memory, src_mask)
        maps = [layer.last_cross_attention[0] for layer in model.decoder.layers]  # each (H, T_out, T_in)
    finally:
        model.store_attention(False)
        model.train(was_training)
    return torch.stack(maps)
