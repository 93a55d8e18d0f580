env.seed_everything(0)
model = Seq2SeqTransformer(task.src_tokenizer.vocab_size, task.tgt_tokenizer.vocab_size, d_model=64, num_heads=4,
                           num_encoder_layers=2, num_decoder_layers=2, d_ff=128, dropout=0.0, max_len=64,
                           norm_first=True, pad_id=task.pad_id)
steps = 150
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
scheduler = warmup_cosine_schedule(optimizer, warmup=50, total=steps)
batches = make_batches((task.train_src, task.train_tgt_in, task.train_tgt_out), batch_size=32, seed=0)
start = time.process_time()
history = train(model, supervised_loss(ignore_index=task.pad_id), batches, optimizer, steps=steps, scheduler=scheduler)
train_cpu_seconds = time.process_time() - start
print(f"{count_parameters(model):,} parameters, {train_cpu_seconds:.1f} CPU seconds of training")
