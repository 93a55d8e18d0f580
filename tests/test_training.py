"""Tests for course_utils.training: batches, the loop, schedules, label smoothing."""

from __future__ import annotations

import math
import time
from itertools import pairwise

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import training
from course_utils.training import LabelSmoothingLoss


def _classification_problem(n=256, features=8, classes=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=generator)
    teacher = torch.randn(features, classes, generator=generator)
    return x, (x @ teacher).argmax(-1)


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------


def test_make_batches_covers_every_example_once_per_epoch_and_reshuffles():
    x = torch.arange(10)
    batches = training.make_batches((x, x * 2), batch_size=3, shuffle=True, seed=0)
    assert len(batches) == 4
    first = [b for b in batches]
    second = [b for b in batches]
    for epoch in (first, second):
        seen = torch.cat([xb for xb, _ in epoch])
        assert sorted(seen.tolist()) == list(range(10)), "each epoch must visit every example exactly once"
        assert all(torch.equal(yb, xb * 2) for xb, yb in epoch), "tensors must stay aligned"
    assert torch.cat([b[0] for b in first]).tolist() != torch.cat([b[0] for b in second]).tolist(), (
        "a new epoch should use a new order"
    )
    again = [b for b in training.make_batches((x, x * 2), batch_size=3, shuffle=True, seed=0)]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again, strict=True)), (
        "the order must be repeatable under a seed"
    )
    assert len(training.make_batches((x,), 3, drop_last=True)) == 3


def test_bucketing_groups_similar_lengths():
    lengths = torch.randint(1, 100, (640,), generator=torch.Generator().manual_seed(0))
    plain = training.make_batches((lengths,), 32, seed=0)
    bucketed = training.make_batches((lengths,), 32, seed=0, bucket_by=lengths)
    spread = lambda batches: sum(int(b[0].max() - b[0].min()) for b in batches) / len(batches)
    got = [b[0] for b in bucketed]
    assert sorted(torch.cat(got).tolist()) == sorted(lengths.tolist()), "bucketing must still use every example once"
    assert spread(bucketed) < spread(plain) / 4, "a bucketed batch should hold examples of similar length"
    with pytest.raises(ValueError, match="one length per example"):
        training.make_batches((lengths,), 32, bucket_by=lengths[:5])


def test_make_batches_rejects_misaligned_tensors():
    with pytest.raises(ValueError, match="same first dimension"):
        training.make_batches((torch.zeros(4), torch.zeros(5)), 2)


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


def test_train_reduces_the_loss_and_records_history():
    torch.manual_seed(0)
    x, y = _classification_problem()
    model = nn.Linear(8, 4)
    # SGD rather than Adam: constructing the first Adam imports sympy, which costs seconds.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    batches = training.make_batches((x, y), batch_size=32, seed=0)
    history = training.train(model, training.supervised_loss(), batches, optimizer, epochs=10, progress=False)
    assert history.steps == 80 and history.epochs == 10 and history.stopped_by == "epochs"
    first, last = sum(history.loss[:8]) / 8, sum(history.loss[-8:]) / 8
    assert last < 0.3 * first, f"training should cut the loss by far more than this: {first:.3f} -> {last:.3f}"
    assert len(history.lr) == len(history.grad_norm) == len(history.time_s) == history.steps
    assert history.time_s == sorted(history.time_s), "wall times must increase"
    assert history.train_metrics["accuracy"][-1] > 0.8
    assert training.evaluate_accuracy(model, training.make_batches((x, y), 64, shuffle=False)) > 0.9


def test_steps_stop_the_loop_across_epochs_and_a_scheduler_is_stepped():
    x, y = _classification_problem(n=40)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 / (i + 1))
    history = training.train(
        model,
        training.supervised_loss(),
        training.make_batches((x, y), 16),
        optimizer,
        steps=7,
        scheduler=scheduler,
        progress=False,
    )
    assert history.steps == 7 and history.stopped_by == "steps", "steps=7 must stop after 7 optimizer steps"
    assert history.lr == pytest.approx([1.0 / (i + 1) for i in range(7)]), "lr is recorded as used at each step"


