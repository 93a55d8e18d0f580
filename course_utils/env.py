"""Device choice, seeding and thread control.

Every chapter starts with ``device = env.setup(seed=0)`` so that results are repeatable on the
learner's machine and the notebook says which device it runs on.
"""
from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["get_device", "seed_everything", "set_threads", "setup", "has_cuda", "describe"]


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


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (CPU and every GPU)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def set_threads(n: int | None = None) -> int:
    """Limit PyTorch's intra-op threads (default: ``$COURSE_THREADS`` or all cores). Returns the count."""
    if n is None:
        n = int(os.environ.get("COURSE_THREADS", "0")) or (os.cpu_count() or 1)
    torch.set_num_threads(max(1, int(n)))
    return torch.get_num_threads()


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
    """Seed everything, set the thread count, enable inline figures, print and return the device."""
    _enable_inline_figures()
    seed_everything(seed)
    set_threads(threads)
    device = get_device(prefer)
    print(describe(device))
    return device
