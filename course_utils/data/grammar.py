"""A small language for language modelling: a probabilistic grammar with subject-verb agreement,
its checker, agreement probes, next-token pairs and BERT-style masking."""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

import torch

from .tokenizers import MASK_ID, NUM_SPECIAL, PAD_ID, Tokenizer, WordTokenizer

# (singular, plural) pairs: subject and verb must agree in number, also across a relative clause
# ("the dog that the cats chase sleeps"), which is the long-range structure a model has to learn.
_NOUNS = [
    ("cat", "cats"),
    ("dog", "dogs"),
    ("bird", "birds"),
    ("horse", "horses"),
    ("child", "children"),
    ("teacher", "teachers"),
    ("farmer", "farmers"),
    ("girl", "girls"),
    ("boy", "boys"),
    ("doctor", "doctors"),
]
_INTRANSITIVE = [
    ("sleeps", "sleep"),
    ("runs", "run"),
    ("laughs", "laugh"),
    ("waits", "wait"),
    ("sings", "sing"),
    ("smiles", "smile"),
]
_TRANSITIVE = [
    ("sees", "see"),
    ("chases", "chase"),
    ("likes", "like"),
    ("follows", "follow"),
    ("feeds", "feed"),
    ("helps", "help"),
]
_DETERMINERS = (("the", "a", "every", "this"), ("the", "some", "many", "these"))
_ADJECTIVES = ("small", "old", "happy", "quiet", "clever", "tired")
_ADVERBS = ("quickly", "today", "again", "slowly", "loudly")
_PREPOSITIONS = ("in", "near", "behind")
_PLACES = ("garden", "house", "river", "park", "barn")
_END = "."

LM_WORDS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [w for pair in _NOUNS + _INTRANSITIVE + _TRANSITIVE for w in pair]
        + list(_DETERMINERS[0])
        + list(_DETERMINERS[1])
        + list(_ADJECTIVES)
        + list(_ADVERBS)
        + list(_PREPOSITIONS)
        + list(_PLACES)
        + ["that", _END]
    )
)

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
    phrases = _PhraseEnds(words)
    # S -> NP[n] VP[n] ".": a subject of either number, a verb phrase that agrees with it, and the full stop last.
    for number in (_SG, _PL):
        for j in phrases.noun_phrase_ends(0, number):
            for k in phrases.verb_phrase_ends(j, number, True):
                if k == len(words) - 1 and words[k] == _END:
                    return True
    return False


