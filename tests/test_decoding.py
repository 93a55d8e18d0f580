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
    model = Seq2SeqTransformer(
        13,
        11,
        d_model=32,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        d_ff=64,
        dropout=0.1,
        max_len=64,
        tie_output=False,
    ).double()
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
    plain, plain_logits = decoding.greedy_decode(
        seq2seq, source, BOS, EOS, max_len=12, use_cache=False, return_logits=True
    )
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
        assert torch.allclose(logits[b, :n], forced[b, :n], atol=1e-10), (
            "step-by-step logits must equal one teacher-forced pass over the same prefix"
        )
    assert (logits.argmax(-1)[tokens != PAD] == tokens[tokens != PAD]).all(), "greedy picks the argmax"


def test_greedy_layout_pads_after_eos_and_restores_training_mode(seq2seq, source):
    seq2seq.train()
    tokens = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=20)
    assert seq2seq.training, "decoding must restore the model's training mode"
    assert tokens.shape[0] == len(source) and tokens.shape[1] <= 20
    for row in tokens:
        ids = row.tolist()
        if EOS in ids:
            assert all(i == PAD for i in ids[ids.index(EOS) + 1 :]), "after <eos> only padding may follow"
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
    cached, cached_scores = decoding.beam_search(
        seq2seq, source, BOS, EOS, beam_size=3, max_len=10, length_penalty=alpha, return_scores=True
    )
    plain, plain_scores = decoding.beam_search(
        seq2seq, source, BOS, EOS, beam_size=3, max_len=10, length_penalty=alpha, use_cache=False, return_scores=True
    )
    assert torch.equal(cached, plain), "reordered KV caches must give the same beams as recomputing"
    assert torch.allclose(cached_scores, plain_scores, atol=1e-9)
    log_p = decoding.sequence_log_prob(seq2seq, source, cached, BOS, EOS)
    lengths = [len(_strip(r)) for r in cached]
    expected = torch.tensor(
        [lp / decoding.gnmt_length_penalty(n, alpha) for lp, n in zip(log_p.tolist(), lengths, strict=True)]
    )
    assert torch.allclose(cached_scores, expected.double(), atol=1e-9), (
        "the reported score must be log P(sequence) / length_penalty"
    )


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_sequence_score_is_what_beam_search_ranks_by(seq2seq, source, alpha):
    beam, scores = decoding.beam_search(
        seq2seq, source, BOS, EOS, beam_size=3, max_len=6, length_penalty=alpha, return_scores=True
    )
    recomputed = decoding.sequence_score(seq2seq, source, beam, BOS, EOS, length_penalty=alpha)
    assert torch.allclose(recomputed, scores, atol=1e-9), "sequence_score must reproduce beam search's own scores"
    greedy = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=6)
    unfinished = [EOS not in row.tolist() for row in greedy]
    assert any(unfinished), "the test needs a row cut off at max_len (it then counts every position)"
    log_p = decoding.sequence_log_prob(seq2seq, source, greedy, BOS, EOS)
    lengths = [len(_strip(r)) for r in greedy]
    expected = torch.tensor(
        [lp / decoding.gnmt_length_penalty(n, alpha) for lp, n in zip(log_p.tolist(), lengths, strict=True)],
        dtype=torch.float64,
    )
    assert torch.allclose(decoding.sequence_score(seq2seq, source, greedy, BOS, EOS, alpha), expected, atol=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_is_at_least_as_good_as_greedy_on_the_model_score(seq2seq, source, alpha):
    # Every row, by the objective beam search maximises; rows cut off at max_len included (comparing
    # only rows where both searches ended with <eos> hid the junk-ending bug).
    greedy = decoding.greedy_decode(seq2seq, source, BOS, EOS, max_len=10)
    beam = decoding.beam_search(seq2seq, source, BOS, EOS, beam_size=4, max_len=10, length_penalty=alpha)
    greedy_score = decoding.sequence_score(seq2seq, source, greedy, BOS, EOS, alpha)
    beam_score = decoding.sequence_score(seq2seq, source, beam, BOS, EOS, alpha)
    assert (beam_score >= greedy_score - 1e-9).all(), "here a wider beam should not do worse than greedy"
    assert (beam_score > greedy_score + 0.1).any(), "and on this untrained model it should find better sequences"


class TableModel(nn.Module):
    """An encoder-decoder whose next-token log-probabilities are a function of (source, prefix).

    Subclasses define :meth:`log_probs` ``(source ids, prefix ids) -> (V,) log-probabilities``. The
    source rides along in ``memory`` (so that beam search's repeated rows keep it), and the cache
    holds the token ids themselves as keys, so that beam reordering is exercised as with a real model.
    """

    pad_id = PAD
    vocab_size = 5
    max_positions = None  # a table has no position encoding, so no length limit

    def log_probs(self, source: tuple, history: tuple) -> torch.Tensor:
        raise NotImplementedError

    def encode(self, src):
        batch, length = src.shape
        return src.double()[..., None], torch.ones(batch, 1, 1, length, dtype=torch.bool)  # (B, S, 1)

    def new_caches(self):
        return [(KVCache(), KVCache(static=True))]

    def decode(self, tgt, memory, src_mask, caches=None):
        if caches is not None:
            stored, _ = caches[0][0].append(tgt[:, None, :, None].double(), tgt[:, None, :, None].double())
            prefix = stored[:, 0, :, 0].long()  # (B, past + T)
        else:
            prefix = tgt
        new = tgt.shape[1]
        logits = torch.empty(tgt.shape[0], new, self.vocab_size, dtype=torch.float64)
        for b in range(tgt.shape[0]):
            source = tuple(memory[b, :, 0].long().tolist())
            for t in range(new):
                position = prefix.shape[1] - new + t
                logits[b, t] = self.log_probs(source, tuple(prefix[b, 1 : position + 1].tolist()))
        return logits

    def forward(self, src, tgt_in):
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)


