"""Offline tasks and tokenizers: everything is generated or ships with an installed package.

Nothing here touches the network except :func:`load_cifar10` with ``download=True``, and every
generator is deterministic under its ``seed``.

- **Dates** (the course's translation task): human-written dates in many formats -> ISO 8601.
  :func:`make_date_dataset` returns a :class:`DateTask` with tokenizers and tensors ready for
  ``Seq2SeqTransformer(src, tgt_in)``, to be compared with ``tgt_out``.
- **A small language** for language modelling: sentences from a probabilistic grammar with
  subject-verb agreement across relative clauses (:func:`make_lm_corpus`), a checker that says
  whether a sentence belongs to the language (:func:`is_grammatical`), next-token pairs
  (:func:`causal_lm_pairs`) and BERT-style masking (:func:`mask_tokens`).
- **Digits**: scikit-learn's 8x8 handwritten digits as tensors (:func:`load_digits_tensors`);
  CIFAR-10 as an optional download on the learner's machine (:func:`load_cifar10`).
- **Toy sequence tasks** for the RNN bottleneck experiment: :func:`copy_task`, :func:`reverse_task`.

Special token ids (every tokenizer and toy task in the course)
---------------------------------------------------------------
=====  =========  ==============================================================
id     token      role
=====  =========  ==============================================================
0      ``<pad>``  padding; masked out of attention, ignored by the loss
1      ``<bos>``  beginning of sequence (first decoder input; ``[CLS]`` for BERT)
2      ``<eos>``  end of sequence (``[SEP]`` for BERT)
3      ``<unk>``  a symbol outside the vocabulary
4      ``<mask>`` the ``[MASK]`` of masked language modelling
=====  =========  ==============================================================

Ordinary symbols start at id 5 (:data:`NUM_SPECIAL`).

The date task: recommended setting
-----------------------------------
:data:`RECOMMENDED_DATE_SETTING` trains a small post-norm ``Seq2SeqTransformer`` (d_model 64, 4 heads,
2 + 2 layers, d_ff 128, no dropout, 173k parameters) for 1,000 steps of 32 examples, with AdamW
(lr 3e-3, betas (0.9, 0.98), weight decay 0.01), 100 warm-up steps then cosine decay to 5%, gradient
clipping at 1.0, label smoothing 0.1, and batches bucketed by source length with their padding
trimmed (:func:`sequence_lengths`, :func:`trim_padding`)::

    task = make_date_dataset(20_000, 1_000, seed=0)
    batches = make_batches((task.train_src, task.train_tgt_in, task.train_tgt_out), 32,
                           bucket_by=sequence_lengths(task.train_src))
    criterion = LabelSmoothingLoss(0.1, ignore_index=PAD_ID)

    def loss_fn(model, batch):
        src, tgt_in, tgt_out = batch
        return criterion(model(trim_padding(src), tgt_in), tgt_out)

Held-out exact match (greedy decoding of all 1,000 test dates), measured on a shared 2-core machine
with one PyTorch thread. The machine was heavily loaded (load average 7-13), so wall times were 5-9x
the process's CPU time; the CPU time is what the same run takes on one idle core:

==========================================  =======  ==========  ============
run                                         steps    CPU time    exact match
==========================================  =======  ==========  ============
recommended, seed 0, no smoothing           250      13 s        20%
                                            500      24 s        68%
                                            750      34 s        86%
                                            1000     44 s        97.9%
recommended, seed 1, label smoothing 0.1    750      30 s        92.0%
                                            1000     41 s        97.7%
800-step schedule, seed 0, smoothing 0.1    400      14 s        60.7%
                                            800      27 s        96.3%
800-step schedule, seed 0, no smoothing     800      (n/a)       93.2%
==========================================  =======  ==========  ============

(Rows before the last step of a schedule are snapshots taken before the learning
rate has decayed; a schedule that ends there does better.) So 1,000 steps reach >= 95% in well under
two minutes and an 800-step schedule reaches >= 90% in well under 90 s, both with a margin of about
3x. Label smoothing 0.1 helps (96.3% against 93.2% after 800 steps). What did not help: pre-norm
(95.2% at 1,000 steps), d_model 128 with 8 heads (84% at 600 steps, 2.5x the time per step), a peak
lr of 5e-3 (93.7% at 800 steps), batches of 64 (95.8% at 800 steps, 1.5x the time per step). The
remaining errors are mostly swapped year digits in the longest formats ("Sunday the 2nd of June
1957" -> 1975-06-02).

Threads: use one PyTorch thread for models this small on a shared machine. With two threads on two
busy cores a training step took 11x longer than with one (each thread waits for the other to be
scheduled); two idle cores could not be measured here.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.util
import os
import pickle
import random
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np
import torch

__all__ = [
    "PAD_ID", "BOS_ID", "EOS_ID", "UNK_ID", "MASK_ID", "NUM_SPECIAL", "SPECIAL_TOKENS",
    "Tokenizer", "CharTokenizer", "WordTokenizer", "trim_padding", "sequence_lengths",
    "DATE_FORMATS", "format_date", "random_date_string", "DateTask", "make_date_dataset", "exact_match",
    "RECOMMENDED_DATE_SETTING",
    "generate_sentence", "is_grammatical", "LMCorpus", "make_lm_corpus", "causal_lm_pairs", "mask_tokens",
    "DigitsSplit", "load_digits_tensors", "load_cifar10",
    "SequenceTask", "copy_task", "reverse_task",
]

PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID = 0, 1, 2, 3, 4
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>", "<mask>")
NUM_SPECIAL = len(SPECIAL_TOKENS)


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------

class Tokenizer:
    """Shared machinery: a fixed list of symbols after the five special tokens.

    Subclasses say how a text splits into symbols (:meth:`split`) and how symbols join back (:meth:`join`).
    """

    pad_id, bos_id, eos_id, unk_id, mask_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID
    special_ids = tuple(range(NUM_SPECIAL))

    def __init__(self, symbols: Iterable[str]):
        unique: list[str] = []
        for symbol in symbols:
            if symbol in SPECIAL_TOKENS:
                raise ValueError(f"{symbol!r} is a reserved special token and cannot be a vocabulary symbol")
            if symbol not in unique:
                unique.append(symbol)
        if not unique:
            raise ValueError("a tokenizer needs at least one symbol besides the special tokens")
        self.itos: list[str] = list(SPECIAL_TOKENS) + unique
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}

    # Subclasses override these two.
    def split(self, text: str) -> list[str]:
        raise NotImplementedError

    def join(self, pieces: list[str]) -> str:
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Text -> list of ids; unknown symbols become ``<unk>`` (id 3)."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        ids = [self.stoi.get(piece, UNK_ID) for piece in self.split(text)]
        return ([BOS_ID] if add_bos else []) + ids + ([EOS_ID] if add_eos else [])

    def decode(self, ids: Iterable[int] | torch.Tensor, skip_special: bool = True, stop_at_eos: bool = True) -> str:
        """Ids -> text. By default stops at the first ``<eos>`` and drops ``<pad>``, ``<bos>``, ``<eos>``
        and ``<mask>``; ``<unk>`` is always written out, so that a lost symbol stays visible."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode expects one sequence (1-D ids), got shape {tuple(ids.shape)}; use decode_batch"
                )
            ids = ids.tolist()
        pieces = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary [0, {self.vocab_size})")
            if i == EOS_ID and stop_at_eos:
                break
            if i < NUM_SPECIAL and i != UNK_ID and skip_special:
                continue
            pieces.append(self.itos[i])
        return self.join(pieces)

    def encode_batch(self, texts: Sequence[str], add_bos: bool = False, add_eos: bool = False,
                     length: int | None = None) -> torch.Tensor:
        """Texts -> ``(B, T)`` int64 tensor, right-padded with ``<pad>`` (id 0) to the longest text
        (or to ``length``, which must fit every text)."""
        encoded = [self.encode(t, add_bos, add_eos) for t in texts]
        longest = max((len(e) for e in encoded), default=0)
        if length is None:
            length = longest
        elif length < longest:
            raise ValueError(f"length={length} is shorter than the longest encoded text ({longest} ids)")
        return torch.tensor([ids + [PAD_ID] * (length - len(ids)) for ids in encoded],
                            dtype=torch.long).reshape(len(encoded), length)

    def decode_batch(self, ids: torch.Tensor, skip_special: bool = True, stop_at_eos: bool = True) -> list[str]:
        """``(B, T)`` ids -> list of B texts."""
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            raise ValueError(f"decode_batch expects a (B, T) tensor of ids, got {getattr(ids, 'shape', type(ids))}")
        return [self.decode(row, skip_special, stop_at_eos) for row in ids]


