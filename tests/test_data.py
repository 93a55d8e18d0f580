"""Tests for course_utils.data: the date task, the small language, MLM masking, digits, toy tasks."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import math
import pickle
import random
import tarfile
import urllib.error

import numpy as np
import pytest
import torch

from course_utils import data
from course_utils.data import BOS_ID, EOS_ID, MASK_ID, NUM_SPECIAL, PAD_ID, UNK_ID, dates, grammar, images


@pytest.fixture(scope="module")
def date_task():
    return data.make_date_dataset(n_train=3000, n_test=400, seed=3)


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def test_special_ids_are_fixed():
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID) == (0, 1, 2, 3, 4), "the special ids are part of the course's API"
    tok = data.CharTokenizer("ab")
    assert tok.itos[:NUM_SPECIAL] == list(data.SPECIAL_TOKENS)
    assert tok.encode("ba") == [NUM_SPECIAL + 1, NUM_SPECIAL], "ordinary symbols must start right after the specials"


def test_char_tokenizer_round_trip_on_every_date_string(date_task):
    tok = date_task.src_tokenizer
    for source, _ in date_task.train_pairs + date_task.test_pairs:
        ids = tok.encode(source, add_bos=True, add_eos=True)
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID
        assert UNK_ID not in ids, f"{source!r} has a character outside the source alphabet"
        assert tok.decode(ids) == source, f"round trip failed for {source!r}"


def test_tokenizer_unknown_symbols_and_decoding_rules():
    tok = data.CharTokenizer("abc")
    assert tok.encode("a?c") == [5, UNK_ID, 7], "an unknown character must map to <unk>"
    assert tok.decode([BOS_ID, 5, 6, EOS_ID, 7]) == "ab", "decode stops at <eos> and drops <bos>"
    assert tok.decode([5, EOS_ID, 7], stop_at_eos=False) == "ac"
    assert tok.decode([5, PAD_ID, 6], skip_special=False) == "a<pad>b"
    assert tok.decode(tok.encode("a?c")) == "a<unk>c", "an unknown symbol must stay visible after decoding"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([99])
    with pytest.raises(ValueError, match="reserved special token"):
        data.WordTokenizer(["hello", "<pad>"])


def test_encode_batch_pads_on_the_right_with_zero():
    tok = data.WordTokenizer(["the", "cat", "sleeps"])
    batch = tok.encode_batch(["the cat sleeps", "the cat"], add_bos=True, add_eos=True)
    assert batch.dtype == torch.long and batch.shape == (2, 5)
    assert batch[1].tolist() == [BOS_ID, 5, 6, EOS_ID, PAD_ID], "shorter rows are right-padded with <pad>=0"
    assert tok.decode_batch(batch) == ["the cat sleeps", "the cat"]
    with pytest.raises(ValueError, match="shorter than the longest"):
        tok.encode_batch(["the cat sleeps"], length=2)


def test_trim_padding_and_lengths():
    tokens = torch.tensor([[7, 8, 0, 0, 0], [7, 8, 9, 0, 0]])
    assert data.trim_padding(tokens).tolist() == [[7, 8, 0], [7, 8, 9]]
    assert data.sequence_lengths(tokens).tolist() == [2, 3]


# --------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "day, expected",
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (30, "30th"),
        (31, "31st"),
    ],
)
def test_ordinals(day, expected):
    assert dates._ordinal(day) == expected


def test_formats_on_a_known_date():
    date = dt.date(2021, 3, 3)  # a Wednesday
    assert data.format_date(date, "d month yyyy") == "3 March 2021"
    assert data.format_date(date, "mon d, yy") == "Mar 3, 21"
    assert data.format_date(date, "dd/mm/yyyy") == "03/03/2021"
    assert data.format_date(date, "the dth of month yyyy", "lower") == "the 3rd of march 2021"
    assert data.format_date(date, "yyyy-m-d") == "2021-3-3"
    assert data.format_date(date, "weekday, d month yyyy", "upper") == "WEDNESDAY, 3 MARCH 2021"
    # Numeric formats are day first: 4 March, not 3 April.
    assert data.format_date(dt.date(2021, 3, 4), "dd.mm.yyyy") == "04.03.2021"
    with pytest.raises(ValueError, match="unknown date format"):
        data.format_date(date, "mm/dd/yyyy")


def test_date_dataset_is_deterministic_under_its_seed():
    a = data.make_date_dataset(300, 50, seed=11)
    b = data.make_date_dataset(300, 50, seed=11)
    c = data.make_date_dataset(300, 50, seed=12)
    assert a.train_pairs == b.train_pairs and a.test_pairs == b.test_pairs, "same seed must give the same data"
    assert torch.equal(a.train_src, b.train_src) and torch.equal(a.test_tgt_out, b.test_tgt_out)
    assert a.train_pairs != c.train_pairs, "a different seed should give different data"


def test_train_and_test_share_no_date(date_task):
    train_sources = {s for s, _ in date_task.train_pairs}
    test_sources = {s for s, _ in date_task.test_pairs}
    train_dates = {t for _, t in date_task.train_pairs}
    test_dates = {t for _, t in date_task.test_pairs}
    assert not train_sources & test_sources, "a test source string also occurs in training"
    assert not train_dates & test_dates, "a test calendar date also occurs in training"
    assert len(date_task.train_pairs) == 3000 and len(date_task.test_pairs) == 400


def test_targets_are_valid_iso_dates_that_match_their_source(date_task):
    pairs = date_task.train_pairs + date_task.test_pairs
    formats = date_task.train_formats + date_task.test_formats
    for (source, iso), fmt in zip(pairs, formats, strict=True):
        date = dt.date.fromisoformat(iso)  # raises on an invalid date such as 2021-02-30
        assert date.isoformat() == iso and len(iso) == 10, f"{iso!r} is not in YYYY-MM-DD form"
        assert 1950 <= date.year <= 2049
        written = {data.format_date(date, fmt, case) for case in ("as written", "lower", "upper")}
        assert source in written, f"source {source!r} does not write the date {iso} in format {fmt!r}"


def test_date_tensors_are_aligned_for_teacher_forcing(date_task):
    task = date_task
    assert task.train_src.dtype == torch.long and task.train_src.shape[0] == 3000
    assert (task.train_tgt_in[:, 0] == BOS_ID).all(), "the decoder input starts with <bos>"
    assert (task.train_tgt_out[:, -1] == EOS_ID).all(), "the decoder target ends with <eos>"
    assert torch.equal(task.train_tgt_in[:, 1:], task.train_tgt_out[:, :-1]), "tgt_out must be tgt_in shifted left"
    assert task.max_target_len == 11
    assert task.decode_predictions(task.test_tgt_out) == [iso for _, iso in task.test_pairs]
    assert task.src_tokenizer.decode_batch(task.test_src) == [s for s, _ in task.test_pairs]
    assert task.exact_match([iso for _, iso in task.test_pairs]) == 1.0


def test_all_formats_and_cases_occur(date_task):
    assert set(date_task.train_formats) == set(data.DATE_FORMATS), "every format should appear in training"
    sources = [s for s, _ in date_task.train_pairs]
    assert any(s.isupper() for s in sources), "some sources should be upper case"
    assert any(s.islower() for s in sources), "some sources should be lower case"
    assert any(s not in (s.lower(), s.upper()) for s in sources), "some sources should be in mixed case"


def test_held_out_formats_only_in_test():
    held = ("the dth of month yyyy", "d/m/yy")
    task = data.make_date_dataset(500, 100, seed=0, held_out_formats=held)
    assert not set(task.train_formats) & set(held), "a held-out format leaked into training"
    assert set(task.test_formats) <= set(held), "the test set should use only the held-out formats"
    with pytest.raises(ValueError, match="unknown held-out formats"):
        data.make_date_dataset(10, 10, held_out_formats=("yyyy/dd/mm",))


def test_date_dataset_rejects_impossible_requests():
    with pytest.raises(ValueError, match="distinct dates"):
        data.make_date_dataset(400, 10, years=(2000, 2000))
    with pytest.raises(ValueError, match="two-digit years"):
        data.make_date_dataset(10, 10, years=(1900, 2049))


def test_exact_match():
    assert data.exact_match(["2021-03-03", "2021-03-04"], ["2021-03-03", "2021-04-03"]) == 0.5
    with pytest.raises(ValueError, match="2 predictions but 1 targets"):
        data.exact_match(["a", "b"], ["a"])


# --------------------------------------------------------------------------------------------
# The small language
# --------------------------------------------------------------------------------------------


def test_generated_sentences_are_grammatical():
    rng = random.Random(0)
    sentences = [data.generate_sentence(rng) for _ in range(500)]
    assert all(data.is_grammatical(s) for s in sentences), "the recogniser rejects a sentence the grammar made"
    assert any(" that " in s for s in sentences), "relative clauses should occur"


@pytest.mark.parametrize(
    "sentence",
    [
        "the dog that the cats chase sleep .",  # main verb must agree with "dog", not "cats"
        "the dogs sleeps .",  # plain agreement
        "a dogs sleep .",  # determiner-noun agreement
        "the dog sleeps",  # missing full stop
        "the dog that chase the cat runs .",  # subject relative: "chase" must agree with "dog"
        "sleeps the dog .",  # word order
    ],
)
def test_recogniser_rejects_ungrammatical_sentences(sentence):
    assert not data.is_grammatical(sentence), f"{sentence!r} should be rejected"


@pytest.mark.parametrize(
    "sentence",
    [
        "the dog that the cats chase sleeps .",
        "some old dogs that chase a cat run in the park .",
        "every girl that the boys that the teacher helps like smiles today .",
    ],
)
def test_recogniser_accepts_grammatical_sentences(sentence):
    assert data.is_grammatical(sentence), f"{sentence!r} should be accepted"


def test_lm_corpus_layout_and_split():
    corpus = data.make_lm_corpus(n_train=300, n_test=50, seed=1)
    assert not set(corpus.train_sentences) & set(corpus.test_sentences), "test sentences must be unseen"
    tokens = corpus.train_tokens
    assert (tokens[:, 0] == BOS_ID).all()
    lengths = data.sequence_lengths(tokens)
    assert (tokens[torch.arange(len(tokens)), lengths - 1] == EOS_ID).all(), "each row ends with <eos> before padding"
    assert corpus.tokenizer.decode_batch(tokens) == corpus.train_sentences
    again = data.make_lm_corpus(n_train=300, n_test=50, seed=1)
    assert again.train_sentences == corpus.train_sentences, "the corpus must be deterministic under its seed"


def test_causal_lm_pairs_shift_and_ignore_padding():
    tokens = torch.tensor([[BOS_ID, 7, 8, EOS_ID, PAD_ID]])
    inputs, targets = data.causal_lm_pairs(tokens)
    assert inputs.tolist() == [[BOS_ID, 7, 8, EOS_ID]]
    assert targets.tolist() == [[7, 8, EOS_ID, -100]], "targets are the next tokens, padding ignored"


# --------------------------------------------------------------------------------------------
# MLM masking
# --------------------------------------------------------------------------------------------


def _binomial_ok(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(count / n - p) <= sigmas * math.sqrt(p * (1 - p) / n)


def test_mask_tokens_statistics_follow_bert():
    tokenizer = data.WordTokenizer(data.LM_WORDS)
    vocab = tokenizer.vocab_size
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(NUM_SPECIAL, vocab, (1000, 64), generator=generator)
    tokens[:, 0] = BOS_ID
    tokens[:, 50] = EOS_ID
    tokens[:, 51:] = PAD_ID
    tokens[::7, 10] = UNK_ID
    inputs, labels = data.mask_tokens(tokens, tokenizer, prob=0.15, rng=torch.Generator().manual_seed(1))

    special = tokens < NUM_SPECIAL
    chosen = labels != -100
    assert not (chosen & special).any(), "a special token or padding was chosen for prediction"
    assert torch.equal(inputs[special], tokens[special]), "special tokens must stay unchanged in the input"
    assert torch.equal(labels[chosen], tokens[chosen]), "labels hold the original ids of chosen tokens"
    assert torch.equal(inputs[~chosen], tokens[~chosen]), "tokens not chosen must not change"

    eligible = int((~special).sum())
    n_chosen = int(chosen.sum())
    assert _binomial_ok(n_chosen, eligible, 0.15), f"{n_chosen / eligible:.4f} of tokens chosen, expected 0.15"
    masked = int((inputs[chosen] == MASK_ID).sum())
    # A random replacement can draw the original token; that case looks like "keep".
    p_same = 1 / (vocab - NUM_SPECIAL)
    replaced = int(((inputs[chosen] != MASK_ID) & (inputs[chosen] != tokens[chosen])).sum())
    kept = int((inputs[chosen] == tokens[chosen]).sum())
    assert _binomial_ok(masked, n_chosen, 0.8), f"{masked / n_chosen:.3f} replaced by <mask>, expected 0.8"
    assert _binomial_ok(replaced, n_chosen, 0.1 * (1 - p_same)), f"{replaced / n_chosen:.3f} random, expected ~0.1"
    assert _binomial_ok(kept, n_chosen, 0.1 + 0.1 * p_same), f"{kept / n_chosen:.3f} kept, expected ~0.1"
    random_ids = inputs[chosen & (inputs != MASK_ID)]
    assert (random_ids >= NUM_SPECIAL).all(), "random replacements must be ordinary tokens"


def test_mask_tokens_is_reproducible_with_a_generator():
    tokenizer = data.WordTokenizer(data.LM_WORDS)
    tokens = data.make_lm_corpus(100, 10, seed=0).train_tokens
    a = data.mask_tokens(tokens, tokenizer, rng=torch.Generator().manual_seed(5))
    b = data.mask_tokens(tokens, tokenizer, rng=torch.Generator().manual_seed(5))
    c = data.mask_tokens(tokens, tokenizer, rng=torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), "same generator seed, same masking"
    assert not torch.equal(a[1], c[1]), "another seed should mask other positions"
    with pytest.raises(ValueError, match="prob must be in"):
        data.mask_tokens(tokens, tokenizer, prob=1.5)


def test_mask_tokens_replacement_rates_are_parameters():
    tokenizer = data.WordTokenizer(data.LM_WORDS)
    tokens = torch.randint(NUM_SPECIAL, tokenizer.vocab_size, (400, 64), generator=torch.Generator().manual_seed(2))
    inputs, labels = data.mask_tokens(
        tokens,
        tokenizer,
        prob=1.0,
        rng=torch.Generator().manual_seed(3),
        mask_replace_prob=0.5,
        random_replace_prob=0.0,
    )
    n = labels.numel()
    assert _binomial_ok(int((inputs == MASK_ID).sum()), n, 0.5), "half of the chosen tokens should become <mask>"
    assert torch.equal(inputs[inputs != MASK_ID], tokens[inputs != MASK_ID]), "no random replacement at rate 0"
    default = data.mask_tokens(tokens, tokenizer, rng=torch.Generator().manual_seed(4))
    explicit = data.mask_tokens(
        tokens, tokenizer, rng=torch.Generator().manual_seed(4), mask_replace_prob=0.8, random_replace_prob=0.1
    )
    assert all(torch.equal(a, b) for a, b in zip(default, explicit, strict=True)), "the defaults are BERT's 80/10/10"
    with pytest.raises(ValueError, match="add up to at most 1"):
        data.mask_tokens(tokens, tokenizer, mask_replace_prob=0.8, random_replace_prob=0.3)


def test_agreement_probes_separate_right_and_wrong_verbs_by_the_grammar():
    tokenizer = data.WordTokenizer(data.LM_WORDS)
    probes = data.agreement_probes(tokenizer)
    kinds = [p.kind for p in probes]
    assert (kinds.count("no clause"), kinds.count("object relative"), kinds.count("subject relative")) == (20, 360, 360)
    for kind in ("object relative", "subject relative"):
        attractors = [p.attractor for p in probes if p.kind == kind]
        assert attractors.count("same number") == attractors.count("other number") == 180, "both numbers, equally"
    for probe in probes:
        assert probe.prefix.startswith(f"the {probe.subject}") and probe.right and len(probe.right) == len(probe.wrong)
        assert not set(probe.right) & set(probe.wrong)
        for right, wrong in zip(probe.right, probe.wrong, strict=True):
            assert data.is_grammatical(f"{probe.prefix} {tokenizer.itos[right]} .")
            assert not data.is_grammatical(f"{probe.prefix} {tokenizer.itos[wrong]} .")
    attracted = next(p for p in probes if p.prefix == "the dog that chases the cats")
    assert tokenizer.itos[attracted.right[0]] == "sleeps", "a subject relative's verb agrees with the head noun"
    assert attracted.attractor == "other number"
    # No shortcut through the last word: over the clause probes, its number tells nothing about the subject's.
    clause = [p for p in probes if p.kind != "no clause"]
    last_plural = [p.prefix.split()[-1] in {n[1] for n in grammar._NOUNS} | {"chase"} for p in clause]
    subject_plural = [p.subject in {n[1] for n in grammar._NOUNS} for p in clause]
    agree = sum(a == b for a, b in zip(last_plural, subject_plural, strict=True))
    assert agree == len(clause) // 2, "the last word's number should match the subject's in exactly half of them"


# --------------------------------------------------------------------------------------------
# Digits and CIFAR-10
# --------------------------------------------------------------------------------------------


def test_digits_are_read_completely():
    pixels, labels = images._read_digits()
    assert pixels.shape == (1797, 8, 8) and labels.shape == (1797,)
    # The class sizes of scikit-learn's digits, as documented for sklearn.datasets.load_digits.
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert pixels.min() == 0 and pixels.max() == 16 and (pixels == pixels.round()).all(), "pixels are integers 0..16"


def test_digits_split_is_stratified_and_deterministic():
    split = data.load_digits_tensors(seed=0, test_fraction=0.25)
    assert split.x_train.shape[1:] == (1, 8, 8) and split.x_train.dtype == torch.float32
    assert split.y_train.dtype == torch.long
    assert len(split.x_train) + len(split.x_test) == 1797, "with train_fraction=1 every image is used once"
    assert 0.0 <= split.x_train.min() and split.x_train.max() <= 1.0, "pixels must be scaled to [0, 1]"
    assert split.x_train.max() == 1.0
    test_counts = torch.bincount(split.y_test, minlength=10).float()
    all_counts = test_counts + torch.bincount(split.y_train, minlength=10).float()
    share = test_counts / all_counts
    assert ((share - 0.25).abs() < 0.02).all(), f"each class should be 25% test, got {share.tolist()}"
    again = data.load_digits_tensors(seed=0, test_fraction=0.25)
    assert torch.equal(again.x_test, split.x_test), "the split must be deterministic under its seed"
    other = data.load_digits_tensors(seed=1, test_fraction=0.25)
    assert not torch.equal(other.y_test, split.y_test), "another seed should give another split"


def test_digits_train_fraction_subsamples_train_only_and_nests():
    full = data.load_digits_tensors(seed=0, test_fraction=0.2)
    half = data.load_digits_tensors(seed=0, test_fraction=0.2, train_fraction=0.5)
    tenth = data.load_digits_tensors(seed=0, test_fraction=0.2, train_fraction=0.1)
    assert torch.equal(half.x_test, full.x_test), "train_fraction must not change the test set"
    assert abs(len(half.x_train) - len(full.x_train) / 2) <= 10
    assert set(torch.bincount(tenth.y_train, minlength=10).tolist()) <= set(range(12, 17)), "still stratified"
    as_rows = lambda x: {tuple(r) for r in x.flatten(1).tolist()}
    assert as_rows(tenth.x_train) <= as_rows(half.x_train) <= as_rows(full.x_train), "subsets must nest"
    with pytest.raises(ValueError, match="train_fraction"):
        data.load_digits_tensors(train_fraction=0.0)


def test_cifar10_missing_file_gives_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="download=True"):
        data.load_cifar10(tmp_path, download=False)


def test_cifar10_corrupt_file_fails_the_checksum(tmp_path):
    (tmp_path / data.CIFAR10_FILE).write_bytes(b"not the real archive")
    with pytest.raises(RuntimeError, match="MD5"):
        data.load_cifar10(tmp_path)


def _fake_cifar_archive(path, images_per_batch=2):
    """A tiny archive with CIFAR-10's layout: pickled dicts of uint8 rows (3*32*32) and labels."""
    with tarfile.open(path, "w:gz") as archive:
        for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
            rows = np.full((images_per_batch, 3 * 32 * 32), 51 * (i % 6), dtype=np.uint8)
            payload = pickle.dumps({b"data": rows, b"labels": [i % 10] * images_per_batch})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))