class PrefixTableModel(TableModel):
    """Vocabulary: 0 <pad>, 1 <bos>, 2 <eos>, 3 "A", 4 "B". Greedy takes "A" (0.6) and then ends with
    probability 0.35: P = 0.21. Beam search also keeps "B" (0.4), which ends with 0.99: P = 0.396.
    Both answers have two tokens, so the length penalty cannot change the ranking."""

    TABLE = {(): {3: 0.6, 4: 0.4}, (3,): {EOS: 0.35, 3: 0.33, 4: 0.32}, (4,): {EOS: 0.99, 3: 0.005, 4: 0.005}}
    OTHERWISE = {EOS: 0.9, 3: 0.05, 4: 0.05}

    def log_probs(self, source, history):
        row = torch.full((self.vocab_size,), math.log(1e-12), dtype=torch.float64)
        for token, p in self.TABLE.get(history, self.OTHERWISE).items():
            row[token] = math.log(p)
        return row


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_finds_the_more_probable_sequence_greedy_misses(use_cache, alpha):
    model = PrefixTableModel()
    src = torch.zeros(2, 3, dtype=torch.long)
    greedy = decoding.greedy_decode(model, src, BOS, EOS, max_len=5, use_cache=use_cache)
    beam = decoding.beam_search(model, src, BOS, EOS, beam_size=2, max_len=5, length_penalty=alpha, use_cache=use_cache)
    assert greedy[0].tolist() == [3, EOS], "greedy commits to the locally best first token"
    assert beam[0].tolist() == [4, EOS], "beam search keeps the runner-up and finds the better sequence"
    greedy_lp = decoding.sequence_log_prob(model, src, greedy, BOS, EOS)
    beam_lp = decoding.sequence_log_prob(model, src, beam, BOS, EOS)
    assert beam_lp[0].item() == pytest.approx(math.log(0.4 * 0.99), abs=1e-6)
    assert greedy_lp[0].item() == pytest.approx(math.log(0.6 * 0.35), abs=1e-6)
    assert (beam_lp > greedy_lp).all()


class LabelSmoothedCopyModel(TableModel):
    """What a model trained with label smoothing looks like: the right next token gets
    ``1 - eps + eps / V`` and *every* other token, ``<eos>`` included, about ``eps / V``.

    The right answer is ``ANSWER`` then ``<eos>`` (nine tokens). After a wrong token the model knows
    nothing (uniform). ``eos_factor`` scales the probability of an untimely ``<eos>`` against the other
    wrong tokens: 1 is an exact tie, a little above 1 the near-tie a trained model shows.
    """

    vocab_size = 13
    ANSWER = (5, 6, 7, 8, 9, 10, 11, 12)

    def __init__(self, eps: float = 0.1, eos_factor: float = 1.0):
        super().__init__()
        self.eps, self.eos_factor = eps, eos_factor

    def log_probs(self, source, history):
        v = self.vocab_size
        if history != self.ANSWER[: len(history)]:
            return torch.full((v,), -math.log(v), dtype=torch.float64)  # off the answer: no idea
        right = self.ANSWER[len(history)] if len(history) < len(self.ANSWER) else EOS
        wrong = torch.full((v,), self.eps / v, dtype=torch.float64)
        if right != EOS:
            wrong[EOS] *= self.eos_factor
        wrong[right] = 0.0
        probs = wrong / wrong.sum() * (self.eps - self.eps / v)  # the wrong tokens share eps - eps / V
        probs[right] = 1 - self.eps + self.eps / v
        return probs.log()