class _PhraseEnds:
    """Where the phrases of the small language can end in one sentence, one rule of the grammar per method.

    ``noun_phrase_ends(i, number)`` is the set of positions ``j`` such that ``words[i:j]`` is a noun phrase
    of that number, and so on for the other phrases. A set, because a phrase may stop early or go on with
    a relative clause ("the dog" or "the dog that sleeps"); :func:`is_grammatical` tries every end.
    """

    def __init__(self, words: tuple[str, ...]):
        self.words = words
        # Nested clauses ask the same questions again (which noun phrases start here?): each is answered once.
        # The caches are this sentence's own: one on the class would keep every sentence ever checked.
        self.noun_phrase_ends = functools.lru_cache(maxsize=None)(self._noun_phrase_ends)
        self.relative_clause_ends = functools.lru_cache(maxsize=None)(self._relative_clause_ends)
        self.verb_phrase_ends = functools.lru_cache(maxsize=None)(self._verb_phrase_ends)

    def _word_in(self, i: int, allowed) -> bool:
        """Is there a word at position ``i``, and is it one of ``allowed``?"""
        return i < len(self.words) and self.words[i] in allowed

    def _noun_phrase_ends(self, i: int, number: int) -> frozenset[int]:
        """NP[n] -> Det[n] (Adj) N[n] (RC[n])"""
        if not self._word_in(i, _WORDS_BY_ROLE["det"][number]):
            return frozenset()
        j = i + 1
        if self._word_in(j, _ADJECTIVES):
            j += 1
        if not self._word_in(j, _WORDS_BY_ROLE["noun"][number]):
            return frozenset()
        return frozenset({j + 1} | self.relative_clause_ends(j + 1, number))

    def _relative_clause_ends(self, i: int, number: int) -> frozenset[int]:
        """RC[n] -> "that" VP[n] (without its modifier) | "that" NP[m] Vt[m]"""
        if not self._word_in(i, ("that",)):
            return frozenset()
        ends = set(self.verb_phrase_ends(i + 1, number, modifier=False))
        for inner in (_SG, _PL):
            for j in self.noun_phrase_ends(i + 1, inner):
                if self._word_in(j, _WORDS_BY_ROLE["vt"][inner]):
                    ends.add(j + 1)
        return frozenset(ends)

    def _verb_phrase_ends(self, i: int, number: int, modifier: bool) -> frozenset[int]:
        """VP[n] -> (Vi[n] | Vt[n] NP[m]) (Adv | P "the" Place), the modifier allowed only if ``modifier``"""
        bare = self._verb_and_object_ends(i, number)
        if not modifier:
            return frozenset(bare)
        ends = set(bare)
        for j in bare:
            if self._word_in(j, _ADVERBS):
                ends.add(j + 1)
            if self._word_in(j, _PREPOSITIONS) and self._word_in(j + 1, ("the",)) and self._word_in(j + 2, _PLACES):
                ends.add(j + 3)
        return frozenset(ends)

    def _verb_and_object_ends(self, i: int, number: int) -> set[int]:
        """Vi[n] | Vt[n] NP[m]: a verb that agrees with the subject, and the object of a transitive one."""
        ends = set()
        if self._word_in(i, _WORDS_BY_ROLE["vi"][number]):
            ends.add(i + 1)
        if self._word_in(i, _WORDS_BY_ROLE["vt"][number]):
            for inner in (_SG, _PL):
                ends |= self.noun_phrase_ends(i + 1, inner)
        return ends


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


def make_lm_corpus(
    n_train: int = 4000, n_test: int = 400, seed: int = 0, max_depth: int = 2, max_words: int = 24
) -> LMCorpus:
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
    return LMCorpus(
        tokenizer,
        train,
        test,
        tokenizer.encode_batch(train, add_bos=True, add_eos=True, length=length),
        tokenizer.encode_batch(test, add_bos=True, add_eos=True, length=length),
        seed,
    )


@dataclass(frozen=True)
class AgreementProbe:
    """One subject-verb agreement test: which verb may follow ``prefix``?

    ``right`` are the ids of the verbs that agree with the subject (each completes ``prefix`` to a
    grammatical sentence ending in "."), ``wrong`` the same verbs in the other number. ``kind`` is
    ``"no clause"``, ``"object relative"`` (``"the dog that the cats chase ___"``: another noun, the
    attractor, between subject and verb) or ``"subject relative"`` (``"the dog that chases the cats
    ___"``: the attractor right before the verb). ``attractor`` is ``"none"``, ``"same number"`` or
    ``"other number"`` (as the subject).
    """

    kind: str
    prefix: str
    subject: str
    attractor: str
    right: tuple[int, ...]
    wrong: tuple[int, ...]


def agreement_probes(tokenizer: Tokenizer) -> list[AgreementProbe]:
    """Every subject noun of the small language, singular and plural: once with nothing between
    subject and verb, and once per other noun, in each number, as the attractor of an object and of a
    subject relative clause (Linzen et al. 2016, https://arxiv.org/abs/1611.01368).

    Attractors come in both numbers so that no shortcut scores above chance: a model that makes the
    verb agree with the nearest noun, or disagree with the last word, is right on half of the clause
    probes; only agreement with the subject gets all of them. Which verbs are right is decided by
    :func:`is_grammatical`, not by a hand-made list; a probe whose verbs the grammar does not separate
    cleanly is an error. 20 probes without a clause and 360 of each relative-clause kind.
    """
    other_number = {verb: pair[1 - number] for pair in _INTRANSITIVE for number, verb in enumerate(pair)}
    chase = _TRANSITIVE[1]  # ("chases", "chase")
    probes = []
    for index, nouns in enumerate(_NOUNS):
        for number in (_SG, _PL):
            clauses = [("no clause", "none", "")]
            for other, attractors in enumerate(_NOUNS):
                if other == index:
                    continue
                for inner, attractor in ((number, "same number"), (1 - number, "other number")):
                    clauses.append(("object relative", attractor, f" that the {attractors[inner]} {chase[inner]}"))
                    clauses.append(("subject relative", attractor, f" that {chase[number]} the {attractors[inner]}"))
            for kind, attractor, clause in clauses:
                prefix = f"the {nouns[number]}{clause}"
                right = [verb for verb in other_number if is_grammatical(f"{prefix} {verb} .")]
                wrong = [other_number[verb] for verb in right]
                if not right or any(is_grammatical(f"{prefix} {verb} .") for verb in wrong):
                    raise RuntimeError(f"the grammar does not separate right and wrong verbs after {prefix!r}")
                probes.append(
                    AgreementProbe(
                        kind,
                        prefix,
                        nouns[number],
                        attractor,
                        tuple(tokenizer.encode(" ".join(right))),
                        tuple(tokenizer.encode(" ".join(wrong))),
                    )
                )
    return probes