def test_cifar10_download_reads_the_archive_offline(tmp_path, monkeypatch):
    """The download, checksum and parsing path, with the network replaced by a local file."""
    source = tmp_path / "served.tar.gz"
    _fake_cifar_archive(source)
    monkeypatch.setattr(images, "CIFAR10_MD5", hashlib.md5(source.read_bytes()).hexdigest())

    class Response(io.BytesIO):  # what urlopen returns: a readable body with headers
        headers = {"Content-Length": str(source.stat().st_size)}

    monkeypatch.setattr(images.urllib.request, "urlopen", lambda url, timeout: Response(source.read_bytes()))
    root = tmp_path / "data"
    x, y = data.load_cifar10(root, download=True)
    assert x.shape == (10, 3, 32, 32) and x.dtype == torch.float32, "5 training batches of 2 images"
    assert y.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert x.max() <= 1.0 and x[2].max() == pytest.approx(51 / 255), "pixels must be scaled to [0, 1]"
    x_test, y_test = data.load_cifar10(root, train=False)  # now on disk: no download needed
    assert x_test.shape == (2, 3, 32, 32) and y_test.tolist() == [5, 5]


def test_cifar10_offline_download_fails_clearly(tmp_path, monkeypatch):
    def unreachable(url, timeout):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(images.urllib.request, "urlopen", unreachable)
    with pytest.raises(RuntimeError, match="could not download CIFAR-10"):
        data.load_cifar10(tmp_path, download=True)
    assert list(tmp_path.iterdir()) == [], "a failed download must not leave a partial file behind"