@pytest.mark.parametrize("eos_factor", [1.0, 1.05])
@pytest.mark.parametrize(
    "beam_size,alpha,use_cache", [(2, 0.6, True), (4, 0.6, True), (4, 0.6, False), (4, 0.0, True), (6, 1.0, True)]
)
def test_label_smoothed_eos_ties_do_not_end_the_search(eos_factor, beam_size, alpha, use_cache):
    # The old rule stopped once beam_size hypotheses had ended; with label smoothing an untimely <eos>
    # ranks among the first few candidates at every step, so four junk endings ("5 <eos>", "5 6 <eos>",
    # ...) filled the quota after four steps and the right, still unfinished answer was thrown away.
    model = LabelSmoothedCopyModel(eos_factor=eos_factor)
    src = torch.zeros(3, 2, dtype=torch.long)
    answer = list(LabelSmoothedCopyModel.ANSWER) + [EOS]
    greedy = decoding.greedy_decode(model, src, BOS, EOS, max_len=12, use_cache=use_cache)
    beam, scores = decoding.beam_search(
        model,
        src,
        BOS,
        EOS,
        beam_size=beam_size,
        max_len=12,
        length_penalty=alpha,
        use_cache=use_cache,
        return_scores=True,
    )
    assert [_strip(r) for r in greedy] == [answer] * 3, "greedy follows the confident path to the end"
    assert [_strip(r) for r in beam] == [answer] * 3, (
        f"beam search must return the full answer, not a junk ending: got {[_strip(r) for r in beam]}"
    )
    p_right = 1 - 0.1 + 0.1 / model.vocab_size
    expected = len(answer) * math.log(p_right) / decoding.gnmt_length_penalty(len(answer), alpha)
    assert torch.allclose(scores, torch.full((3,), expected, dtype=torch.float64), atol=1e-9)


def test_the_first_k_shortcut_loses_the_answer_on_a_label_smoothed_model():
    # What the default rule protects against, kept as an option so that chapter 07 can show it.
    model = LabelSmoothedCopyModel(eos_factor=1.05)
    src = torch.zeros(2, 2, dtype=torch.long)
    shortcut, shortcut_scores = decoding.beam_search(
        model, src, BOS, EOS, beam_size=4, max_len=12, stopping="first_k", return_scores=True
    )
    exact, exact_scores = decoding.beam_search(model, src, BOS, EOS, beam_size=4, max_len=12, return_scores=True)
    answer = list(LabelSmoothedCopyModel.ANSWER) + [EOS]
    assert [_strip(r) for r in exact] == [answer] * 2
    truncated = _strip(shortcut[0])
    assert len(truncated) < len(answer) and truncated[-1] == EOS, "four junk endings fill the quota first"
    assert (shortcut_scores < exact_scores - 1.0).all(), "and the shortcut's answer scores far worse"
    with pytest.raises(ValueError, match="stopping"):
        decoding.beam_search(model, src, BOS, EOS, stopping="never")


class RandomTableModel(TableModel):
    """Random but fixed next-token distributions over "A", "B", "C" and ``<eos>`` (``<pad>`` and
    ``<bos>`` impossible), a different table for every source and prefix: a model with no structure
    for a search to exploit, where every stopping shortcut shows."""

    vocab_size = 6

    def __init__(self, seed: int, eos_bias: float = 0.0):
        super().__init__()
        self.seed, self.eos_bias = seed, eos_bias

    def log_probs(self, source, history):
        key = hash((self.seed, source, history)) % (2**31)  # ints and tuples of ints hash the same everywhere
        logits = 1.5 * torch.randn(self.vocab_size, generator=torch.Generator().manual_seed(key), dtype=torch.float64)
        logits[PAD] = logits[BOS] = -math.inf
        logits[EOS] += self.eos_bias
        return logits.log_softmax(-1)


