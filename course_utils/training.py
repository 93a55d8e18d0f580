r"""One training loop for every chapter, learning-rate schedules, and label smoothing.

The loop knows nothing about the task. A chapter passes a ``loss_fn(model, batch) -> loss`` that
turns one batch into a scalar loss, so the same :func:`train` fits all of them::

    # translation (Seq2SeqTransformer): batch = (src, tgt_in, tgt_out)
    def seq2seq_loss(model, batch):
        src, tgt_in, tgt_out = batch
        logits = model(src, tgt_in)                                    # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)

    # language modelling: batch = (inputs, targets);  classification: batch = (images, labels)
    def classification_loss(model, batch):
        images, labels = batch
        return F.cross_entropy(model(images), labels)

``loss_fn`` may also return ``(loss, {"accuracy": 0.93, ...})``; those numbers are recorded per step.
:func:`supervised_loss` builds the common case ``model(*inputs)`` vs the last tensor of the batch.

Schedules are ``LambdaLR`` factories; call ``scheduler.step()`` after every optimizer step (the loop
does it). A lambda multiplies the optimizer's base ``lr``: give the optimizer ``lr=1.0`` to get
:func:`noam_schedule`'s absolute values from the paper.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

__all__ = [
    "History",
    "train",
    "make_batches",
    "Batches",
    "to_device",
    "supervised_loss",
    "evaluate_accuracy",
    "evaluate_loss",
    "noam_lr",
    "noam_schedule",
    "warmup_cosine_multiplier",
    "warmup_cosine_schedule",
    "LabelSmoothingLoss",
]


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------


class Batches:
    """Mini-batches of aligned tensors; iterate once per epoch.

    With ``shuffle=True`` every pass uses a new permutation drawn from ``seed`` and the pass number,
    so a run is repeatable and yet each epoch sees a different order.
    """

    def __init__(
        self,
        tensors: Sequence[torch.Tensor],
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        bucket_by: torch.Tensor | None = None,
        bucket_pool: int = 32,
    ):
        tensors = tuple(tensors)
        if not tensors:
            raise ValueError("make_batches needs at least one tensor")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        sizes = {t.shape[0] for t in tensors}
        if len(sizes) != 1:
            raise ValueError(f"all tensors must have the same first dimension, got {[t.shape[0] for t in tensors]}")
        self.tensors = tensors
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.n = sizes.pop()
        if bucket_by is not None and tuple(bucket_by.shape) != (self.n,):
            raise ValueError(
                f"bucket_by must hold one length per example, shape ({self.n},), got {tuple(bucket_by.shape)}"
            )
        if bucket_pool < 1:
            raise ValueError(f"bucket_pool must be >= 1, got {bucket_pool}")
        self.bucket_by = bucket_by
        self.bucket_pool = bucket_pool
        self.passes = 0

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else math.ceil(self.n / self.batch_size)

    def __iter__(self):
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.passes)
            order = torch.randperm(self.n, generator=generator)
        else:
            order = torch.arange(self.n)
        self.passes += 1
        starts = list(range(0, len(self) * self.batch_size, self.batch_size))
        if self.bucket_by is not None:
            # Sort each pool of bucket_pool batches by length, so a batch holds examples of similar
            # length and trimming its padding saves work; then visit the batches in random order.
            pool = self.batch_size * self.bucket_pool
            order = torch.cat([chunk[self.bucket_by[chunk].argsort(stable=True)] for chunk in order.split(pool)])
            if self.shuffle:
                generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.passes + 7_919)
                starts = [starts[i] for i in torch.randperm(len(starts), generator=generator).tolist()]
        for start in starts:
            index = order[start : start + self.batch_size]
            yield tuple(t[index] for t in self.tensors)


def make_batches(
    tensors: Sequence[torch.Tensor],
    batch_size: int,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    bucket_by: torch.Tensor | None = None,
    bucket_pool: int = 32,
) -> Batches:
    """``make_batches((x, y), 64)`` -> an iterable of ``(x_batch, y_batch)`` tuples, reshuffled every epoch.

    ``bucket_by`` (one length per example) groups examples of similar length into the same batch;
    combine it with :func:`course_utils.data.trim_padding` in the loss to skip the padding columns.
    """
    return Batches(tensors, batch_size, shuffle, seed, drop_last, bucket_by, bucket_pool)


def to_device(batch: Any, device: torch.device | str | None) -> Any:
    """Move every tensor in a (nested) tuple/list/dict to ``device``."""
    if device is None:
        return batch
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


def supervised_loss(ignore_index: int = -100, label_smoothing: float = 0.0) -> Callable:
    """A ``loss_fn`` for batches ``(*inputs, targets)``: cross-entropy of ``model(*inputs)`` against
    ``targets``, over the last dimension of the logits (``(B, C)`` classification or ``(B, T, V)`` tokens).
    It also reports the accuracy on the batch."""

    def loss_fn(model: nn.Module, batch: Sequence[torch.Tensor]):
        *inputs, targets = batch
        logits = model(*inputs)
        flat_logits, flat_targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        loss = F.cross_entropy(flat_logits, flat_targets, ignore_index=ignore_index, label_smoothing=label_smoothing)
        counted = flat_targets != ignore_index
        correct = (flat_logits.argmax(-1) == flat_targets) & counted
        return loss, {"accuracy": correct.sum().item() / max(1, counted.sum().item())}

    return loss_fn


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


@dataclass
class History:
    """What happened during :func:`train`, one entry per optimizer step (and per evaluation)."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)  # L2 norm of all gradients, before clipping
    time_s: list[float] = field(default_factory=list)  # wall time since the start of train()
    train_metrics: dict[str, list[float]] = field(default_factory=dict)
    eval_step: list[int] = field(default_factory=list)
    eval_time_s: list[float] = field(default_factory=list)
    eval_metrics: dict[str, list[float]] = field(default_factory=dict)
    epochs: int = 0  # completed passes over the data
    stopped_by: str = ""  # "steps", "epochs" or "time budget"
    total_time_s: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.step)

    def last_eval(self) -> dict[str, float]:
        return {name: values[-1] for name, values in self.eval_metrics.items() if values}

    def summary(self) -> str:
        parts = [f"{self.steps} steps, {self.epochs} epochs, {self.total_time_s:.1f} s (stopped by {self.stopped_by})"]
        if self.loss:
            tail = self.loss[-min(20, len(self.loss)) :]
            parts.append(f"final loss {sum(tail) / len(tail):.4f}")
        parts += [f"{k} {v:.4f}" for k, v in self.last_eval().items()]
        return ", ".join(parts)


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _run_eval(model: nn.Module, eval_fn: Callable, history: History, step: int, clock: Callable[[], float]) -> dict:
    was_training = model.training
    model.eval()
    with torch.no_grad():
        result = eval_fn(model)
    model.train(was_training)
    if not isinstance(result, dict):
        result = {"eval": float(result)}
    history.eval_step.append(step)
    history.eval_time_s.append(clock())
    for name, value in result.items():
        history.eval_metrics.setdefault(name, []).append(float(value))
    return result