class CharTokenizer(Tokenizer):
    """One id per character. ``CharTokenizer("abc").encode("cab") == [7, 5, 6]``.

    >>> tok = CharTokenizer("0123456789-")
    >>> tok.decode(tok.encode("2021-03-03", add_bos=True, add_eos=True))
    '2021-03-03'
    """

    def __init__(self, alphabet: Iterable[str]):
        symbols = list(alphabet)
        bad = [s for s in symbols if len(s) != 1]
        if bad:
            raise ValueError(f"CharTokenizer symbols must be single characters, got {bad[:5]}")
        super().__init__(symbols)

    def split(self, text: str) -> list[str]:
        return list(text)

    def join(self, pieces: list[str]) -> str:
        return "".join(pieces)


class WordTokenizer(Tokenizer):
    """One id per whitespace-separated word (the small language has no punctuation attached to words)."""

    def __init__(self, words: Iterable[str]):
        words = list(words)
        bad = [w for w in words if not w or any(c.isspace() for c in w)]
        if bad:
            raise ValueError(f"WordTokenizer symbols must be non-empty words without spaces, got {bad[:5]}")
        super().__init__(words)

    def split(self, text: str) -> list[str]:
        return text.split()

    def join(self, pieces: list[str]) -> str:
        return " ".join(pieces)


