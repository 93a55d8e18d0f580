"""Tests for course_utils.decoding: greedy, beam search and sampling, with and without a KV cache."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from course_utils import decoding
from course_utils.attention import KVCache
from course_utils.models import DecoderOnlyLM, Seq2SeqTransformer, TransformerLM

PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(scope="module")
def seq2seq():
    torch.manual_seed(0)
    # float64 so that "cached equals uncached" can be checked tightly; dropout is on to check that
    # decoding switches it off.
    model = Seq2SeqTransformer(13, 11, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                               d_ff=64, dropout=0.1, max_len=64, tie_output=False).double()
    with torch.no_grad():
        # An untrained model with tied embeddings repeats its input token forever; a random, untied
        # output layer gives sequences of different lengths, some ending in <eos>, as a trained one would.
        model.generator.weight.normal_(0.0, 0.5)
        model.generator.weight[PAD].zero_()
        model.generator.weight[BOS].zero_()
    return model


@pytest.fixture(scope="module")
def source():
    src = torch.randint(5, 13, (4, 9), generator=torch.Generator().manual_seed(1))
    src[1, 6:] = PAD  # rows of different length exercise the padding mask
    src[3, 3:] = PAD
    return src


def _strip(row: torch.Tensor) -> list[int]:
    """Ids up to and including the first <eos>."""
    ids = row.tolist()
    return ids[: ids.index(EOS) + 1] if EOS in ids else ids


# --------------------------------------------------------------------------------------------
# Greedy
# --------------------------------------------------------------------------------------------

def test_greedy_cached_equals_uncached(seq2seq, source):
    cached, cached_logits = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=12, return_logits=True)
    plain, plain_logits = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=12, use_cache=False,
                                                 return_logits=True)
    assert torch.equal(cached, plain), "the KV cache must not change the generated tokens"
    lengths = [len(_strip(row)) for row in cached]
    assert len(set(lengths)) > 1 and min(lengths) < cached.shape[1], "the test needs rows that end early"
    for b, n in enumerate(lengths):  # after <eos> a row is padding, and its logits mean nothing
        assert torch.allclose(cached_logits[b, :n], plain_logits[b, :n], atol=1e-10), "nor the logits"


def test_greedy_logits_match_teacher_forcing(seq2seq, source):
    tokens, logits = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=12, return_logits=True)
    tgt_in = torch.cat([torch.full((len(source), 1), BOS), tokens[:, :-1]], dim=1)
    seq2seq.eval()
    with torch.no_grad():
        forced = seq2seq(source, tgt_in)  # (B, T, V)
    for b in range(len(source)):
        n = len(_strip(tokens[b]))
        assert torch.allclose(logits[b, :n], forced[b, :n], atol=1e-10), \
            "step-by-step logits must equal one teacher-forced pass over the same prefix"
    assert (logits.argmax(-1)[tokens != PAD] == tokens[tokens != PAD]).all(), "greedy picks the argmax"


def test_greedy_layout_pads_after_eos_and_restores_training_mode(seq2seq, source):
    seq2seq.train()
    tokens = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=20)
    assert seq2seq.training, "decoding must restore the model's training mode"
    assert tokens.shape[0] == len(source) and tokens.shape[1] <= 20
    for row in tokens:
        ids = row.tolist()
        if EOS in ids:
            assert all(i == PAD for i in ids[ids.index(EOS) + 1:]), "after <eos> only padding may follow"
    again = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=20)
    assert torch.equal(tokens, again), "dropout must be off while decoding"


# --------------------------------------------------------------------------------------------
# Beam search
# --------------------------------------------------------------------------------------------

def test_beam_size_one_is_greedy(seq2seq, source):
    greedy = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=12)
    beam = decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=1, max_len=12, length_penalty=0.0)
    assert [_strip(r) for r in beam] == [_strip(r) for r in greedy], "a beam of one is greedy decoding"


def test_beam_cached_equals_uncached_and_scores_are_consistent(seq2seq, source):
    alpha = 0.6
    cached, cached_scores = decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=3, max_len=10,
                                                 length_penalty=alpha, return_scores=True)
    plain, plain_scores = decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=3, max_len=10,
                                               length_penalty=alpha, use_cache=False, return_scores=True)
    assert torch.equal(cached, plain), "reordered KV caches must give the same beams as recomputing"
    assert torch.allclose(cached_scores, plain_scores, atol=1e-9)
    log_p = decoding.sequence_log_prob(seq2seq, source, cached, BOS, EOS)
    lengths = [len(_strip(r)) for r in cached]
    expected = torch.tensor([lp / decoding.gnmt_length_penalty(n, alpha) for lp, n in zip(log_p.tolist(), lengths)])
    assert torch.allclose(cached_scores, expected.double(), atol=1e-9), \
        "the reported score must be log P(sequence) / length_penalty"


def test_beam_search_is_at_least_as_good_as_greedy_on_the_model_score(seq2seq, source):
    greedy = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=10)
    beam = decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=4, max_len=10, length_penalty=0.0)
    finished = lambda t: torch.tensor([EOS in r.tolist() for r in t])
    both = finished(greedy) & finished(beam)
    greedy_lp = decoding.sequence_log_prob(seq2seq, source, greedy, BOS, EOS)
    beam_lp = decoding.sequence_log_prob(seq2seq, source, beam, BOS, EOS)
    assert both.any(), "the test needs at least one example where both searches finish"
    assert (beam_lp[both] >= greedy_lp[both] - 1e-9).all(), "here a wider beam should not do worse than greedy"


class PrefixTableModel(nn.Module):
    """An encoder-decoder whose next-token distribution is a hand-written table of the prefix.

    Vocabulary: 0 <pad>, 1 <bos>, 2 <eos>, 3 "A", 4 "B". Greedy takes "A" (0.6) and then ends with
    probability 0.35: P = 0.21. Beam search also keeps "B" (0.4), which ends with 0.99: P = 0.396.
    The cache holds the token ids themselves (as keys) so that beam reordering is exercised.
    """
    pad_id = PAD
    TABLE = {(): {3: 0.6, 4: 0.4}, (3,): {EOS: 0.35, 3: 0.33, 4: 0.32}, (4,): {EOS: 0.99, 3: 0.005, 4: 0.005}}
    OTHERWISE = {EOS: 0.9, 3: 0.05, 4: 0.05}

    def encode(self, src):
        batch, length = src.shape
        return torch.zeros(batch, length, 1), torch.ones(batch, 1, 1, length, dtype=torch.bool)

    def new_caches(self):
        return [(KVCache(), KVCache(static=True))]

    def decode(self, tgt, memory, src_mask, caches=None):
        if caches is not None:
            stored, _ = caches[0][0].append(tgt[:, None, :, None].double(), tgt[:, None, :, None].double())
            prefix = stored[:, 0, :, 0].long()  # (B, past + T)
        else:
            prefix = tgt
        new = tgt.shape[1]
        logits = torch.full((tgt.shape[0], new, 5), math.log(1e-12))
        for b in range(tgt.shape[0]):
            for t in range(new):
                position = prefix.shape[1] - new + t
                history = tuple(prefix[b, 1: position + 1].tolist())
                for token, p in self.TABLE.get(history, self.OTHERWISE).items():
                    logits[b, t, token] = math.log(p)
        return logits

    def forward(self, src, tgt_in):
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_search_finds_the_more_probable_sequence_greedy_misses(use_cache):
    model = PrefixTableModel()
    src = torch.zeros(2, 3, dtype=torch.long)
    greedy = decoding.greedy_decode(model, src, BOS, EOS, max_len=5, use_cache=use_cache)
    beam = decoding.beam_search(model, src, BOS, EOS, beam_size=2, max_len=5, length_penalty=0.0, use_cache=use_cache)
    assert greedy[0].tolist() == [3, EOS], "greedy commits to the locally best first token"
    assert beam[0].tolist() == [4, EOS], "beam search keeps the runner-up and finds the better sequence"
    greedy_lp = decoding.sequence_log_prob(model, src, greedy, BOS, EOS)
    beam_lp = decoding.sequence_log_prob(model, src, beam, BOS, EOS)
    assert beam_lp[0].item() == pytest.approx(math.log(0.4 * 0.99), abs=1e-6)
    assert greedy_lp[0].item() == pytest.approx(math.log(0.6 * 0.35), abs=1e-6)
    assert (beam_lp > greedy_lp).all()


def test_gnmt_length_penalty():
    assert decoding.gnmt_length_penalty(7, 0.0) == 1.0
    assert decoding.gnmt_length_penalty(1, 1.0) == pytest.approx(1.0), "GNMT's penalty is 1 for one token"
    assert decoding.gnmt_length_penalty(13, 0.6) == pytest.approx(3.0 ** 0.6)


def test_decoder_arguments_are_checked(seq2seq, source):
    with pytest.raises(ValueError, match="max_len"):
        decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=0)
    with pytest.raises(ValueError, match="beam_size"):
        decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=0)
    with pytest.raises(ValueError, match="max_len"):
        decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=2, max_len=0)
    with pytest.raises(ValueError, match="positions"):
        decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=1000)
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        decoding.greedy_decode(seq2seq, source[0], BOS, EOS, max_len=5)


# --------------------------------------------------------------------------------------------
# Decoder-only generation
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["gpt", "rope"])
def language_model(request):
    torch.manual_seed(0)
    if request.param == "gpt":
        model = DecoderOnlyLM(vocab_size=17, d_model=32, num_heads=4, num_layers=2, max_len=24, dropout=0.1)
    else:
        model = TransformerLM(vocab_size=17, d_model=32, num_heads=4, num_layers=2, max_len=24, position="rope")
    return model.double()


@pytest.fixture(scope="module")
def prompt():
    return torch.randint(5, 17, (3, 4), generator=torch.Generator().manual_seed(2))


def test_generate_cached_equals_uncached(language_model, prompt):
    cached, cached_logits = decoding.generate(language_model, prompt, 10, greedy=True, return_logits=True)
    plain, plain_logits = decoding.generate(language_model, prompt, 10, greedy=True, use_cache=False,
                                            return_logits=True)
    assert torch.equal(cached, plain), "the KV cache must not change the generated tokens"
    assert torch.allclose(cached_logits, plain_logits, atol=1e-10), "nor the logits"
    assert torch.equal(cached[:, :4], prompt) and cached.shape == (3, 14)


def test_generate_logits_match_one_full_pass(language_model, prompt):
    tokens, logits = decoding.generate(language_model, prompt, 6, greedy=True, return_logits=True)
    language_model.eval()
    with torch.no_grad():
        full = language_model(tokens[:, :-1])  # (B, T-1, V)
    assert torch.allclose(logits, full[:, 3:], atol=1e-10), "step logits must equal a single causal pass"


def test_sampling_is_reproducible_with_a_seeded_generator(language_model, prompt):
    def sample(seed, **kwargs):
        return decoding.generate(language_model, prompt, 12, generator=torch.Generator().manual_seed(seed), **kwargs)

    assert torch.equal(sample(0), sample(0)), "the same generator seed must give the same sample"
    assert not torch.equal(sample(0), sample(1)), "another seed should give another sample"
    assert torch.equal(sample(3, use_cache=False), sample(3)), "sampling with or without cache must agree"


def test_top_k_one_is_greedy(language_model, prompt):
    greedy = decoding.generate(language_model, prompt, 8, greedy=True)
    top1 = decoding.generate(language_model, prompt, 8, top_k=1, temperature=2.0,
                             generator=torch.Generator().manual_seed(0))
    assert torch.equal(top1, greedy), "keeping only the best token is greedy decoding"


def test_one_dimensional_prompt_and_eos_handling(language_model, prompt):
    single = decoding.generate(language_model, prompt[0], 5, greedy=True)
    assert single.dim() == 1 and torch.equal(single, decoding.generate(language_model, prompt[:1], 5, greedy=True)[0])
    tokens = decoding.generate(language_model, prompt, 10, greedy=True)
    eos = int(tokens[0, 5])  # pretend the token generated second in row 0 ends a sequence
    stopped = decoding.generate(language_model, prompt, 10, greedy=True, eos_id=eos)
    row = stopped[0, 4:].tolist()
    assert all(t == eos for t in row[row.index(eos):]), "after <eos> a row only repeats <eos>"


def test_prompt_too_long_for_learned_positions():
    model = DecoderOnlyLM(17, d_model=16, num_heads=2, num_layers=1, max_len=8)
    prompt = torch.randint(5, 17, (2, 4))
    assert decoding.generate(model, prompt, 4, greedy=True).shape == (2, 8), "exactly max_len tokens fit"
    with pytest.raises(ValueError, match="max_len=8"):
        decoding.generate(model, prompt, 5)
    rotary = TransformerLM(17, d_model=16, num_heads=2, num_layers=1, max_len=8, position="rope")
    assert decoding.generate(rotary, prompt, 6, greedy=True).shape == (2, 10), \
        "rotary positions have no table, so no length limit applies"


def test_generate_arguments_are_checked(language_model, prompt):
    with pytest.raises(ValueError, match="max_new_tokens"):
        decoding.generate(language_model, prompt, 0)
    with pytest.raises(ValueError, match="temperature"):
        decoding.generate(language_model, prompt, 3, temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        decoding.generate(language_model, prompt, 3, top_p=0.0)
    with pytest.raises(ValueError, match="top_k"):
        decoding.generate(language_model, prompt, 3, top_k=0)


# --------------------------------------------------------------------------------------------
# Sampling filters and the sampled distribution
# --------------------------------------------------------------------------------------------

def test_filter_logits_top_k_and_nucleus():
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    kept = lambda filtered: torch.isfinite(filtered).nonzero().flatten().tolist()
    assert kept(decoding.filter_logits(logits, top_k=2)) == [0, 1]
    assert kept(decoding.filter_logits(logits, top_p=0.45)) == [0], "0.45 is reached by the first token alone"
    assert kept(decoding.filter_logits(logits, top_p=0.75)) == [0, 1]
    assert kept(decoding.filter_logits(logits, top_p=0.85)) == [0, 1, 2]
    assert kept(decoding.filter_logits(logits, top_p=0.01)) == [0], "the best token always survives"
    shuffled = logits[torch.tensor([2, 0, 3, 1])]
    assert kept(decoding.filter_logits(shuffled, top_p=0.75)) == [1, 3], "the nucleus follows probability, not index"


class FixedDistributionLM(nn.Module):
    """A decoder-only 'model' whose next token always has the same distribution."""

    def __init__(self, probs):
        super().__init__()
        self.register_buffer("logits", torch.tensor(probs, dtype=torch.float64).log())

    def new_caches(self):
        return [KVCache()]

    def forward(self, tokens, caches=None):
        return self.logits.expand(tokens.shape[0], tokens.shape[1], -1)


def test_samples_follow_temperature_and_top_p():
    probs = [0.5, 0.3, 0.15, 0.05]
    model = FixedDistributionLM(probs)
    n = 8000
    prompt = torch.zeros(n, 1, dtype=torch.long)

    def frequencies(**kwargs):
        out = decoding.generate(model, prompt, 1, generator=torch.Generator().manual_seed(0), **kwargs)
        return torch.bincount(out[:, 1], minlength=4).double() / n

    def close(observed, expected):
        expected = torch.tensor(expected, dtype=torch.float64)
        bound = 5 * (expected * (1 - expected) / n).sqrt() + 1e-12
        return bool(((observed - expected).abs() <= bound).all())

    assert close(frequencies(), probs), "temperature 1 must sample the model's distribution"
    sharpened = torch.tensor(probs) ** 2
    assert close(frequencies(temperature=0.5), (sharpened / sharpened.sum()).tolist()), \
        "temperature T samples from p^(1/T), renormalised"
    assert close(frequencies(top_p=0.75), [0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]), "top-p renormalises over the nucleus"