def test_time_budget_is_honoured():
    x, y = _classification_problem(n=64)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step_time = 0.05

    def slow_loss(model, batch):
        time.sleep(step_time)
        return training.supervised_loss()(model, batch)

    budget = 0.3
    start = time.perf_counter()
    history = training.train(
        model,
        slow_loss,
        training.make_batches((x, y), 8),
        optimizer,
        steps=10_000,
        time_budget_s=budget,
        progress=False,
    )
    elapsed = time.perf_counter() - start
    assert history.stopped_by == "time budget"
    assert 0 < history.steps < 10_000
    # It stops after the first step that crosses the budget; allow for a slow, shared machine.
    assert elapsed < budget + 10 * step_time + 0.5, f"ran {elapsed:.2f} s on a {budget} s budget"
    assert history.total_time_s >= budget, "it must not stop before the budget is used"
    assert history.steps == 1 or history.time_s[-2] < budget, "it must stop at the first step past the budget"


def test_gradient_clipping_limits_the_update():
    model = nn.Linear(10, 1, bias=False)
    nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)

    def steep_loss(model, batch):
        return 1000.0 * model.weight.sum()  # gradient: 1000 in every entry, norm 1000 * sqrt(10)

    history = training.train(model, steep_loss, [None], optimizer, steps=1, clip_grad_norm=0.5, progress=False)
    assert history.grad_norm[0] == pytest.approx(1000 * math.sqrt(10)), "the recorded norm is taken before clipping"
    update = model.weight.detach().norm().item()  # SGD with lr=1: the update is the clipped gradient
    assert update == pytest.approx(0.5, rel=1e-5), f"the clipped update has norm {update}, expected 0.5"


def test_eval_fn_runs_in_eval_mode_on_schedule_and_at_the_end():
    x, y = _classification_problem(n=64)
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    modes = []

    def eval_fn(model):
        modes.append(model.training)
        return {"accuracy": training.evaluate_accuracy(model, [(x, y)])}

    history = training.train(
        model,
        training.supervised_loss(),
        training.make_batches((x, y), 8),
        optimizer,
        steps=10,
        eval_fn=eval_fn,
        eval_every=4,
        progress=False,
    )
    assert history.eval_step == [4, 8, 10], "evaluate every 4 steps and once more at the end"
    assert modes == [False, False, False], "eval_fn must see the model in eval mode (no dropout)"
    assert model.training, "the model must be back in training mode afterwards"
    assert len(history.eval_metrics["accuracy"]) == 3


def test_non_finite_loss_stops_with_a_clear_error():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(FloatingPointError, match="lower the learning rate"):
        training.train(model, lambda m, b: m.weight.sum() * float("nan"), [None], optimizer, steps=1, progress=False)


def test_train_rejects_bad_arguments():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="never ends"):
        training.train(model, lambda m, b: m.weight.sum(), [None], optimizer, progress=False)
    with pytest.raises(ValueError, match="clip_grad_norm"):
        training.train(model, lambda m, b: m.weight.sum(), [None], optimizer, steps=1, clip_grad_norm=0, progress=False)
    with pytest.raises(TypeError, match="scalar"):
        training.train(model, lambda m, b: m.weight, [None], optimizer, steps=1, progress=False)


def test_evaluate_accuracy_skips_ignored_targets():
    class Fixed(nn.Module):
        def forward(self, x):
            return F.one_hot(x, 3).float()  # predicts its input

    inputs = torch.tensor([[0, 1, 2]])
    targets = torch.tensor([[0, 2, -100]])
    assert training.evaluate_accuracy(Fixed(), [(inputs, targets)]) == 0.5


# --------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------


def test_noam_formula_values():
    d_model, warmup = 512, 4000
    assert training.noam_lr(1, d_model, warmup) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert training.noam_lr(warmup, d_model, warmup) == pytest.approx((512 * 4000) ** -0.5)
    assert training.noam_lr(16000, d_model, warmup) == pytest.approx(512**-0.5 * 16000**-0.5)
    assert training.noam_lr(2000, d_model, warmup) == pytest.approx(training.noam_lr(4000, d_model, warmup) / 2), (
        "the warm-up is linear"
    )
    with pytest.raises(ValueError, match="from 1"):
        training.noam_lr(0, d_model, warmup)