# --------------------------------------------------------------------------------------------
# Toy sequence tasks
# --------------------------------------------------------------------------------------------


def test_copy_and_reverse_tasks():
    copy = data.copy_task(n=20, length=6, vocab=8, seed=0)
    rev = data.reverse_task(n=20, length=6, vocab=8, seed=0)
    assert copy.src.shape == (20, 6) and copy.tgt_in.shape == (20, 7) and copy.vocab_size == NUM_SPECIAL + 8
    assert torch.equal(copy.tgt_out[:, :-1], copy.src) and (copy.tgt_out[:, -1] == EOS_ID).all()
    assert torch.equal(rev.src, copy.src), "the same seed draws the same sources"
    assert torch.equal(rev.tgt_out[:, :-1], rev.src.flip(1)), "reverse_task must reverse the source"
    assert (rev.tgt_in[:, 0] == BOS_ID).all() and torch.equal(rev.tgt_in[:, 1:], rev.tgt_out[:, :-1])
    assert copy.src.min() >= NUM_SPECIAL and copy.src.max() < NUM_SPECIAL + 8
    with pytest.raises(ValueError, match="must be positive"):
        data.copy_task(n=0, length=3)


def test_occurs_in_finds_rows_of_the_reference():
    rows = torch.tensor([[5, 6, 7], [7, 6, 5], [5, 6, 7], [8, 8, 8]])
    reference = torch.tensor([[8, 8, 8], [5, 6, 7]])
    assert data.occurs_in(rows, reference).tolist() == [True, False, True, True]
    assert not data.occurs_in(rows, torch.empty(0, 3, dtype=torch.long)).any()
    with pytest.raises(ValueError, match="length 3 cannot occur among rows of length 2"):
        data.occurs_in(rows, torch.tensor([[5, 6]]))
    with pytest.raises(ValueError, match="2-D"):
        data.occurs_in(rows[0], reference)


