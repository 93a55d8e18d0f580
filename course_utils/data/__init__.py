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
- **Toy sequence tasks** for the RNN bottleneck experiment: :func:`copy_task`, :func:`reverse_task`;
  ``exclude=`` keeps a test set's sequences out of the training set (:func:`occurs_in` checks it).

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

The package, one topic a module: :mod:`.tokenizers` (the ids above, character and word tokenizers,
padding helpers), :mod:`.dates`, :mod:`.grammar`, :mod:`.images`, :mod:`.toy_tasks`. Import from the
package itself (``from course_utils.data import make_date_dataset``); the modules are its chapters.
How the date task's recommended setting was chosen is in docs/library.md (*The date task's setting*).
"""

from __future__ import annotations

from .dates import (
    DATE_FORMATS,
    DATE_SOURCE_ALPHABET,
    DATE_TARGET_ALPHABET,
    RECOMMENDED_DATE_SETTING,
    DateTask,
    exact_match,
    format_date,
    make_date_dataset,
    random_date_string,
)
from .grammar import (
    LM_WORDS,
    AgreementProbe,
    LMCorpus,
    agreement_probes,
    causal_lm_pairs,
    generate_sentence,
    is_grammatical,
    make_lm_corpus,
    mask_tokens,
)
from .images import CIFAR10_FILE, DigitsSplit, load_cifar10, load_digits_tensors
from .tokenizers import (
    BOS_ID,
    EOS_ID,
    MASK_ID,
    NUM_SPECIAL,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    sequence_lengths,
    trim_padding,
)
from .toy_tasks import SequenceTask, copy_task, occurs_in, reverse_task

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "MASK_ID",
    "NUM_SPECIAL",
    "SPECIAL_TOKENS",
    "Tokenizer",
    "CharTokenizer",
    "WordTokenizer",
    "trim_padding",
    "sequence_lengths",
    "DATE_FORMATS",
    "format_date",
    "random_date_string",
    "DateTask",
    "make_date_dataset",
    "exact_match",
    "RECOMMENDED_DATE_SETTING",
    "DATE_SOURCE_ALPHABET",
    "DATE_TARGET_ALPHABET",
    "LM_WORDS",
    "generate_sentence",
    "is_grammatical",
    "LMCorpus",
    "make_lm_corpus",
    "causal_lm_pairs",
    "mask_tokens",
    "AgreementProbe",
    "agreement_probes",
    "CIFAR10_FILE",
    "DigitsSplit",
    "load_digits_tensors",
    "load_cifar10",
    "SequenceTask",
    "copy_task",
    "reverse_task",
    "occurs_in",
]