def test_noam_schedule_peaks_at_warmup_and_starts_at_step_one():
    d_model, warmup = 64, 50
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = training.noam_schedule(optimizer, d_model, warmup)
    lrs = []
    for _ in range(4 * warmup):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == pytest.approx(training.noam_lr(1, d_model, warmup)), "the first step is step 1, not 0"
    assert lrs.index(max(lrs)) + 1 == warmup, "the learning rate must peak at step = warmup"
    assert max(lrs) == pytest.approx((d_model * warmup) ** -0.5)


def test_warmup_cosine_schedule_shape_and_end_value():
    base_lr, warmup, total, min_ratio = 0.5, 10, 100, 0.1
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=base_lr)
    scheduler = training.warmup_cosine_schedule(optimizer, warmup, total, min_ratio)
    lrs = []
    for _ in range(total + 20):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == pytest.approx(base_lr / warmup) and lrs[warmup - 1] == pytest.approx(base_lr)
    assert lrs[warmup] == pytest.approx(base_lr), "the decay starts from the full learning rate"
    decay = lrs[warmup : total + 1]
    assert all(a >= b for a, b in pairwise(decay)), "the cosine part must not increase"
    assert lrs[total] == pytest.approx(base_lr * min_ratio), "the schedule ends at min_ratio * lr"
    assert lrs[-1] == pytest.approx(base_lr * min_ratio), "and stays there after `total` steps"
    assert lrs[(warmup + total) // 2] == pytest.approx(base_lr * (min_ratio + (1 - min_ratio) / 2))
    with pytest.raises(ValueError, match="warmup <= total"):
        training.warmup_cosine_schedule(optimizer, 200, 100)


# --------------------------------------------------------------------------------------------
# Label smoothing
# --------------------------------------------------------------------------------------------


def _logits_and_targets(pad=0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, 7, generator=generator, dtype=torch.float64)  # (B, T, V)
    targets = torch.randint(1, 7, (3, 5), generator=generator)
    targets[0, 3:] = pad
    targets[2, 1:] = pad
    return logits, targets


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothing_equals_pytorch_cross_entropy(smoothing):
    logits, targets = _logits_and_targets()
    ours = LabelSmoothingLoss(smoothing, ignore_index=0)(logits, targets)
    theirs = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=0, label_smoothing=smoothing)
    assert torch.allclose(ours, theirs, atol=1e-12), f"ours {ours.item()} vs F.cross_entropy {theirs.item()}"


def test_kl_form_differs_by_the_target_entropy_and_is_zero_at_the_target():
    logits, targets = _logits_and_targets()
    smoothing, vocab = 0.1, logits.shape[-1]
    cross_entropy = LabelSmoothingLoss(smoothing, ignore_index=0)(logits, targets)
    kl = LabelSmoothingLoss(smoothing, ignore_index=0, form="kl")(logits, targets)
    q_true, q_other = 1 - smoothing + smoothing / vocab, smoothing / vocab
    entropy = -(q_true * math.log(q_true) + (vocab - 1) * q_other * math.log(q_other))
    assert kl.item() == pytest.approx(cross_entropy.item() - entropy, abs=1e-10), "KL = H(q, p) - H(q)"
    assert kl.item() > 0
    criterion = LabelSmoothingLoss(smoothing, ignore_index=0, form="kl")
    flat_targets = torch.tensor([2, 5])
    perfect_logits = criterion.target_distribution(flat_targets, vocab, torch.float64).log()
    assert criterion(perfect_logits, flat_targets).item() == pytest.approx(0.0, abs=1e-12), (
        "a model that outputs q itself has zero KL divergence"
    )