def train(
    model: nn.Module,
    loss_fn: Callable,
    batches: Iterable | Callable[[int], Iterable],
    optimizer: torch.optim.Optimizer,
    epochs: int | None = None,
    steps: int | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    clip_grad_norm: float | None = None,
    device: torch.device | str | None = None,
    progress: bool = True,
    time_budget_s: float | None = None,
    eval_fn: Callable[[nn.Module], dict | float] | None = None,
    eval_every: int | None = None,
    history: History | None = None,
) -> History:
    """Train ``model`` and return its :class:`History`.

    Args:
        loss_fn: ``loss_fn(model, batch) -> loss`` or ``-> (loss, {name: float})``.
        batches: an iterable of batches that can be iterated once per epoch (a list, a
            ``DataLoader``, :func:`make_batches`), or a function ``epoch -> iterable``.
        epochs, steps: stop after this many passes / optimizer steps (whichever comes first; at
            least one must be given).
        scheduler: stepped after every optimizer step.
        clip_grad_norm: rescale the gradients so their global L2 norm is at most this.
        device: move the model and each batch there (default: where the model already is).
        progress: show a progress bar with the running loss.
        time_budget_s: stop after the first step that ends past this wall-clock budget (time spent
            in evaluations counts; the final evaluation still runs after it).
        eval_fn: ``eval_fn(model) -> {name: value}`` (or one number), run in ``eval()`` mode without
            gradients every ``eval_every`` steps and once at the end.
        history: continue recording into an existing :class:`History` (to resume training).
    """
    _check_arguments(epochs, steps, time_budget_s, clip_grad_norm, eval_fn, eval_every)
    if device is not None:
        model.to(device)
    device = torch.device(device) if device is not None else _model_device(model)
    history = history if history is not None else History()
    step = history.step[-1] if history.step else 0
    first_step = step
    params = [p for p in model.parameters() if p.requires_grad]
    max_norm = clip_grad_norm if clip_grad_norm is not None else float("inf")
    bar = _progress_bar(steps if steps is not None else _steps_in(epochs, batches)) if progress else None

    start = time.perf_counter()
    resumed_at = history.total_time_s  # a resumed run continues the clock of the earlier ones

    def clock() -> float:
        return resumed_at + time.perf_counter() - start

    model.train()
    epoch = 0
    stopped_by = ""
    try:
        while not stopped_by:
            if epochs is not None and epoch >= epochs:
                stopped_by = "epochs"
                break
            seen_any = False
            for batch in batches(epoch) if callable(batches) else batches:
                seen_any = True
                loss, metrics = _checked_loss(loss_fn(model, to_device(batch, device)), step + 1)
                grad_norm, lr = _optimizer_step(loss, params, optimizer, scheduler, max_norm)
                step += 1
                _record_step(history, step, loss.item(), lr, grad_norm, clock(), metrics)
                if bar is not None:
                    bar.update(1)
                    if step % 10 == 0 or step == first_step + 1:
                        bar.set_postfix(loss=f"{loss.item():.4f}", lr=f"{lr:.2e}")
                if eval_fn is not None and eval_every is not None and step % eval_every == 0:
                    result = _run_eval(model, eval_fn, history, step, clock)
                    if bar is not None:
                        bar.write(f"step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in result.items()))
                stopped_by = _stop_reason(step - first_step, steps, time.perf_counter() - start, time_budget_s)
                if stopped_by:
                    break
            else:
                epoch += 1
                history.epochs += 1
            if not seen_any:
                raise ValueError(
                    "the batches yielded nothing: is the dataset empty or batch_size too large with drop_last=True?"
                )
    finally:
        if bar is not None:
            bar.close()
    if eval_fn is not None and (not history.eval_step or history.eval_step[-1] != step):
        _run_eval(model, eval_fn, history, step, clock)
    history.stopped_by = stopped_by
    history.total_time_s += time.perf_counter() - start
    return history


# The steps of train(), in the order it takes them.


def _check_arguments(epochs, steps, time_budget_s, clip_grad_norm, eval_fn, eval_every) -> None:
    if epochs is None and steps is None and time_budget_s is None:
        raise ValueError("give at least one of epochs, steps or time_budget_s, or the loop never ends")
    for name, value in (("epochs", epochs), ("steps", steps), ("eval_every", eval_every)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if time_budget_s is not None and time_budget_s <= 0:
        raise ValueError(f"time_budget_s must be positive, got {time_budget_s}")
    if clip_grad_norm is not None and clip_grad_norm <= 0:
        raise ValueError(f"clip_grad_norm must be positive, got {clip_grad_norm}")
    if eval_every is not None and eval_fn is None:
        raise ValueError("eval_every was given without an eval_fn to run")


def _steps_in(epochs: int | None, batches) -> int | None:
    """The steps of ``epochs`` passes where the batches can be counted (the progress bar's total), else None."""
    return epochs * len(batches) if epochs is not None and hasattr(batches, "__len__") else None


def _progress_bar(total: int | None):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="training", unit="step", leave=True)


def _checked_loss(out, step: int) -> tuple[torch.Tensor, dict]:
    """``(loss, metrics)`` from what ``loss_fn`` returned, or a clear error: not a scalar tensor, or not finite."""
    loss, metrics = out if isinstance(out, tuple) else (out, {})
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        got = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise TypeError(f"loss_fn must return a scalar tensor (or (loss, metrics)), got {got}")
    if not loss.is_meta and not torch.isfinite(loss):  # a meta tensor (shapes only) has no value
        raise FloatingPointError(
            f"the loss became {loss.item()} at step {step}: lower the learning rate, clip "
            "gradients (clip_grad_norm=1.0), or look for log(0) in the loss"
        )
    return loss, metrics


def _optimizer_step(loss, params, optimizer, scheduler, max_norm: float) -> tuple[torch.Tensor, float]:
    """Backward, clip, step (and the scheduler's): the gradients' norm before clipping, and the step's rate."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(params, max_norm) if params else torch.tensor(0.0)
    lr = optimizer.param_groups[0]["lr"]
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return grad_norm, lr


def _record_step(history: History, step: int, loss: float, lr: float, grad_norm, seconds: float, metrics) -> None:
    history.step.append(step)
    history.loss.append(loss)
    history.lr.append(lr)
    history.grad_norm.append(float(grad_norm))
    history.time_s.append(seconds)
    for name, value in metrics.items():
        history.train_metrics.setdefault(name, []).append(float(value))


def _stop_reason(steps_taken: int, steps: int | None, seconds: float, time_budget_s: float | None) -> str:
    """Why training stops after this step ("steps", "time budget"), or "" to go on."""
    if steps is not None and steps_taken >= steps:
        return "steps"
    if time_budget_s is not None and seconds >= time_budget_s:
        return "time budget"
    return ""


# --------------------------------------------------------------------------------------------
# Evaluation helpers
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module, batches: Iterable, ignore_index: int = -100, device: torch.device | str | None = None
) -> float:
    """Accuracy of ``model(*inputs).argmax(-1)`` against the last tensor of each batch
    ``(*inputs, targets)``; positions whose target is ``ignore_index`` do not count."""
    was_training = model.training
    model.eval()
    device = torch.device(device) if device is not None else _model_device(model)
    correct = counted = 0
    for batch in batches:
        *inputs, targets = to_device(batch, device)
        predictions = model(*inputs).argmax(-1)
        if predictions.shape != targets.shape:
            raise ValueError(
                f"predictions {tuple(predictions.shape)} and targets {tuple(targets.shape)} differ in shape"
            )
        keep = targets != ignore_index
        correct += ((predictions == targets) & keep).sum().item()
        counted += keep.sum().item()
    model.train(was_training)
    if counted == 0:
        raise ValueError("no target to score: every target equals ignore_index or the batches are empty")
    return correct / counted


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, loss_fn: Callable, batches: Iterable, device: torch.device | str | None = None
) -> float:
    """Mean of ``loss_fn(model, batch)`` over the batches (each batch weighted equally), in eval mode."""
    was_training = model.training
    model.eval()
    device = torch.device(device) if device is not None else _model_device(model)
    losses = []
    for batch in batches:
        out = loss_fn(model, to_device(batch, device))
        losses.append((out[0] if isinstance(out, tuple) else out).item())
    model.train(was_training)
    if not losses:
        raise ValueError("evaluate_loss got no batches")
    return sum(losses) / len(losses)


# --------------------------------------------------------------------------------------------
# Learning-rate schedules
# --------------------------------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    r"""The schedule of "Attention Is All You Need" (section 5.3), with steps counted from 1:

    ``lr = factor * d_model^{-0.5} * min(step^{-0.5}, step * warmup^{-1.5})``

    It rises linearly for ``warmup`` steps, peaks at ``step = warmup`` with ``(d_model * warmup)^{-0.5}``,
    then decays as ``1 / sqrt(step)``.
    """
    if step < 1:
        raise ValueError(f"the Noam schedule counts steps from 1, got step={step}")
    if d_model < 1 or warmup < 1:
        raise ValueError(f"d_model and warmup must be >= 1, got d_model={d_model}, warmup={warmup}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_schedule(optimizer: torch.optim.Optimizer, d_model: int, warmup: int = 4000, factor: float = 1.0) -> LambdaLR:
    """:func:`noam_lr` as a scheduler. Give the optimizer ``lr=1.0`` (the lambda multiplies it)
    and, as in the paper, ``Adam(betas=(0.9, 0.98), eps=1e-9)``. The first optimizer step uses step 1."""
    noam_lr(1, d_model, warmup)  # validate the arguments now rather than at the first step
    return LambdaLR(optimizer, lambda index: noam_lr(index + 1, d_model, warmup, factor))


def warmup_cosine_multiplier(index: int, warmup: int, total: int, min_ratio: float = 0.0) -> float:
    """Linear warm-up over ``warmup`` steps to 1, then half a cosine down to ``min_ratio`` at ``index = total``
    (and ``min_ratio`` after). ``index`` counts optimizer steps from 0, like ``LambdaLR``."""
    if index < warmup:
        return (index + 1) / warmup
    progress = min(1.0, (index - warmup) / max(1, total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_cosine_schedule(
    optimizer: torch.optim.Optimizer, warmup: int, total: int, min_ratio: float = 0.0
) -> LambdaLR:
    """Warm-up then cosine decay of the optimizer's base lr (the GPT/BERT/ViT recipe)."""
    if warmup < 0 or total < 1 or warmup > total:
        raise ValueError(f"need 0 <= warmup <= total and total >= 1, got warmup={warmup}, total={total}")
    if not 0.0 <= min_ratio <= 1.0:
        raise ValueError(f"min_ratio must be in [0, 1], got {min_ratio}")
    return LambdaLR(optimizer, lambda index: warmup_cosine_multiplier(index, warmup, total, min_ratio))


# --------------------------------------------------------------------------------------------
# Label smoothing
# --------------------------------------------------------------------------------------------


class LabelSmoothingLoss(nn.Module):
    r"""Cross-entropy against a smoothed target (Szegedy et al. 2016; the Transformer uses 0.1).

    The target distribution puts ``1 - smoothing`` on the true class and spreads ``smoothing``
    uniformly over the vocabulary, ``q = (1 - eps) onehot(y) + eps / V`` (PyTorch's convention), or
    over the vocabulary minus the classes in ``exclude`` (the padding id, say), which get exactly 0.

    - ``form="cross_entropy"`` returns ``H(q, p) = -sum_v q_v log p_v``; with ``exclude=()`` it equals
      ``F.cross_entropy(logits, y, label_smoothing=eps, ignore_index=...)``.
    - ``form="kl"`` returns ``KL(q || p) = H(q, p) - H(q)``: the same gradient, but 0 for a perfect
      model, which makes the number easier to read. (The Annotated Transformer's form.)

    Zero entries of ``q`` contribute exactly 0, even where ``log p = -inf`` (a logit masked to
    ``-inf``): the naive ``q * (q.log() - log_p)`` gives ``0 * inf = nan`` there. Positions whose
    target is ``ignore_index`` are skipped; the mean is over the others (0.0 if there are none).

    ``forward(logits (..., V), target (...)) -> scalar``.
    """

    def __init__(
        self, smoothing: float = 0.1, ignore_index: int = -100, exclude: Sequence[int] = (), form: str = "cross_entropy"
    ):
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        if form not in ("cross_entropy", "kl"):
            raise ValueError(f"form must be 'cross_entropy' or 'kl', got {form!r}")
        self.smoothing = smoothing
        self.ignore_index = ignore_index
        self.exclude = tuple(int(i) for i in exclude)
        self.form = form

    def target_distribution(
        self, target: torch.Tensor, num_classes: int, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """``(N,)`` class ids -> ``(N, V)`` smoothed distribution ``q`` (rows sum to 1)."""
        allowed = torch.ones(num_classes, dtype=torch.bool, device=target.device)
        if self.exclude:
            bad = [i for i in self.exclude if not 0 <= i < num_classes]
            if bad:
                raise ValueError(f"exclude ids {bad} are outside the vocabulary [0, {num_classes})")
            allowed[list(self.exclude)] = False
        if (~allowed[target]).any():
            raise ValueError("a target id is in `exclude`; mark such positions with ignore_index instead")
        spread = self.smoothing / int(allowed.sum())
        q = allowed.to(dtype).expand(target.shape[0], num_classes) * spread  # (N, V)
        true_mass = torch.full((target.shape[0], 1), 1.0 - self.smoothing, dtype=dtype, device=target.device)
        return q.scatter_add(1, target[:, None], true_mass)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.shape[:-1] != target.shape:
            raise ValueError(
                f"logits (..., V) and target (...) must agree: got logits {tuple(logits.shape)} and target "
                f"{tuple(target.shape)}"
            )
        num_classes = logits.shape[-1]
        logits, target = logits.reshape(-1, num_classes), target.reshape(-1)
        keep = target != self.ignore_index
        if not keep.any():
            return logits.sum() * 0.0  # keeps the graph, so backward() still works
        logits, target = logits[keep], target[keep]
        if not target.is_meta and (target.min() < 0 or target.max() >= num_classes):  # meta: shapes only
            raise ValueError(f"target ids must be in [0, {num_classes}) or ignore_index={self.ignore_index}")
        if logits.dtype not in (torch.float32, torch.float64):
            logits = logits.float()  # half-precision log-softmax loses too much
        log_p = logits.log_softmax(-1)  # (N, V)
        q = self.target_distribution(target, num_classes, log_p.dtype)
        # Zero the log-probabilities where q is 0 before multiplying: 0 * (-inf) would be nan.
        cross_entropy = -(q * log_p.masked_fill(q == 0, 0.0)).sum(-1)  # (N,)
        if self.form == "kl":
            cross_entropy = cross_entropy - (-torch.special.xlogy(q, q).sum(-1))  # H(q, p) - H(q)
        return cross_entropy.mean()