def test_copy_task_exclude_keeps_test_sequences_out_of_training():
    # The chapter 01 split: 2,400 training and 500 test sequences of 4 symbols out of 10 (10,000 possible).
    train = data.copy_task(n=2400, length=4, vocab=10, seed=4)
    drawn_freely = data.copy_task(n=500, length=4, vocab=10, seed=1004)
    shared = data.occurs_in(drawn_freely.src, train.src).float().mean().item()
    assert 0.1 < shared < 0.35, f"about 1 - (1 - 1/10^4)^2400 = 21% should repeat without exclude, got {shared:.0%}"
    test = data.copy_task(n=500, length=4, vocab=10, seed=1004, exclude=train)
    assert not data.occurs_in(test.src, train.src).any(), "no test sequence may occur in training"
    assert test.src.shape == (500, 4) and torch.equal(test.tgt_out[:, :-1], test.src)
    kept = ~data.occurs_in(drawn_freely.src, train.src)
    assert torch.equal(test.src[kept], drawn_freely.src[kept]), "only the clashing rows are redrawn"
    again = data.copy_task(n=500, length=4, vocab=10, seed=1004, exclude=train.src)  # a tensor works too
    assert torch.equal(again.src, test.src), "exclude keeps the draw deterministic"
    reverse = data.reverse_task(n=500, length=4, vocab=10, seed=1004, exclude=train)
    assert not data.occurs_in(reverse.src, train.src).any()


def test_copy_task_exclude_rejects_impossible_or_mismatched_requests():
    everything = torch.tensor([[a, b] for a in (5, 6) for b in (5, 6)])  # all 4 sequences of 2 symbols
    with pytest.raises(ValueError, match="holds all 4 sequences"):
        data.copy_task(n=3, length=2, vocab=2, exclude=everything)
    one_left = data.copy_task(n=20, length=2, vocab=2, seed=0, exclude=everything[:3])
    assert (one_left.src == everything[3]).all(), "with one sequence left, every draw must be that one"
    with pytest.raises(ValueError, match="length 3, the task draws length 2"):
        data.copy_task(n=3, length=2, vocab=2, exclude=torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="SequenceTask or a \\(M, length\\) tensor"):
        data.copy_task(n=3, length=2, vocab=2, exclude=[[5, 6]])