def reference_beam_search(model, src_row, beam_size, max_len, alpha):
    """Beam search as :func:`decoding.beam_search` documents it, one example at a time, without any
    early stop: every step runs to ``max_len``, and every finished hypothesis is kept."""
    source = tuple(src_row.tolist())
    live, finished = [((), 0.0)], []
    for step in range(max_len):
        candidates = [
            (score + lp.item(), prefix, token)
            for prefix, score in live
            for token, lp in enumerate(model.log_probs(source, prefix))
            if lp > -math.inf
        ]
        candidates.sort(key=lambda c: -c[0])
        live = []
        for rank, (score, prefix, token) in enumerate(candidates[: 2 * beam_size]):
            if len(live) == beam_size:
                break
            if token == EOS:
                if rank < beam_size:
                    finished.append((score / decoding.gnmt_length_penalty(step + 1, alpha), prefix + (EOS,)))
            else:
                live.append((prefix + (token,), score))
        if not live:
            break
    finished += [(score / decoding.gnmt_length_penalty(len(prefix), alpha), prefix) for prefix, score in live]
    return max(finished, key=lambda h: h[0])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("beam_size,alpha,eos_bias", [(2, 0.6, 0.0), (3, 0.6, 1.0), (3, 0.0, 0.0), (4, 1.0, 1.0)])