def trim_padding(tokens: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """Drop the trailing columns of a right-padded ``(B, T)`` batch that are padding in every row."""
    if tokens.dim() != 2:
        raise ValueError(f"trim_padding expects (B, T) ids, got shape {tuple(tokens.shape)}")
    used = (tokens != pad_id).any(dim=0)  # (T,): columns with at least one real token
    keep = int(used.nonzero().max()) + 1 if used.any() else 1  # never trim to an empty sequence
    return tokens[:, :keep]


def sequence_lengths(tokens: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """``(B, T)`` right-padded ids -> ``(B,)`` number of ids before the padding."""
    if tokens.dim() != 2:
        raise ValueError(f"sequence_lengths expects (B, T) ids, got shape {tuple(tokens.shape)}")
    return (tokens != pad_id).long().sum(1)


# --------------------------------------------------------------------------------------------
# Dates -> ISO 8601
# --------------------------------------------------------------------------------------------

# Day first wherever the format is numeric ("03/04/2021" is 3 April), the European convention: the
# task must be a function, so one convention has to win. Two-digit years are unambiguous because the
# years span at most a century: with the default 1950-2049, "49" is 2049 and "50" is 1950.
#
# Spelled out rather than taken from `calendar`, whose names follow the machine's locale.
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_MONTHS_SHORT = [m[:3] for m in _MONTHS]
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_WEEKDAYS_SHORT = [d[:3] for d in _WEEKDAYS]


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _fields(date: dt.date) -> dict[str, str]:
    return dict(
        d=str(date.day), dd=f"{date.day:02d}", dth=_ordinal(date.day),
        m=str(date.month), mm=f"{date.month:02d}",
        month=_MONTHS[date.month - 1], mon=_MONTHS_SHORT[date.month - 1],
        yyyy=f"{date.year:04d}", yy=f"{date.year % 100:02d}",
        weekday=_WEEKDAYS[date.weekday()], wkd=_WEEKDAYS_SHORT[date.weekday()],
    )


# name -> str.format template over the fields above.
DATE_FORMATS: dict[str, str] = {
    "d month yyyy": "{d} {month} {yyyy}",                       # 3 March 2021
    "dd month yyyy": "{dd} {month} {yyyy}",                     # 03 March 2021
    "month d, yyyy": "{month} {d}, {yyyy}",                     # March 3, 2021
    "mon d, yy": "{mon} {d}, {yy}",                             # Mar 3, 21
    "d mon yyyy": "{d} {mon} {yyyy}",                           # 3 Mar 2021
    "dd-mon-yyyy": "{dd}-{mon}-{yyyy}",                         # 03-Mar-2021
    "dd/mm/yyyy": "{dd}/{mm}/{yyyy}",                           # 03/03/2021
    "d/m/yy": "{d}/{m}/{yy}",                                   # 3/3/21
    "dd.mm.yyyy": "{dd}.{mm}.{yyyy}",                           # 03.03.2021
    "the dth of month yyyy": "the {dth} of {month} {yyyy}",     # the 3rd of March 2021
    "dth month yyyy": "{dth} {month} {yyyy}",                   # 3rd March 2021
    "month dth, yyyy": "{month} {dth}, {yyyy}",                 # March 3rd, 2021
    "yyyy-m-d": "{yyyy}-{m}-{d}",                               # 2021-3-3
    "yyyy-mm-dd": "{yyyy}-{mm}-{dd}",                           # 2021-03-03 (already ISO)
    "yyyymmdd": "{yyyy}{mm}{dd}",                               # 20210303
    "weekday, d month yyyy": "{weekday}, {d} {month} {yyyy}",   # Wednesday, 3 March 2021
    "wkd mon d yyyy": "{wkd} {mon} {d} {yyyy}",                 # Wed Mar 3 2021
    "weekday the dth of month yyyy": "{weekday} the {dth} of {month} {yyyy}",
}

# Title case as written above, all lower case, or all upper case.
_CASES = (("as written", 0.6), ("lower", 0.25), ("upper", 0.15))

DATE_SOURCE_ALPHABET = "".join(sorted(set(
    "abcdefghijklmnopqrstuvwxyz" "ABCDEFGHIJKLMNOPQRSTUVWXYZ" "0123456789" " ,/.-"
)))
DATE_TARGET_ALPHABET = "0123456789-"


def format_date(date: dt.date, fmt: str, case: str = "as written") -> str:
    """Write ``date`` in the format named ``fmt`` (a key of :data:`DATE_FORMATS`).

    >>> format_date(dt.date(2021, 3, 3), "the dth of month yyyy", case="lower")
    'the 3rd of march 2021'
    """
    if fmt not in DATE_FORMATS:
        raise ValueError(f"unknown date format {fmt!r}; choose from {list(DATE_FORMATS)}")
    text = DATE_FORMATS[fmt].format(**_fields(date))
    if case == "lower":
        return text.lower()
    if case == "upper":
        return text.upper()
    if case != "as written":
        raise ValueError(f"case must be 'as written', 'lower' or 'upper', got {case!r}")
    return text


def random_date_string(date: dt.date, rng: random.Random, formats: Sequence[str] | None = None) -> tuple[str, str]:
    """A random human-written form of ``date``: returns ``(text, format_name)``."""
    formats = list(DATE_FORMATS) if formats is None else list(formats)
    fmt = rng.choice(formats)
    case = rng.choices([c for c, _ in _CASES], weights=[w for _, w in _CASES])[0]
    return format_date(date, fmt, case), fmt


def exact_match(predicted: Sequence[str], targets: Sequence[str]) -> float:
    """Fraction of predictions equal to their target string (the whole date must be right)."""
    if len(predicted) != len(targets):
        raise ValueError(f"{len(predicted)} predictions but {len(targets)} targets")
    if not targets:
        raise ValueError("exact_match of an empty list is undefined")
    return sum(p == t for p, t in zip(predicted, targets)) / len(targets)


@dataclass
class DateTask:
    """The date-normalisation task, ready to train on.

    Tensors (int64):

    - ``train_src`` ``(N, S)``: source characters, right-padded with ``<pad>``; no BOS/EOS.
    - ``train_tgt_in`` ``(N, 11)``: ``<bos>`` + the 10 ISO characters (the decoder input).
    - ``train_tgt_out`` ``(N, 11)``: the 10 ISO characters + ``<eos>`` (what the decoder must predict).

    and the same for ``test_*``. ``*_pairs`` hold the strings ``(source, iso)`` and ``*_formats`` the
    format name of each example.
    """
    src_tokenizer: CharTokenizer
    tgt_tokenizer: CharTokenizer
    train_pairs: list[tuple[str, str]]
    test_pairs: list[tuple[str, str]]
    train_formats: list[str]
    test_formats: list[str]
    train_src: torch.Tensor
    train_tgt_in: torch.Tensor
    train_tgt_out: torch.Tensor
    test_src: torch.Tensor
    test_tgt_in: torch.Tensor
    test_tgt_out: torch.Tensor
    held_out_formats: tuple[str, ...] = ()
    seed: int = 0

    @property
    def bos_id(self) -> int:
        return BOS_ID

    @property
    def eos_id(self) -> int:
        return EOS_ID

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def max_target_len(self) -> int:
        """Tokens a decoder must generate: the 10 ISO characters and ``<eos>``."""
        return self.train_tgt_out.shape[1]

    def decode_predictions(self, ids: torch.Tensor) -> list[str]:
        """``(B, T)`` generated target ids -> ISO strings (stopping at ``<eos>``)."""
        return self.tgt_tokenizer.decode_batch(ids)

    def exact_match(self, predicted: Sequence[str], split: str = "test") -> float:
        """Exact-match accuracy of ``predicted`` ISO strings against the ``split`` targets."""
        pairs = {"train": self.train_pairs, "test": self.test_pairs}.get(split)
        if pairs is None:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if len(predicted) != len(pairs):
            raise ValueError(f"{len(predicted)} predictions for the {len(pairs)} examples of the {split} split")
        return exact_match(predicted, [iso for _, iso in pairs])


def make_date_dataset(n_train: int = 20000, n_test: int = 1000, seed: int = 0,
                      years: tuple[int, int] = (1950, 2049),
                      held_out_formats: Sequence[str] = ()) -> DateTask:
    """Generate the date task.

    Every example draws a calendar date, a format from :data:`DATE_FORMATS` and a letter case.
    The test set uses **calendar dates that never occur in training**, so no source string and no
    target string is shared between the splits. Formats named in ``held_out_formats`` never appear
    in training and are then the only formats of the test set (an out-of-distribution test: expect
    low accuracy there).

    Every example has a calendar date of its own, so ``n_train + n_test`` may be at most the number
    of days in ``years`` (36,525 for 1950-2049).

    >>> task = make_date_dataset(n_train=100, n_test=10, seed=0)
    >>> task.train_src.shape[0], task.train_tgt_in.shape, task.test_pairs[0][1][4]
    (100, torch.Size([100, 11]), '-')
    """
    first_year, last_year = years
    if not (1 <= first_year <= last_year <= 9999):
        raise ValueError(f"years must be (first, last) with 1 <= first <= last <= 9999, got {years}")
    if last_year - first_year >= 100:
        raise ValueError(f"two-digit years are ambiguous over more than a century, got years={years}")
    unknown = [f for f in held_out_formats if f not in DATE_FORMATS]
    if unknown:
        raise ValueError(f"unknown held-out formats {unknown}; choose from {list(DATE_FORMATS)}")
    if len(set(held_out_formats)) == len(DATE_FORMATS):
        raise ValueError("every format is held out, so none is left to train on")
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be positive, got {n_train} and {n_test}")
    start, end = dt.date(first_year, 1, 1), dt.date(last_year, 12, 31)
    all_dates = [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]
    if n_train + n_test > len(all_dates):
        raise ValueError(
            f"n_train + n_test = {n_train + n_test} exceeds the {len(all_dates)} distinct dates in years {years}"
        )
    train_formats = [f for f in DATE_FORMATS if f not in held_out_formats]
    test_formats = list(held_out_formats) if held_out_formats else train_formats

    rng = random.Random(seed)
    rng.shuffle(all_dates)
    test_dates, train_dates = all_dates[:n_test], all_dates[n_test: n_test + n_train]

    def build(dates, formats):
        pairs, names = [], []
        for date in dates:
            text, fmt = random_date_string(date, rng, formats)
            pairs.append((text, date.isoformat()))
            names.append(fmt)
        return pairs, names

    train_pairs, train_names = build(train_dates, train_formats)
    test_pairs, test_names = build(test_dates, test_formats)

    src_tok = CharTokenizer(DATE_SOURCE_ALPHABET)
    tgt_tok = CharTokenizer(DATE_TARGET_ALPHABET)
    longest = max(len(s) for s, _ in train_pairs + test_pairs)

    def tensors(pairs):
        src = src_tok.encode_batch([s for s, _ in pairs], length=longest)
        tgt_in = tgt_tok.encode_batch([t for _, t in pairs], add_bos=True)
        tgt_out = tgt_tok.encode_batch([t for _, t in pairs], add_eos=True)
        return src, tgt_in, tgt_out

    return DateTask(src_tok, tgt_tok, train_pairs, test_pairs, train_names, test_names,
                    *tensors(train_pairs), *tensors(test_pairs),
                    held_out_formats=tuple(held_out_formats), seed=seed)


# The setting measured in the module docstring: about 98% held-out exact match in about 45 s of CPU time.
RECOMMENDED_DATE_SETTING: dict = dict(
    n_train=20_000, n_test=1_000,
    model=dict(d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=128,
               dropout=0.0, max_len=64, norm_first=False),
    batch_size=32, steps=1_000, lr=3e-3, betas=(0.9, 0.98), weight_decay=0.01,
    warmup=100, min_lr_ratio=0.05, clip_grad_norm=1.0, label_smoothing=0.1, bucket_by_length=True,
    exercise_steps=800,  # 96% in about 27 s of CPU time
)


# --------------------------------------------------------------------------------------------
# A small language for language modelling
# --------------------------------------------------------------------------------------------

# (singular, plural) pairs: subject and verb must agree in number, also across a relative clause
# ("the dog that the cats chase sleeps"), which is the long-range structure a model has to learn.
_NOUNS = [("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("horse", "horses"), ("child", "children"),
          ("teacher", "teachers"), ("farmer", "farmers"), ("girl", "girls"), ("boy", "boys"),
          ("doctor", "doctors")]
_INTRANSITIVE = [("sleeps", "sleep"), ("runs", "run"), ("laughs", "laugh"), ("waits", "wait"),
                 ("sings", "sing"), ("smiles", "smile")]
_TRANSITIVE = [("sees", "see"), ("chases", "chase"), ("likes", "like"), ("follows", "follow"),
               ("feeds", "feed"), ("helps", "help")]
_DETERMINERS = (("the", "a", "every", "this"), ("the", "some", "many", "these"))
_ADJECTIVES = ("small", "old", "happy", "quiet", "clever", "tired")
_ADVERBS = ("quickly", "today", "again", "slowly", "loudly")
_PREPOSITIONS = ("in", "near", "behind")
_PLACES = ("garden", "house", "river", "park", "barn")
_END = "."

LM_WORDS: tuple[str, ...] = tuple(dict.fromkeys(
    [w for pair in _NOUNS + _INTRANSITIVE + _TRANSITIVE for w in pair]
    + list(_DETERMINERS[0]) + list(_DETERMINERS[1]) + list(_ADJECTIVES) + list(_ADVERBS)
    + list(_PREPOSITIONS) + list(_PLACES) + ["that", _END]
))

_SG, _PL = 0, 1


def _gen_np(rng: random.Random, number: int, depth: int, max_depth: int) -> list[str]:
    words = [rng.choice(_DETERMINERS[number])]
    if rng.random() < 0.3:
        words.append(rng.choice(_ADJECTIVES))
    words.append(rng.choice(_NOUNS)[number])
    if depth < max_depth and rng.random() < 0.3:
        words += _gen_rc(rng, number, depth + 1, max_depth)
    return words


def _gen_rc(rng: random.Random, number: int, depth: int, max_depth: int) -> list[str]:
    if rng.random() < 0.5:  # subject relative: "that chases the dog" (verb agrees with the head noun)
        return ["that"] + _gen_vp(rng, number, depth, max_depth, modifier=False)
    inner = rng.choice((_SG, _PL))  # object relative: "that the dogs chase" (verb agrees with "dogs")
    return ["that"] + _gen_np(rng, inner, depth, max_depth) + [rng.choice(_TRANSITIVE)[inner]]


def _gen_vp(rng: random.Random, number: int, depth: int, max_depth: int, modifier: bool = True) -> list[str]:
    if rng.random() < 0.5:
        words = [rng.choice(_INTRANSITIVE)[number]]
    else:
        words = [rng.choice(_TRANSITIVE)[number]] + _gen_np(rng, rng.choice((_SG, _PL)), depth, max_depth)
    if modifier:
        r = rng.random()
        if r < 0.25:
            words.append(rng.choice(_ADVERBS))
        elif r < 0.45:
            words += [rng.choice(_PREPOSITIONS), "the", rng.choice(_PLACES)]
    return words


def generate_sentence(rng: random.Random, max_depth: int = 2) -> str:
    """One sentence of the small language, e.g. ``'the old dogs that the cat sees sleep in the park .'``.

    Grammar (``n``, ``m`` = singular or plural; agreement is enforced)::

        S      -> NP[n] VP[n] "."
        NP[n]  -> Det[n] (Adj) N[n] (RC[n])          relative clauses nest up to max_depth
        RC[n]  -> "that" V[n] ...                    subject relative: "that chases the dog"
                | "that" NP[m] Vt[m]                 object relative:  "that the dogs chase"
        VP[n]  -> (Vi[n] | Vt[n] NP[m]) (Adv | P "the" Place)
    """
    number = rng.choice((_SG, _PL))
    return " ".join(_gen_np(rng, number, 0, max_depth) + _gen_vp(rng, number, 0, max_depth) + [_END])


def _word_sets():
    def by_number(pairs, number):
        return frozenset(p[number] for p in pairs)
    return dict(
        det=(frozenset(_DETERMINERS[0]), frozenset(_DETERMINERS[1])),
        noun=(by_number(_NOUNS, 0), by_number(_NOUNS, 1)),
        vi=(by_number(_INTRANSITIVE, 0), by_number(_INTRANSITIVE, 1)),
        vt=(by_number(_TRANSITIVE, 0), by_number(_TRANSITIVE, 1)),
    )


_WORDS_BY_ROLE = _word_sets()


def is_grammatical(sentence: str) -> bool:
    """Does ``sentence`` belong to the small language (any nesting depth)?

    A recogniser for the grammar in :func:`generate_sentence`: it checks word order, determiner-noun
    and subject-verb agreement. Use it to score what a language model generates.

    >>> is_grammatical("the dog that the cats chase sleeps .")
    True
    >>> is_grammatical("the dog that the cats chase sleep .")
    False
    """
    words = tuple(sentence.split())
    sets = _WORDS_BY_ROLE

    @functools.lru_cache(maxsize=None)
    def np_ends(i: int, number: int) -> frozenset[int]:
        if i >= len(words) or words[i] not in sets["det"][number]:
            return frozenset()
        j = i + 1
        if j < len(words) and words[j] in _ADJECTIVES:
            j += 1
        if j >= len(words) or words[j] not in sets["noun"][number]:
            return frozenset()
        ends = {j + 1}
        ends |= rc_ends(j + 1, number)
        return frozenset(ends)

    @functools.lru_cache(maxsize=None)
    def rc_ends(i: int, number: int) -> frozenset[int]:
        if i >= len(words) or words[i] != "that":
            return frozenset()
        ends = set(verb_phrase_ends(i + 1, number, modifier=False))
        for inner in (_SG, _PL):
            for j in np_ends(i + 1, inner):
                if j < len(words) and words[j] in sets["vt"][inner]:
                    ends.add(j + 1)
        return frozenset(ends)

    @functools.lru_cache(maxsize=None)
    def verb_phrase_ends(i: int, number: int, modifier: bool) -> frozenset[int]:
        if i >= len(words):
            return frozenset()
        bare = set()
        if words[i] in sets["vi"][number]:
            bare.add(i + 1)
        if words[i] in sets["vt"][number]:
            for inner in (_SG, _PL):
                bare |= np_ends(i + 1, inner)
        if not modifier:
            return frozenset(bare)
        ends = set(bare)
        for j in bare:
            if j < len(words) and words[j] in _ADVERBS:
                ends.add(j + 1)
            if (j + 2 < len(words) and words[j] in _PREPOSITIONS and words[j + 1] == "the"
                    and words[j + 2] in _PLACES):
                ends.add(j + 3)
        return frozenset(ends)

    for number in (_SG, _PL):
        for j in np_ends(0, number):
            for k in verb_phrase_ends(j, number, True):
                if k == len(words) - 1 and words[k] == _END:
                    return True
    return False


@dataclass
class LMCorpus:
    """Sentences of the small language and their ids.

    ``train_tokens``/``test_tokens`` are ``(N, T)`` int64: ``<bos>`` words ``<eos>``, right-padded
    with ``<pad>``. Test sentences never occur in the training set.
    """
    tokenizer: WordTokenizer
    train_sentences: list[str]
    test_sentences: list[str]
    train_tokens: torch.Tensor
    test_tokens: torch.Tensor
    seed: int = 0


def make_lm_corpus(n_train: int = 4000, n_test: int = 400, seed: int = 0, max_depth: int = 2,
                   max_words: int = 24) -> LMCorpus:
    """Generate distinct sentences (at most ``max_words`` words each) and split them into train/test."""
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be positive, got {n_train} and {n_test}")
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    attempts = 0
    while len(seen) < n_train + n_test:
        attempts += 1
        if attempts > 50 * (n_train + n_test):
            raise ValueError(
                f"could not find {n_train + n_test} distinct sentences with max_depth={max_depth}, "
                f"max_words={max_words}; ask for fewer or allow longer sentences"
            )
        sentence = generate_sentence(rng, max_depth)
        if len(sentence.split()) <= max_words:
            seen.setdefault(sentence)
    sentences = list(seen)
    rng.shuffle(sentences)
    train, test = sentences[:n_train], sentences[n_train:]
    tokenizer = WordTokenizer(LM_WORDS)
    length = max_words + 2
    return LMCorpus(tokenizer, train, test,
                    tokenizer.encode_batch(train, add_bos=True, add_eos=True, length=length),
                    tokenizer.encode_batch(test, add_bos=True, add_eos=True, length=length), seed)


def causal_lm_pairs(tokens: torch.Tensor, pad_id: int = PAD_ID,
                    ignore_index: int = -100) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, T)`` sequences -> ``(inputs (B, T-1), targets (B, T-1))`` for next-token prediction.

    ``targets[:, t] = tokens[:, t + 1]``; targets that are padding become ``ignore_index`` so the loss
    skips them (``F.cross_entropy(..., ignore_index=-100)``).
    """
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"causal_lm_pairs needs (B, T) tokens with T >= 2, got shape {tuple(tokens.shape)}")
    inputs = tokens[:, :-1]
    targets = tokens[:, 1:].masked_fill(tokens[:, 1:] == pad_id, ignore_index)
    return inputs, targets


def mask_tokens(tokens: torch.Tensor, tokenizer: Tokenizer, prob: float = 0.15,
                rng: torch.Generator | None = None, ignore_index: int = -100) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking for masked language modelling (Devlin et al. 2019, section 3.1).

    Each ordinary token is chosen for prediction with probability ``prob``; special tokens
    (``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``, ``<mask>``) never are. A chosen token is, in the input,

    - replaced by ``<mask>`` with probability 0.8,
    - replaced by a random ordinary token with probability 0.1,
    - kept unchanged with probability 0.1 (so the model cannot assume the visible token is right).

    Returns ``(inputs, labels)``, both ``(B, T)``: ``labels`` holds the original id where a token was
    chosen and ``ignore_index`` everywhere else.
    """
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"prob must be in [0, 1], got {prob}")
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    if tokenizer.vocab_size <= NUM_SPECIAL:
        raise ValueError("the tokenizer has no ordinary tokens to draw random replacements from")
    device = tokens.device

    def uniform(shape):
        return torch.rand(shape, generator=rng, device=device if rng is None else rng.device)

    eligible = tokens >= NUM_SPECIAL
    chosen = (uniform(tokens.shape) < prob).to(device) & eligible
    action = uniform(tokens.shape).to(device)  # < 0.8: mask, < 0.9: random token, else keep
    random_ids = torch.randint(NUM_SPECIAL, tokenizer.vocab_size, tokens.shape, generator=rng,
                               device=device if rng is None else rng.device).to(device)
    inputs = tokens.clone()
    inputs[chosen & (action < 0.8)] = MASK_ID
    use_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[use_random] = random_ids[use_random].to(tokens.dtype)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, ignore_index))
    return inputs, labels


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

