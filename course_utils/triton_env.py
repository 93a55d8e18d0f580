"""Triton for a notebook: its CPU interpreter where there is no CUDA GPU, its caches in a private folder.

Import ``triton`` and ``tl`` from here instead of importing ``triton`` first::

    from course_utils.triton_env import DEVICE, INTERPRETED, TRITON_MISSING, tl, triton

Triton decides between compiling a kernel and interpreting it (``TRITON_INTERPRET=1``) when the kernel is
decorated with ``@triton.jit``, and it decorates the kernels of its own library (``tl.max``, ``tl.sum``) when
``triton.language`` is imported. So the choice must be made before the first import of ``triton`` in the
process: this module makes it (the interpreter unless a CUDA GPU is present and ``TRITON_INTERPRET`` says
otherwise), points Triton's home and cache at a fresh temporary folder of this process (never a shared
one), then imports Triton.

Under the interpreter it also makes a launch leave ``triton.language`` exactly as it found it, and launches
a small kernel once (``_make_interpreter_patching_exact``, ``_warm_up_interpreter``): the grader's kernel
guard checks that the libraries its tests rely on are unchanged after a learner's code ran.

Without Triton (macOS and Windows have no ``triton`` package; a broken install fails to import),
``TRITON_MISSING`` says why, and ``triton`` and ``tl`` are stand-ins with which kernels can still be defined:
``@triton.jit`` returns an object whose launch ``kernel[grid](...)`` raises an error that says what is missing.
"""

from __future__ import annotations

import os
import sys
import tempfile
import types

import torch

__all__ = ["DEVICE", "INTERPRETED", "TRITON_MISSING", "tl", "triton"]


def _make_interpreter_patching_exact() -> bool:
    """Make a kernel launch under Triton's interpreter leave ``triton.language`` as it found it.

    While a kernel runs, the interpreter swaps the functions of ``triton.language`` and the methods of its
    classes for NumPy versions, and puts them back afterwards. Up to Triton 3.9 it puts back what ``getattr``
    found rather than what was there (a class's inherited method is then set on the class itself, a
    ``staticmethod`` becomes its bare function), and a jit function of its own library (``tl.max``,
    ``tl.sum``) called inside a kernel leaves its swaps in place, new ones at every call. The kernels compute
    the same either way; but a grader that checks that the libraries its tests rely on are unchanged after the
    learner's code ran (course_grader/guard/kernel_guard.py) sees every launch change them. Here the
    interpreter records what a namespace itself holds and puts exactly that back, also after a library jit
    function. Returns False where this Triton's interpreter is laid out differently (nothing is changed)."""
    try:
        from triton.runtime import interpreter
    except Exception:
        return False
    scope_class = getattr(interpreter, "_LangPatchScope", None)
    function_class = getattr(interpreter, "InterpretedFunction", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    if scope_class is None or function_class is None or patch_lang is None:
        return False
    missing = object()

    def set_attr(self, obj, name, value):
        self._changes.append((obj, name, vars(obj).get(name, missing)))  # what obj itself holds, not getattr
        setattr(obj, name, value)

    def restore(self):
        while self._changes:
            obj, name, original = self._changes.pop()
            if original is not missing:
                setattr(obj, name, original)
            elif name in vars(obj):
                delattr(obj, name)

    call_in_kernel = function_class.__call__

    def call_and_restore(self, *args, **kwargs):  # a jit function called inside a kernel (tl.max, tl.sum)
        scope = patch_lang(self.fn)
        try:
            return call_in_kernel(self, *args, **kwargs)
        finally:
            scope.restore()

    scope_class.set_attr, scope_class.restore = set_attr, restore
    function_class.__call__ = call_and_restore
    return True


def _warm_up_interpreter() -> None:
    """Launch a small kernel once, in float32 and in bfloat16: what the interpreter and PyTorch import the
    first time a kernel runs is imported now, with this module, rather than in the middle of a notebook's
    first launch (a grader's import window puts triton.language back as it was while the kernel has it
    swapped)."""
    import triton
    import triton.language as tl

    @triton.jit
    def warm_up(X, Y, N: tl.constexpr):
        rows = tl.arange(0, N)
        x = tl.load(X + rows[:, None] * N + rows[None, :], mask=rows[:, None] < N, other=0.0).to(tl.float32)
        total = tl.zeros([N, N], dtype=tl.float32)
        for _ in range(0, tl.minimum(N, 2 * N), N):
            scores = tl.dot(x, tl.trans(x), input_precision="ieee")
            weights = tl.exp(scores - tl.max(scores, axis=1)[:, None])
            total += tl.where(scores > float("-inf"), weights / tl.sum(weights, axis=1)[:, None], 0.0)
        tl.store(Y + rows[:, None] * N + rows[None, :], total.to(Y.dtype.element_ty), mask=rows[:, None] < N)
        tl.store(Y + rows, tl.log(tl.sum(total, axis=1)).to(Y.dtype.element_ty))

    for dtype in (torch.float32, torch.bfloat16):
        warm_up[(1,)](torch.ones(16, 16, dtype=dtype), torch.empty(16, 16, dtype=dtype), N=16)


_imported_before = "triton" in sys.modules
os.environ.setdefault("TRITON_INTERPRET", "0" if torch.cuda.is_available() else "1")
if "TRITON_HOME" not in os.environ:
    os.environ["TRITON_HOME"] = tempfile.mkdtemp(prefix="triton_home_")
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(os.environ["TRITON_HOME"], ".triton", "cache"))

INTERPRETED: bool = os.environ["TRITON_INTERPRET"] == "1"
DEVICE = torch.device("cpu" if INTERPRETED else "cuda")  # where the kernels run

TRITON_MISSING: str | None
try:
    import triton
    import triton.language as tl

    TRITON_MISSING = None
    if hasattr(triton, "knobs"):
        # Triton >= 3.4 reads its settings through triton.knobs at every use; set there, they hold even where
        # the process's environment is replaced later (a grader's kernel, started ahead, gets a fresh one).
        triton.knobs.runtime.interpret = INTERPRETED
        triton.knobs.cache.home_dir = os.environ["TRITON_HOME"]
        triton.knobs.cache.dir = os.environ["TRITON_CACHE_DIR"]
    if INTERPRETED and _make_interpreter_patching_exact():
        _warm_up_interpreter()
except Exception as error:  # no triton package (macOS, Windows), or an install that fails to import
    TRITON_MISSING = f"{type(error).__name__}: {error}"

    class _KernelWithoutTriton:
        """What ``@triton.jit`` gives without Triton: the kernel can be defined, not launched."""

        def __init__(self, function):
            self.fn = function

        def __getitem__(self, grid):
            raise RuntimeError(f"Triton is not available here ({TRITON_MISSING}); install it with `pip install triton`")

    triton = types.SimpleNamespace(
        jit=_KernelWithoutTriton,
        cdiv=lambda a, b: -(-a // b),
        next_power_of_2=lambda n: 1 << (n - 1).bit_length(),
        __version__=None,
    )
    tl = types.SimpleNamespace(constexpr=int)

if TRITON_MISSING is None and INTERPRETED and _imported_before:
    _library_kernel = getattr(getattr(tl, "standard", None), "max", None)
    if _library_kernel is not None and type(_library_kernel).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "triton was imported before TRITON_INTERPRET=1 was set, so its own kernels (tl.max, tl.sum) would "
            "be compiled for a GPU: restart the kernel and import course_utils.triton_env before anything else"
        )