def test_early_stopping_never_changes_the_answer(seed, beam_size, alpha, eos_bias):
    model = RandomTableModel(seed, eos_bias)
    src = torch.arange(8).view(4, 2) + 10 * seed  # four sources, four tables
    max_len = 7
    beam, scores = decoding.beam_search(
        model, src, BOS, EOS, beam_size=beam_size, max_len=max_len, length_penalty=alpha, return_scores=True
    )
    for b in range(len(src)):
        best_score, best_ids = reference_beam_search(model, src[b], beam_size, max_len, alpha)
        assert _strip(beam[b]) == list(best_ids), (
            f"example {b}: stopping early changed the answer ({_strip(beam[b])} instead of {list(best_ids)})"
        )
        assert scores[b].item() == pytest.approx(best_score, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_a_wide_enough_beam_finds_the_best_sequence_of_all(alpha):
    # With 3 content tokens and max_len 4 there are at most 3^3 = 27 live prefixes, and a beam of 108
    # ranks all 108 candidates of the last step: nothing is pruned, so beam search must return the
    # best-scoring sequence of all 121 possible ones (ended by <eos> or cut off at max_len).
    max_len = 4
    model = RandomTableModel(seed=7, eos_bias=-0.5)
    src = torch.arange(6).view(3, 2)
    beam, scores = decoding.beam_search(
        model, src, BOS, EOS, beam_size=108, max_len=max_len, length_penalty=alpha, return_scores=True
    )
    for b in range(len(src)):
        source = tuple(src[b].tolist())
        best = (-math.inf, None)
        frontier = [((), 0.0)]
        for length in range(1, max_len + 1):
            grown = []
            for prefix, log_p in frontier:
                row = model.log_probs(source, prefix)
                ended = (log_p + row[EOS].item()) / decoding.gnmt_length_penalty(length, alpha)
                best = max(best, (ended, prefix + (EOS,)))
                grown += [(prefix + (t,), log_p + row[t].item()) for t in (3, 4, 5)]
            frontier = grown
        for prefix, log_p in frontier:  # cut off at max_len without an <eos>
            best = max(best, (log_p / decoding.gnmt_length_penalty(max_len, alpha), prefix))
        assert _strip(beam[b]) == list(best[1]), f"example {b}: beam search missed the best sequence"
        assert scores[b].item() == pytest.approx(best[0], abs=1e-9)


def test_best_possible_score_bounds_every_extension():
    # A live hypothesis can only lose log-probability and gain length penalty: the bound is its
    # log P over the penalty at max_len, and no extension of it may score above that.
    model = RandomTableModel(seed=3)
    source, max_len, alpha = (1, 2), 6, 0.6
    prefix, log_p = (3,), model.log_probs(source, ())[3].item()
    bound = decoding.best_possible_score(log_p, max_len, alpha)
    frontier = [(prefix, log_p)]
    for length in range(2, max_len + 1):
        grown = []
        for p, s in frontier:
            row = model.log_probs(source, p)
            assert (s + row[EOS].item()) / decoding.gnmt_length_penalty(length, alpha) <= bound + 1e-12
            grown += [(p + (t,), s + row[t].item()) for t in (3, 4, 5)]
        frontier = grown
    assert all(s / decoding.gnmt_length_penalty(max_len, alpha) <= bound + 1e-12 for _, s in frontier)
    assert decoding.best_possible_score(-2.0, 10, 0.0) == -2.0, "without a penalty the bound is log P itself"


def test_gnmt_length_penalty():
    assert decoding.gnmt_length_penalty(7, 0.0) == 1.0
    assert decoding.gnmt_length_penalty(1, 1.0) == pytest.approx(1.0), "GNMT's penalty is 1 for one token"
    assert decoding.gnmt_length_penalty(13, 0.6) == pytest.approx(3.0**0.6)


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


def test_models_are_checked_against_the_protocols(seq2seq, source, language_model, prompt):
    # The protocols are structural: any object with the listed methods and attributes qualifies.
    assert isinstance(seq2seq, decoding.EncoderDecoderModel) and isinstance(language_model, decoding.LanguageModel)
    assert isinstance(PrefixTableModel(), decoding.EncoderDecoderModel), "a test double with the methods qualifies"
    with pytest.raises(TypeError, match="LM does not follow the EncoderDecoderModel protocol.*encode"):
        decoding.greedy_decode(language_model, source, BOS, EOS, max_len=5)
    with pytest.raises(TypeError, match="Linear does not follow the LanguageModel protocol.*new_caches"):
        decoding.generate(nn.Linear(4, 4), prompt, 3)


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
    plain, plain_logits = decoding.generate(
        language_model, prompt, 10, greedy=True, use_cache=False, return_logits=True
    )
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
    top1 = decoding.generate(
        language_model, prompt, 8, top_k=1, temperature=2.0, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(top1, greedy), "keeping only the best token is greedy decoding"


def test_one_dimensional_prompt_and_eos_handling(language_model, prompt):
    single = decoding.generate(language_model, prompt[0], 5, greedy=True)
    assert single.dim() == 1 and torch.equal(single, decoding.generate(language_model, prompt[:1], 5, greedy=True)[0])
    tokens = decoding.generate(language_model, prompt, 10, greedy=True)
    eos = int(tokens[0, 5])  # pretend the token generated second in row 0 ends a sequence
    stopped = decoding.generate(language_model, prompt, 10, greedy=True, eos_id=eos)
    row = stopped[0, 4:].tolist()
    assert all(t == eos for t in row[row.index(eos) :]), "after <eos> a row only repeats <eos>"


def test_generate_reports_every_step(language_model, prompt):
    steps = []
    decoding.generate(language_model, prompt, 5, greedy=True, on_step=steps.append)
    assert steps == [1, 2, 3, 4, 5], f"on_step should see the count of new tokens after every step, saw {steps}"


def test_prompt_too_long_for_learned_positions():
    model = DecoderOnlyLM(17, d_model=16, num_heads=2, num_layers=1, max_len=8)
    prompt = torch.randint(5, 17, (2, 4))
    assert decoding.generate(model, prompt, 4, greedy=True).shape == (2, 8), "exactly max_len tokens fit"
    with pytest.raises(ValueError, match="max_len=8"):
        decoding.generate(model, prompt, 5)
    rotary = TransformerLM(17, d_model=16, num_heads=2, num_layers=1, max_len=8, position="rope")
    assert decoding.generate(rotary, prompt, 6, greedy=True).shape == (2, 10), (
        "rotary positions have no table, so no length limit applies"
    )


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

    max_positions = None  # no position encoding, no length limit

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
    assert close(frequencies(temperature=0.5), (sharpened / sharpened.sum()).tolist()), (
        "temperature T samples from p^(1/T), renormalised"
    )
    assert close(frequencies(top_p=0.75), [0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]), "top-p renormalises over the nucleus"


def test_mask_predict_fills_every_mask_one_position_per_step():
    from course_utils.decoding import mask_predict
    from course_utils.models import TransformerLM

    torch.manual_seed(0)
    bert = TransformerLM(
        12, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=12, dropout=0.0, causal=False, pad_id=0
    )
    calls = []
    bert.register_forward_hook(lambda module, args, out: calls.append(1))
    out = mask_predict(bert, [3, 5], bos_id=1, eos_id=2, mask_id=4, pad_id=0, first_word_id=5)
    assert out.shape == (2, 7) and len(calls) == 5, "one forward pass per word of the longest row"
    assert out[0].tolist()[0] == 1 and out[0, 4] == 2 and (out[0, 5:] == 0).all(), "<bos>, 3 words, <eos>, padding"
    assert (out[0, 1:4] >= 5).all() and (out[1, 1:6] >= 5).all(), "only ordinary words are written"
    assert bert.training, "the model's mode is restored"
    with pytest.raises(ValueError, match="positive sentence lengths"):
        mask_predict(bert, [0], bos_id=1, eos_id=2, mask_id=4, pad_id=0, first_word_id=5)
