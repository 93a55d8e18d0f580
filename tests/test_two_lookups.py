"""course_utils.two_lookups: chapter 03's two-lookup task, its model and its measurements."""

from __future__ import annotations

import pytest
import torch

from course_utils import env
from course_utils.two_lookups import IGNORE, LookupResult, TwoLookups, lookup_task, train_and_measure


def test_lookup_task_targets_are_the_previous_and_the_first_token():
    tokens, previous, first = lookup_task(50, seed=3, symbols=7, length=9)
    assert tokens.shape == previous.shape == first.shape == (50, 9)
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 7
    assert (previous[:, 0] == IGNORE).all() and (first[:, 0] == IGNORE).all(), "position 0 has no target"
    assert torch.equal(previous[:, 1:], tokens[:, :-1])
    assert torch.equal(first[:, 1:], tokens[:, :1].expand(-1, 8))


def test_lookup_task_is_repeatable_and_moved_by_course_seed(monkeypatch):
    monkeypatch.delenv(env.SEED_ENV, raising=False)
    plain = lookup_task(20, seed=1)[0]
    assert torch.equal(plain, lookup_task(20, seed=1)[0])
    monkeypatch.setenv(env.SEED_ENV, "2")
    moved = lookup_task(20, seed=1)[0]
    assert not torch.equal(plain, moved)
    monkeypatch.delenv(env.SEED_ENV)
    assert torch.equal(moved, lookup_task(20, seed=2001)[0]), "COURSE_SEED=2 turns seed 1 into 2001"


def test_lookup_task_rejects_bad_sizes():
    with pytest.raises(ValueError, match="length >= 3"):
        lookup_task(10, seed=0, length=2)


def test_two_lookups_model_shapes_and_stored_weights():
    model = TwoLookups(num_heads=2, width=16, symbols=11, length=6)
    tokens = torch.randint(0, 11, (4, 6))
    logits_previous, logits_first = model(tokens)
    assert logits_previous.shape == logits_first.shape == (4, 6, 11)
    assert model.last_weights.shape == (4, 2, 6, 6)
    assert torch.allclose(model.last_weights.sum(-1), torch.ones(4, 2, 6), atol=1e-6)


def test_train_and_measure_learns_with_two_heads_and_reports_consistent_numbers():
    train_set, test_set = lookup_task(64 * 120, seed=1), lookup_task(300, seed=2)
    result = train_and_measure(2, init_seed=0, train_set=train_set, test_set=test_set, steps=120)
    assert result.num_heads == 2 and result.init_seed == 0
    assert result.parameters == sum(p.numel() for p in result.model.parameters())
    assert result.mass_previous.shape == result.mass_first.shape == (2,)
    assert result.weights.shape == (2, 12, 12)
    assert 0.0 <= result.worse_accuracy <= min(result.acc_previous, result.acc_first) + 1e-12
    # Far above chance (1/30) after 120 steps: training happened and the measurement reads the model.
    assert max(result.acc_previous, result.acc_first) > 0.5
    same = train_and_measure(2, init_seed=0, train_set=train_set, test_set=test_set, steps=120)
    assert same.acc_previous == result.acc_previous, "the same init_seed gives the same model"


def test_train_and_measure_rejects_too_little_data_and_unknown_symbols():
    train_set, test_set = lookup_task(100, seed=1), lookup_task(10, seed=2)
    with pytest.raises(ValueError, match="need 12800 training sequences"):
        train_and_measure(1, 0, train_set, test_set, steps=200)
    with pytest.raises(ValueError, match="only 20 symbols"):
        train_and_measure(1, 0, train_set, test_set, steps=1, symbols=20)


def _result(mass_previous, mass_first) -> LookupResult:
    return LookupResult(
        num_heads=len(mass_previous),
        init_seed=0,
        parameters=0,
        acc_previous=1.0,
        acc_first=0.5,
        mass_previous=torch.tensor(mass_previous),
        mass_first=torch.tensor(mass_first),
        weights=torch.zeros(1),
        model=None,
    )


def test_specialised_needs_two_different_heads_each_above_the_threshold():
    assert _result([0.95, 0.0], [0.01, 0.9]).specialised(0.8)
    assert not _result([0.72, 0.3], [0.25, 0.7]).specialised(0.8), "mixtures are not specialised"
    assert not _result([0.9], [0.9]).specialised(0.8), "one head cannot take both jobs"
    assert not _result([0.9, 0.0], [0.95, 0.0]).specialised(0.8), "the same head for both jobs"
    assert _result([0.9, 0.0], [0.0, 0.9]).worse_accuracy == 0.5