def causal_lm_pairs(
    tokens: torch.Tensor, pad_id: int = PAD_ID, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, T)`` sequences -> ``(inputs (B, T-1), targets (B, T-1))`` for next-token prediction.

    ``targets[:, t] = tokens[:, t + 1]``; targets that are padding become ``ignore_index`` so the loss
    skips them (``F.cross_entropy(..., ignore_index=-100)``).
    """
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"causal_lm_pairs needs (B, T) tokens with T >= 2, got shape {tuple(tokens.shape)}")
    inputs = tokens[:, :-1]
    targets = tokens[:, 1:].masked_fill(tokens[:, 1:] == pad_id, ignore_index)
    return inputs, targets


def mask_tokens(
    tokens: torch.Tensor,
    tokenizer: Tokenizer,
    prob: float = 0.15,
    rng: torch.Generator | None = None,
    ignore_index: int = -100,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking for masked language modelling (Devlin et al. 2019, section 3.1).

    Each ordinary token is chosen for prediction with probability ``prob``; special tokens
    (``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``, ``<mask>``) never are. A chosen token is, in the input,

    - replaced by ``<mask>`` with probability ``mask_replace_prob`` (BERT: 0.8),
    - replaced by a random ordinary token with probability ``random_replace_prob`` (BERT: 0.1),
    - kept unchanged otherwise (BERT: 0.1, so the model cannot assume the visible token is right).

    Returns ``(inputs, labels)``, both ``(B, T)``: ``labels`` holds the original id where a token was
    chosen and ``ignore_index`` everywhere else.
    """
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"prob must be in [0, 1], got {prob}")
    if (
        not 0.0 <= mask_replace_prob <= 1.0
        or not 0.0 <= random_replace_prob <= 1.0
        or mask_replace_prob + random_replace_prob > 1.0
    ):
        raise ValueError(
            f"mask_replace_prob={mask_replace_prob} and random_replace_prob={random_replace_prob} "
            "must be probabilities that add up to at most 1"
        )
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    if tokenizer.vocab_size <= NUM_SPECIAL:
        raise ValueError("the tokenizer has no ordinary tokens to draw random replacements from")
    device = tokens.device

    def uniform(shape):
        return torch.rand(shape, generator=rng, device=device if rng is None else rng.device)

    eligible = tokens >= NUM_SPECIAL
    chosen = (uniform(tokens.shape) < prob).to(device) & eligible
    action = uniform(tokens.shape).to(device)  # < 0.8: mask, < 0.9: random token, else keep (BERT's rates)
    random_ids = torch.randint(
        NUM_SPECIAL, tokenizer.vocab_size, tokens.shape, generator=rng, device=device if rng is None else rng.device
    ).to(device)
    inputs = tokens.clone()
    inputs[chosen & (action < mask_replace_prob)] = MASK_ID
    use_random = chosen & (action >= mask_replace_prob) & (action < mask_replace_prob + random_replace_prob)
    inputs[use_random] = random_ids[use_random].to(tokens.dtype)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, ignore_index))
    return inputs, labels