class DigitsSplit(NamedTuple):
    """Images ``(N, 1, 8, 8)`` float32 in [0, 1] and labels ``(N,)`` int64."""
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def _read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The digits as ``(1797, 8, 8)`` pixels (0..16) and ``(1797,)`` labels.

    Reads the CSV that scikit-learn ships, without importing scikit-learn (that import alone takes
    seconds); falls back to ``sklearn.datasets.load_digits`` if the file has moved.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the digits ship with scikit-learn: install it with `pip install scikit-learn`")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if path.exists():
        table = np.loadtxt(path, delimiter=",")  # (1797, 65): 64 pixels, then the label
        return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images, digits.target.astype(np.int64)


def load_digits_tensors(seed: int = 0, test_fraction: float = 0.2, train_fraction: float = 1.0) -> DigitsSplit:
    """scikit-learn's handwritten digits (1,797 images of 8x8 pixels, 10 classes), split stratified.

    The test set depends only on ``seed`` and ``test_fraction``; ``train_fraction`` keeps that share
    of the training set (again stratified, and nested: a smaller fraction is a subset of a larger one
    under the same seed), for data-efficiency curves.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if not 0.0 < train_fraction <= 1.0:
        raise ValueError(f"train_fraction must be in (0, 1], got {train_fraction}")
    images, labels = _read_digits()
    images = (images / 16.0).astype(np.float32)  # pixel values are 0..16
    rng = np.random.default_rng(seed)
    train_idx, test_idx = [], []
    keep_idx = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        n_test = int(round(test_fraction * len(members)))
        test_idx.append(members[:n_test])
        rest = members[n_test:]
        train_idx.append(rest)
        keep_idx.append(rest[: max(1, int(round(train_fraction * len(rest))))])
    test = np.sort(np.concatenate(test_idx))
    train = np.sort(np.concatenate(keep_idx))

    def as_tensors(idx):
        return torch.from_numpy(images[idx]).unsqueeze(1), torch.from_numpy(labels[idx])

    return DigitsSplit(*as_tensors(train), *as_tensors(test))


CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FILE = "cifar-10-python.tar.gz"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _md5(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path) -> None:
    from tqdm.auto import tqdm

    partial = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            total = int(response.headers.get("Content-Length", 0)) or None
            with open(partial, "wb") as out, tqdm(total=total, unit="B", unit_scale=True,
                                                  desc=f"downloading {target.name}") as bar:
                for block in iter(lambda: response.read(1 << 16), b""):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"could not download CIFAR-10 from {url} ({error}). Check the internet connection, or download "
            f"the file by hand and put it at {target}"
        ) from error
    partial.replace(target)


def load_cifar10(root: str | os.PathLike = "data", download: bool = False, train: bool = True,
                 verify: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-10 as ``(images (N, 3, 32, 32) float32 in [0, 1], labels (N,) int64)``.

    Reads ``root/cifar-10-python.tar.gz`` (163 MiB). With ``download=True`` a missing file is fetched
    from the authors' site with a progress bar; the MD5 checksum is checked before use, so a broken or
    partial download is reported instead of silently giving wrong data. Only the optional CIFAR-10
    exercise uses this: everything else in the course runs on :func:`load_digits_tensors`, offline.
    """
    path = Path(root) / CIFAR10_FILE
    if not path.exists():
        if not download:
            raise FileNotFoundError(
                f"CIFAR-10 archive not found at {path}. Call load_cifar10({str(root)!r}, download=True) "
                f"on a machine with internet access, or download {CIFAR10_URL} and put it there."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        _download(CIFAR10_URL, path)
    if verify:
        actual = _md5(path)
        if actual != CIFAR10_MD5:
            raise RuntimeError(
                f"{path} has MD5 {actual}, expected {CIFAR10_MD5}: the file is corrupt or incomplete. "
                "Delete it and download again."
            )
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    images, labels = [], []
    with tarfile.open(path, "r:gz") as archive:
        for name in names:
            member = archive.extractfile(f"cifar-10-batches-py/{name}")
            if member is None:
                raise RuntimeError(f"{path} does not contain cifar-10-batches-py/{name}")
            batch = pickle.load(member, encoding="bytes")
            images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            labels.append(np.asarray(batch[b"labels"], dtype=np.int64))
    x = torch.from_numpy(np.concatenate(images)).float() / 255.0
    return x, torch.from_numpy(np.concatenate(labels))


# --------------------------------------------------------------------------------------------
# Toy sequence tasks
# --------------------------------------------------------------------------------------------

class SequenceTask(NamedTuple):
    """A toy sequence-to-sequence task. ``src`` ``(N, L)``; ``tgt_in`` ``(N, L + 1)`` starts with
    ``<bos>``; ``tgt_out`` ``(N, L + 1)`` ends with ``<eos>``; ``vocab_size`` counts the specials."""
    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    vocab_size: int


def _symbol_task(n: int, length: int, vocab: int, seed: int,
                 transform: Callable[[torch.Tensor], torch.Tensor]) -> SequenceTask:
    if n < 1 or length < 1 or vocab < 1:
        raise ValueError(f"n, length and vocab must be positive, got n={n}, length={length}, vocab={vocab}")
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(NUM_SPECIAL, NUM_SPECIAL + vocab, (n, length), generator=generator)  # (N, L)
    target = transform(src)
    bos = torch.full((n, 1), BOS_ID, dtype=torch.long)
    eos = torch.full((n, 1), EOS_ID, dtype=torch.long)
    return SequenceTask(src, torch.cat([bos, target], 1), torch.cat([target, eos], 1), NUM_SPECIAL + vocab)


def copy_task(n: int, length: int, vocab: int = 10, seed: int = 0) -> SequenceTask:
    """Output = input. ``vocab`` ordinary symbols (ids 5 .. 5 + vocab - 1)."""
    return _symbol_task(n, length, vocab, seed, lambda src: src.clone())


def reverse_task(n: int, length: int, vocab: int = 10, seed: int = 0) -> SequenceTask:
    """Output = input reversed: the first output symbol depends on the last input symbol."""
    return _symbol_task(n, length, vocab, seed, lambda src: src.flip(1))
