"""Shared code for *Transformers from the Ground Up*.

Each module holds one idea and reads top to bottom like a chapter:

- :mod:`course_utils.attention`  scaled dot-product attention, masks, multi-head attention, KV cache
- :mod:`course_utils.positional` sinusoidal, learned and rotary position encodings
- :mod:`course_utils.layers`     feed-forward blocks, encoder and decoder layers (pre- and post-norm)
- :mod:`course_utils.models`     encoder-decoder, decoder-only, encoder-only and vision models; presets
- :mod:`course_utils.data`       offline tasks: dates, a small corpus, digits
- :mod:`course_utils.training`   one training loop, learning-rate schedules, label smoothing
- :mod:`course_utils.decoding`   greedy, beam search, sampling, cached generation
- :mod:`course_utils.plotting`   attention heatmaps and other figures
- :mod:`course_utils.bench`      timing and memory measurement (CPU and CUDA)
- :mod:`course_utils.flash`      FlashAttention from scratch (tiled, online softmax) in PyTorch
- :mod:`course_utils.flash_triton` the same algorithm as a Triton GPU kernel
- :mod:`course_utils.env`        device, seeding, threads
"""

__version__ = "0.1.0"