def test_label_smoothing_stays_finite_where_the_naive_version_gives_nan():
    logits, targets = _logits_and_targets(pad=0)
    logits = logits.clone().requires_grad_(True)
    masked = logits.clone()
    masked[..., 0] = -math.inf  # the model never predicts <pad>: its log-probability is -inf
    smoothing, vocab = 0.1, logits.shape[-1]

    # The naive version: the pad column of the target is 0 and the loss is sum q * (log q - log p).
    log_p = masked.log_softmax(-1)
    q = torch.full_like(log_p, smoothing / (vocab - 1))  # smoothing spread over every class but <pad>
    q.scatter_add_(-1, targets[..., None], torch.full_like(log_p[..., :1], 1 - smoothing))
    q[..., 0] = 0.0
    naive = (q * (q.log() - log_p)).sum(-1)[targets != 0].mean()
    assert torch.isnan(naive), "the naive computation should hit 0 * log 0 and 0 * inf"

    criterion = LabelSmoothingLoss(smoothing, ignore_index=0, exclude=(0,), form="kl")
    loss = criterion(masked, targets)
    assert torch.isfinite(loss), "our loss must stay finite with -inf logits and zero target entries"
    loss.backward()
    assert torch.isfinite(logits.grad).all(), "and so must its gradient"
    keep = targets != 0
    q_ok = torch.where(q > 0, q, torch.ones_like(q))
    expected = (q * (q_ok.log() - log_p.masked_fill(q == 0, 0.0))).sum(-1)[keep].mean()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-10), "the finite value must be the right one"


def test_label_smoothing_with_only_padding_is_zero_and_differentiable():
    logits = torch.randn(2, 3, 5, requires_grad=True)
    loss = LabelSmoothingLoss(0.1, ignore_index=0)(logits, torch.zeros(2, 3, dtype=torch.long))
    assert loss.item() == 0.0, "no target to predict: the loss is 0, not nan"
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))


def test_label_smoothing_rejects_bad_input():
    with pytest.raises(ValueError, match="smoothing must be"):
        LabelSmoothingLoss(1.0)
    with pytest.raises(ValueError, match="must agree"):
        LabelSmoothingLoss(0.1)(torch.randn(4, 5), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="in `exclude`"):
        LabelSmoothingLoss(0.1, exclude=(0,))(torch.randn(2, 5), torch.tensor([0, 1]))


# --------------------------------------------------------------------------------------------
# The pieces together: the start of the date-task recipe
# --------------------------------------------------------------------------------------------


def test_date_task_recipe_runs_end_to_end():
    from course_utils import data, decoding
    from course_utils.models import Seq2SeqTransformer

    setting = data.RECOMMENDED_DATE_SETTING
    task = data.make_date_dataset(n_train=640, n_test=64, seed=0)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(task.src_tokenizer.vocab_size, task.tgt_tokenizer.vocab_size, **setting["model"])
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=setting["lr"], betas=setting["betas"], weight_decay=setting["weight_decay"]
    )
    steps = 40
    scheduler = training.warmup_cosine_schedule(optimizer, warmup=10, total=steps, min_ratio=setting["min_lr_ratio"])
    criterion = LabelSmoothingLoss(setting["label_smoothing"], ignore_index=data.PAD_ID)

    def loss_fn(model, batch):
        src, tgt_in, tgt_out = batch
        return criterion(model(data.trim_padding(src), tgt_in), tgt_out)

    batches = training.make_batches(
        (task.train_src, task.train_tgt_in, task.train_tgt_out),
        setting["batch_size"],
        bucket_by=data.sequence_lengths(task.train_src),
    )
    history = training.train(
        model,
        loss_fn,
        batches,
        optimizer,
        steps=steps,
        scheduler=scheduler,
        clip_grad_norm=setting["clip_grad_norm"],
        progress=False,
    )
    first, last = sum(history.loss[:5]) / 5, sum(history.loss[-5:]) / 5
    assert last < 0.7 * first, f"40 steps of the recipe should cut the loss clearly: {first:.2f} -> {last:.2f}"
    predicted = task.decode_predictions(
        decoding.greedy_decode(model, task.test_src, task.bos_id, task.eos_id, task.max_target_len)
    )
    accuracy = task.exact_match(predicted)
    assert 0.0 <= accuracy <= 1.0 and len(predicted) == 64
    assert all(len(p) <= task.max_target_len for p in predicted), "greedy decoding stops at max_len tokens"
