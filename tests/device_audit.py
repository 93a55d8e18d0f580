"""Running the course's code as if the CPU were a second device: device mix-ups found without a GPU.

On a CUDA machine a tensor made on the CPU (``torch.tensor([64])``, ``torch.arange(n)``) that meets a
tensor on the GPU is an error; on a CPU-only machine the two are the same device and nothing shows.
PyTorch's ``meta`` device plays the GPU here: tensors on it have shapes and dtypes but no data, and
most operations refuse to mix them with CPU tensors, as CUDA does. Two things make it a faithful
stand-in for a whole chapter, which :class:`AcceleratorAudit` adds:

- **CUDA's rule, checked on every operation.** Some meta kernels accept a CPU operand that CUDA
  refuses (``meta @ cpu``, ``index_select`` with a CPU index, an embedding with CPU ids). The audit
  refuses any operation that gets both a meta tensor and a CPU tensor with at least one dimension,
  except where CUDA itself accepts it: indexing with CPU indices, and explicit copies (``.to``).
- **Values that reach Python are stand-ins.** A meta tensor has no data, so ``.item()``, ``bool()``
  and ``.cpu()`` would stop the run at the first loss printed. The audit answers them with a
  placeholder (``1`` for a number, ``False`` for a truth value, zeros for a copy to the CPU), so the
  code goes on and its later device handling is checked too. The values are meaningless: checks on
  them fail, a loop that waits for a value may never end (each cell has a deadline), and a cell that
  stops for any reason other than a device mix-up only ends the audit of that cell.

Training is cut to a few optimizer steps (:func:`course_utils.training.train` with ``steps`` at most
``TRAINING_STEPS``): every step moves the same kinds of tensors, and a thousand steps on the meta
device, each operation passing through the audit in Python, would take minutes.

``python tests/device_audit.py NOTEBOOK`` runs one notebook's code cells this way, with
``COURSE_DEVICE=meta`` (so ``env.setup`` and ``env.get_device`` return the meta device, as they return
CUDA on a GPU machine), and prints one JSON object: per cell, ``ok``, ``device-mix`` (with the message)
or ``other`` (the exception type). ``tests/test_devices.py`` runs it for every chapter.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.fx.experimental._config  # noqa: F401  (the setting used in AcceleratorAudit.__enter__)
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# Operations for which CUDA accepts CPU operands beside device tensors: advanced indexing moves CPU
# indices itself, and copies between devices are what `.to()`, `.cpu()` and `copy_` are for.
MAY_MIX = {
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._index_put_impl_.default,
    aten._to_copy.default,
    aten.copy_.default,
    aten.lift_fresh.default,
    aten.set_.source_Tensor,
}

# What PyTorch says when devices are mixed (CUDA and meta word it differently).
DEVICE_MIX_WORDS = (
    "is not on the expected device",
    "Expected all tensors to be on the same device",
    "found at least two devices",
    "must be on the same device",
    "device mix-up",
)


def is_device_mix(error: BaseException) -> bool:
    return any(words in str(error) for words in DEVICE_MIX_WORDS)


class AuditDeadline(Exception):
    """A cell ran past its share of the audit's time (a loop waiting for a value a stand-in never gives)."""


class AcceleratorAudit(TorchDispatchMode):
    """While active, the meta device behaves like a GPU toward the CPU (see the module's docstring)."""

    def __init__(self, seconds: float):
        super().__init__()
        self.deadline = time.monotonic() + seconds

    def __enter__(self):
        # Boolean indexing (`x[mask]`) needs the number of True entries, which meta tensors do not have:
        # PyTorch's own stand-in counts every entry as True.
        self._nonzero_setting = torch.fx.experimental._config.meta_nonzero_assume_all_nonzero
        torch.fx.experimental._config.meta_nonzero_assume_all_nonzero = True
        return super().__enter__()

    def __exit__(self, *exc):
        torch.fx.experimental._config.meta_nonzero_assume_all_nonzero = self._nonzero_setting
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if time.monotonic() > self.deadline:
            raise AuditDeadline(f"the cell ran past its deadline at {func}")
        kwargs = kwargs or {}
        tensors = _tensors_in(args, kwargs)
        on_meta = [t for t in tensors if t.is_meta]
        if on_meta:
            if func is aten._local_scalar_dense.default:  # .item(), bool(), int(): a stand-in value
                # False: `if bad.any(): raise` lets the code go on, and `while mask.any():` ends.
                return False if on_meta[0].dtype == torch.bool else 1
            if func is aten._to_copy.default and _target_is_cpu(kwargs):  # .cpu(), .to("cpu"), .numpy() paths
                source = args[0]
                return torch.zeros(source.shape, dtype=kwargs.get("dtype") or source.dtype)
            if func is aten.copy_.default and not args[0].is_meta:  # cpu_tensor.copy_(meta_tensor)
                return args[0].zero_()
            if func not in MAY_MIX:
                host = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
                if host:
                    raise RuntimeError(
                        f"device mix-up in {func}: a tensor of shape {tuple(host[0].shape)} on the CPU meets one on "
                        f"the device (shape {tuple(on_meta[0].shape)}); on a GPU this is 'Expected all tensors to be "
                        "on the same device'"
                    )
        return func(*args, **kwargs)


def _tensors_in(args, kwargs) -> list:
    # Operands are tensors, or lists of tensors (cat, stack, index): one level deep is enough, and
    # cheaper than a full tree walk on every operation of a chapter.
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value if isinstance(item, torch.Tensor))
    return found


def _target_is_cpu(kwargs) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "cpu"


CELL_SECONDS = 10.0  # a cell's deadline: a training loop of the chapter's own is audited for that long
TRAINING_STEPS = 3


def _short_training() -> None:
    from course_utils import training

    full = training.train

    def train(*args, steps=None, **kwargs):
        return full(*args, steps=TRAINING_STEPS if steps is None else min(steps, TRAINING_STEPS), **kwargs)

    train.__doc__ = full.__doc__
    training.train = train


def audit_notebook(path: Path, budget_s: float) -> dict:
    """Run the notebook's code cells under the audit; one record per code cell."""
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell

    os.environ["COURSE_DEVICE"] = "meta"
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.chdir(path.parent)
    sys.path.insert(0, str(path.parent))
    shell = InteractiveShell.instance()
    _short_training()
    notebook = nbformat.read(path, as_version=4)
    records, started = [], time.monotonic()
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if time.monotonic() - started > budget_s:
            records.append({"cell": index, "status": "not-run", "detail": f"time budget of {budget_s:.0f} s spent"})
            continue
        source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("%matplotlib"))
        cell_started = time.monotonic()
        with AcceleratorAudit(seconds=CELL_SECONDS):
            result = shell.run_cell(source, silent=True, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        record = {"cell": index, "status": "ok", "seconds": round(time.monotonic() - cell_started, 2)}
        if error is not None and is_device_mix(error):
            record.update(status="device-mix", detail=str(error).splitlines()[0][:300])
        elif error is not None:
            message = str(error).splitlines()[0][:200] if str(error) else ""
            record.update(status="other", detail=f"{type(error).__name__}: {message}")
        records.append(record)
    return {"notebook": path.name, "seconds": round(time.monotonic() - started, 1), "cells": records}


if __name__ == "__main__":
    notebook_path = Path(sys.argv[1]).resolve()
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    report = audit_notebook(notebook_path, budget)
    sys.stdout.flush()
    print("AUDIT " + json.dumps(report))
