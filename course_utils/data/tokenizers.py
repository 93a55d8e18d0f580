"""Tokenizers and the special token ids that every tokenizer and toy task of the course shares."""

from __future__ import annotations

from typing import Iterable, Sequence

import torch

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

    def encode_batch(
        self, texts: Sequence[str], add_bos: bool = False, add_eos: bool = False, length: int | None = None
    ) -> torch.Tensor:
        """Texts -> ``(B, T)`` int64 tensor, right-padded with ``<pad>`` (id 0) to the longest text
        (or to ``length``, which must fit every text)."""
        encoded = [self.encode(t, add_bos, add_eos) for t in texts]
        longest = max((len(e) for e in encoded), default=0)
        if length is None:
            length = longest
        elif length < longest:
            raise ValueError(f"length={length} is shorter than the longest encoded text ({longest} ids)")
        return torch.tensor([ids + [PAD_ID] * (length - len(ids)) for ids in encoded], dtype=torch.long).reshape(
            len(encoded), length
        )

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
