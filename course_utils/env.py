"""Device choice, seeding and thread control.

Every chapter starts with ``device = env.setup(seed=0)`` so that results are repeatable on the
learner's machine and the notebook says which device it runs on.

Seeds. A chapter names its seeds (``env.setup(seed=0)``, ``env.seed_everything(3)``,
``env.generator(1)``); ``$COURSE_SEED`` moves all of them at once, so that a whole chapter can be run
again with other random draws (``COURSE_SEED=2``) to see whether its conclusions depend on luck.
Unset or 0, every seed is the one the chapter wrote; ``COURSE_SEED=k`` turns seed ``s`` into
``s + 1000 * k``, a range no other value of k reaches. ``course robustness`` runs every chapter for
several values of k and tabulates what its checks measured (see :mod:`course_utils.checks`).
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = [
    "get_device",
    "seed_everything",
    "seed_for",
    "seed_offset",
    "generator",
    "set_threads",
    "setup",
    "has_cuda",
    "describe",
    "SEED_ENV",
]

SEED_ENV = "COURSE_SEED"
SEED_STRIDE = 1000  # COURSE_SEED=k moves every seed by k * SEED_STRIDE


def has_cuda() -> bool:
    """True when a CUDA GPU is usable (and not hidden by ``COURSE_DEVICE=cpu``)."""
    return os.environ.get("COURSE_DEVICE", "").lower() != "cpu" and torch.cuda.is_available()


def get_device(prefer: str | None = None) -> torch.device:
    """The device to compute on: ``prefer`` if given, else ``$COURSE_DEVICE``, else CUDA if present, else CPU.

    Apple's MPS is used only when asked for explicitly, because several chapters measure memory and
    MPS reports none.
    """
    choice = (prefer or os.environ.get("COURSE_DEVICE") or "").lower()
    if choice:
        if choice.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(f"device {choice!r} was requested but no CUDA GPU is available")
        return torch.device(choice)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seed_offset() -> int:
    """``$COURSE_SEED`` as an integer (0 when unset); a clear error for anything else."""
    raw = os.environ.get(SEED_ENV, "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{SEED_ENV}={raw!r} is not a whole number; unset it or use e.g. {SEED_ENV}=1") from None
    if value < 0:
        raise ValueError(f"{SEED_ENV}={value} is negative; use 0, 1, 2, ...")
    return value


def seed_for(seed: int) -> int:
    """The seed actually used for a chapter's seed ``seed``: itself, moved by ``$COURSE_SEED`` if set."""
    return int(seed) + SEED_STRIDE * seed_offset()


def generator(seed: int = 0) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed_for(seed)``: draws that no other cell disturbs."""
    return torch.Generator().manual_seed(seed_for(seed))


def seed_everything(seed: int = 0) -> int:
    """Seed Python, NumPy and PyTorch (CPU and every GPU) with ``seed_for(seed)``; returns that seed."""
    seed = seed_for(seed)
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return seed


def set_threads(n: int | None = None) -> int:
    """Limit PyTorch's intra-op threads (default: ``$COURSE_THREADS`` or all cores). Returns the count."""
    if n is None:
        n = int(os.environ.get("COURSE_THREADS", "0")) or _usable_cores()
    torch.set_num_threads(max(1, int(n)))
    return torch.get_num_threads()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may run on (containers, taskset)
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def describe(device: torch.device | None = None) -> str:
    """One line that says what the notebook runs on, for the top of every chapter."""
    device = device or get_device()
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"CPU, {torch.get_num_threads()} threads"
    return f"torch {torch.__version__} on {device.type} ({name})"


def _enable_inline_figures() -> None:
    """Inside Jupyter, draw the Figures that ``course_utils.plotting`` returns (they are built without
    pyplot, so without the inline backend a cell would only print ``<Figure ...>``)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":
        shell.run_line_magic("matplotlib", "inline")


def setup(seed: int = 0, threads: int | None = None, prefer: str | None = None) -> torch.device:
    """Seed everything, set the thread count, enable inline figures, print and return the device.

    ``threads=None`` uses every core (or ``$COURSE_THREADS``), as a learner's kernel does; a chapter
    that measures CPU time asks for ``threads=1`` itself and says why.
    """
    _enable_inline_figures()
    used = seed_everything(seed)
    set_threads(threads)
    device = get_device(prefer)
    moved = f" (seed {seed} moved by {SEED_ENV}={seed_offset()})" if seed_offset() else ""
    print(f"{describe(device)}; seed {used}{moved}")
    return device
