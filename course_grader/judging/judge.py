"""The judge: hidden tests decided in the grader's process, out of the learner's reach.

The hidden part of every test cell never enters the learner's kernel (``metadata["course_grading"]["judge"]``
is "outside", the only value and the default). After the visible part has run there (for the
learner, as in the lab), the grader runs the hidden part here, in a fresh namespace of its own:

    grader process (trusted)                          learner's kernel (confined, sandboxed)
    ------------------------                          ---------------------------------------
    hidden test source, its seeds, its                the learner's functions, classes, objects
    reference modules and values, its                 kernel guard: answers the grader's messages
    comparisons, its verdict                          (kernel_calls.respond), outside any cell
           |  names the test reads (EncoderLayer, self_attention, model, ...)
           |--- describe([...]) -------------------->  function | class | data | object
           |<-- data (.npy/JSON) or a handle --------  (objects stay here, held under a handle)
           |  calls, attributes, methods, items of what the kernel holds, on inputs the test chose
           |--- call / get / items / vjp ----------->  learner code runs here (recorded by name
           |    (handles + data, autograd on or off)     when the exercise forbids something)
           |<-- results as data, new handles, -------  never pickle, never code
           |    gradients, names of what ran
           |--- release ---------------------------->  the test's objects forgotten
    the test's asserts decide; its message (only) goes
    into the notebook's output, as an error of the cell

A learner object seen from here is a `Remote`: calling it sends the arguments as data and returns the
answer as data (NumPy arrays stay arrays, PyTorch tensors stay tensors) or as another Remote; a call
writes back into the judge's arguments what it did to the kernel's copies, so that a test can still see
whether the function changed its inputs (a method of a learner's module, ``model.train()``, is looked up and
called in one question: `ModuleMethod`). Reference modules are the judge's own: a test sets the learner's
weights from them (`.copy_` on a held parameter, `load_state_dict`), sends inputs, and compares outputs
here. Classes are known by their names only (`learner_class`, `learner_type`, `is_instance`), gradients
come from `vjp`, and what the learner's code runs from `recording()`. Values the kernel could not describe
are `NotJudgeable`: a test that uses them fails with that reason.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import functools
import io
import json
import sys

from ..guard import kernel_calls
from ..guard.kernel_calls import decode, encode


class JudgeError(Exception):
    """The kernel did not answer as the channel expects (it timed out, or printed no answer)."""


class JudgeTimeout(JudgeError):
    """A call of the learner's code ran past the cell's time limit (the test fails; the grader counts it)."""


class NotJudgeable:
    """A learner value the kernel could not describe: any use of it in a test fails with the reason."""

    def __init__(self, name: str, why: str):
        self._name, self._why = name, why

    def __getattr__(self, attribute):
        raise TypeError(f"{self._name} cannot be checked by the grader: it is {self._why}")

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self._name} cannot be checked by the grader: it is {self._why}")


@dataclasses.dataclass(frozen=True)
class LearnerType:
    """A learner class as the judge knows it: names only, never the class."""

    name: str
    module: str
    mro: tuple[tuple[str, str], ...]

    @classmethod
    def from_info(cls, info: dict) -> "LearnerType":
        return cls(str(info["name"]), str(info["module"]), tuple((str(m), str(n)) for m, n in info["mro"]))


class Remote:
    """A learner object that stays in the learner's kernel (a function, a class, a module, a tensor reached
    as an attribute): calling it, its attributes, its items and its methods are questions to the kernel,
    whose answers come back as data or as another Remote. Nothing of the object ever runs here."""

    __slots__ = ("_judge", "_target", "_type", "_class", "__name__")

    def __init__(self, judge: "Judge", target: dict, type_info: dict | None = None, class_info: dict | None = None):
        object.__setattr__(self, "_judge", judge)
        object.__setattr__(self, "_target", target)  # {"name": ...} in the notebook, or {"handle": ...}
        object.__setattr__(self, "_type", LearnerType.from_info(type_info) if type_info else None)
        object.__setattr__(self, "_class", LearnerType.from_info(class_info) if class_info else None)
        object.__setattr__(
            self, "__name__", target.get("name") or (class_info or type_info or {}).get("name", "object")
        )

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__") or "handle" not in self._target:
            raise AttributeError(f"{self.__name__}.{name} is not asked of the notebook's kernel")
        if name in _module_methods(self._type):
            return ModuleMethod(self, name)
        return self._attribute(name)

    def _attribute(self, name: str):
        answer = self._judge.ask("get", json.dumps({**self._target, "attribute": name}))
        return self._judge.value(self._judge.answered(answer, f"{self.__name__}.{name}")["result"])

    def __setattr__(self, name, value):
        raise TypeError(f"the grader does not set attributes of {self.__name__} (use its methods)")

    def __call__(self, *args, **kwargs):
        return self._judge.call(self, None, args, kwargs)

    def __iter__(self):
        if "handle" not in self._target:
            raise TypeError(f"{self.__name__} is a function, not a collection")
        answer = self._judge.answered(self._judge.ask("items", json.dumps(self._target)), self.__name__)
        return iter([self._judge.value(item) for item in answer["result"]])

    def __len__(self) -> int:
        return self._judge.call(self, "__len__", (), {})

    def __getitem__(self, key):
        return self._judge.call(self, "__getitem__", (key,), {})

    def __repr__(self) -> str:
        return f"<{self.__name__} in the notebook's kernel>"


def _module_methods(learner: LearnerType | None) -> frozenset:
    """The public methods of PyTorch's ``nn.Module`` where ``learner`` is a module class, else none."""
    if learner is None or ("torch.nn.modules.module", "Module") not in learner.mro:
        return frozenset()
    return _public_module_methods()


@functools.cache
def _public_module_methods() -> frozenset:
    from torch import nn

    return frozenset(name for name, value in vars(nn.Module).items() if callable(value) and not name.startswith("_"))


class ModuleMethod:
    """A method of a learner's module (``model.train``, ``model.load_state_dict``): called, it is looked up
    and called in the kernel in one question, where an attribute and then a call would take two (a test
    calls such methods hundreds of times). Used in any other way, it is asked for as an attribute."""

    __slots__ = ("_owner", "_name", "__name__")

    def __init__(self, owner: Remote, name: str):
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "__name__", f"{owner.__name__}.{name}")

    def __call__(self, *args, **kwargs):
        return self._owner._judge.call(self._owner, self._name, args, kwargs)

    def resolved(self):
        """The method as the kernel holds it (a Remote), for any use other than a call."""
        return self._owner._attribute(self._name)

    def __getattr__(self, name: str):
        return getattr(self.resolved(), name)

    def __repr__(self) -> str:
        return f"<{self.__name__} in the notebook's kernel>"


def learner_type(value) -> LearnerType:
    """The class of a learner object (Remote) by its names; of one of ours, the same from the class."""
    if isinstance(value, Remote):
        if value._type is None:
            raise TypeError(f"{value.__name__} is a function of the notebook")
        return value._type
    cls = type(value)
    return LearnerType(cls.__qualname__, cls.__module__, tuple((c.__module__, c.__qualname__) for c in cls.__mro__))


def learner_class(value: Remote) -> LearnerType:
    """What a learner's class (a Remote the notebook defined with ``class``) is: its names, its bases'."""
    if not isinstance(value, Remote) or value._class is None:
        raise TypeError(f"{getattr(value, '__name__', value)!r} is not a class of the notebook")
    return value._class


def is_instance(value, cls: Remote) -> bool:
    """isinstance for a learner object and a learner class, by the names of the class and its bases."""
    wanted = learner_class(cls)
    return (wanted.module, wanted.name) in learner_type(value).mro


def fetch(value):
    """A tensor held in the kernel (a parameter reached as an attribute), as data here."""
    if not isinstance(value, Remote):
        return value
    answer = value._judge.answered(value._judge.ask("fetch", json.dumps(value._target)), value.__name__)
    return value._judge.value(answer["result"])


class Recorded(set):
    """Names of what ran in the learner's calls, and ``largest_output``: the number of elements of the largest
    tensor any operator returned (a naive attention makes its n x n scores; an online softmax never does)."""

    largest_output: int = 0

    def __init__(self, operators: bool = True):
        super().__init__()
        self.operators = operators  # whether it asks for ATen operators and the largest tensor (see recording)


_recorders: list[Recorded] = []


@contextlib.contextmanager
def recording(operators: bool = True):
    """Every call of learner code inside is recorded in the kernel: the set it yields fills with the names
    of what ran ("function scaled_dot_product_attention", "aten bmm", "module torch.nn...."). The kernel is
    the learner's, so what is absent proves nothing for certain; what is present was reported by it.
    Recordings nest: each one sees every call made while it is open. ``operators=False`` leaves out the ATen
    operators and the largest tensor (a recording of PyTorch's functions, modules and library code costs
    about half as much), unless an enclosing or enclosed recording asks for them."""
    seen = Recorded(operators=operators)
    _recorders.append(seen)
    try:
        yield seen
    finally:
        del _recorders[next(index for index, other in enumerate(_recorders) if other is seen)]


class ForReview(Exception):
    """The judge cannot decide for certain (what ran in the kernel was hidden from it): the test scores 0
    and the notebook is flagged for the instructor, never silently paid."""


def assert_not_run(ran: set, forbidden: dict[str, str], what: str) -> None:
    """Fail when a recording shows something the exercise forbids; flag for review when it was switched off.

    ``forbidden`` maps a piece of a recorded name ("scaled_dot_product", "MultiheadAttention") to what the
    learner reads ("F.scaled_dot_product_attention"); ``what`` names the learner's code ("self_attention").
    """
    used = sorted({said for piece, said in forbidden.items() if any(piece in name for name in ran)})
    if used:
        raise AssertionError(f"{what} uses {', '.join(used)}, which this exercise asks you to write yourself")
    if kernel_calls.DISTURBED in ran:
        raise ForReview(
            f"the grader could not see what {what} runs (the notebook switched its recording off); "
            "your instructor will review it"
        )


def kernel_cpu_seconds(learner_object: Remote) -> float:
    """The CPU time the learner's kernel has used so far, asked of the kernel that holds ``learner_object``."""
    judge = learner_object._judge
    return float(judge.value(judge.answered(judge.ask("cpu_seconds", "{}"), "the kernel's clock")["result"]))


def vjp(function: Remote, *args, upstream, **kwargs):
    """Call ``function`` (a learner module or function) with autograd, and get the gradients of
    sum(output * upstream): (output, {parameter name: gradient or None}, [gradient of each tensor input
    that requires one, in order])."""
    judge = function._judge
    request = {**judge.request(function, None, args, kwargs), "upstream": encode(upstream)}
    answer = judge.answered(judge.ask("vjp", json.dumps(request)), function.__name__)
    grads = {name: judge.value(grad) for name, grad in answer["parameter_grads"].items()}
    return judge.value(answer["result"]), grads, [judge.value(grad) for grad in answer["input_grads"]]


class LearnerRaised(Exception):
    """The learner's function raised; ``kind`` is its exception's name."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


def _write_back(mine, after) -> None:
    """What the learner's call did to its copy of an argument, done to the judge's (arrays, tensors)."""
    import numpy as np

    try:
        if type(mine) is np.ndarray and getattr(after, "shape", None) == mine.shape and mine.flags.writeable:
            np.copyto(mine, np.asarray(after, dtype=mine.dtype))
        elif type(mine).__name__ in ("Tensor", "Parameter") and getattr(after, "shape", None) == mine.shape:
            import torch

            with torch.no_grad():
                mine.copy_(after.to(mine.dtype))
    except (TypeError, ValueError, RuntimeError):
        pass  # a shape or dtype the learner changed: the test compares values and will say so


def free_names(source: str) -> list[str]:
    """Names the hidden code reads and neither defines, imports nor gets from the builtins."""
    tree = ast.parse(source)
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return sorted(name for name in loaded - bound if not hasattr(builtins, name))


class Judge:
    """Runs hidden test code here; ``run_in_kernel(verb, request) -> answer (JSON text)`` asks the kernel
    (through the kernel guard's messages, execute.py; in tests, kernel_calls.respond in this process)."""

    def __init__(
        self, run_in_kernel, passthrough: tuple[type[BaseException], ...] = (), forbidden: tuple[str, ...] = ()
    ):
        self._run_in_kernel = run_in_kernel
        self._passthrough = (JudgeError, *passthrough)  # not a verdict: the grader handles them
        self._forbidden = forbidden  # the exercise's forbidden names: every call of learner code is recorded

    def ask(self, verb: str, payload: str) -> dict:
        answer = self._run_in_kernel(verb, payload)
        try:
            decoded = json.loads(answer)
        except (TypeError, ValueError) as error:
            raise JudgeError(f"the notebook's kernel answered the grader's {verb} with something unreadable") from error
        if not isinstance(decoded, dict):
            raise JudgeError(f"the notebook's kernel answered the grader's {verb} with something unreadable")
        return decoded

    def value(self, reply: dict):
        """An answer's value: data decoded here, or a Remote for what the kernel holds."""
        if "held" in reply:
            held = reply["held"]
            return Remote(self, {"handle": str(held["handle"])}, held.get("type"), held.get("class"))
        return decode(reply["data"])

    def _send(self, value):
        if isinstance(value, ModuleMethod):
            value = value.resolved()
        if isinstance(value, Remote):
            if "handle" not in value._target:
                return {"named": value._target["name"]}
            return value._target
        if type(value) in (list, tuple) and any(isinstance(item, Remote) for item in value):
            return {type(value).__name__: [self._send(item) for item in value]}
        return encode(value)

    def request(self, target: Remote, attribute: str | None, args, kwargs) -> dict:
        torch = sys.modules.get("torch")
        # What the open recordings ask for: "operators" (everything), "functions" (no ATen operators), "" (none).
        record = ("operators" if any(seen.operators for seen in _recorders) else "functions") if _recorders else ""
        request = {
            **target._target,
            "args": [self._send(item) for item in args],
            "kwargs": {key: self._send(item) for key, item in kwargs.items()},
            "grad": bool(torch.is_grad_enabled()) if torch is not None else True,
            "record": record,
        }
        if attribute:
            request["attribute"] = attribute
        return request

    @staticmethod
    def answered(answer: dict, what: str) -> dict:
        if "raised" in answer:
            kind, message = answer["raised"]
            raise LearnerRaised(f"{what} raised {kind}: {message}", kind)
        recorded = answer.get("recorded") or {}
        for seen in _recorders:
            seen.update(str(name) for name in recorded.get("names", []))
            seen.largest_output = max(seen.largest_output, int(recorded.get("largest_output", 0)))
        return answer

    def call(self, target: Remote, attribute: str | None, args, kwargs):
        answer = self.ask("call", json.dumps(self.request(target, attribute, args, kwargs)))
        self.answered(answer, target.__name__ + (f".{attribute}" if attribute else ""))
        for mine, after in zip(args, answer.get("args_after", []), strict=False):
            if after is not None and "data" in after:
                _write_back(mine, decode(after["data"]))
        return self.value(answer["result"])

    def namespace(self, source: str) -> dict:
        names = free_names(source)
        namespace = {"__name__": "__hidden_test__", "__builtins__": builtins}
        if not names:
            return namespace
        described = self.ask("describe", json.dumps(names)).get("described", {})
        for name in names:
            entry = described.get(name, {"kind": "missing"})
            try:
                if entry.get("kind") == "function":
                    namespace[name] = Remote(self, {"name": name})
                elif entry.get("kind") == "class":
                    held = entry["held"]
                    namespace[name] = Remote(self, {"handle": str(held["handle"])}, held.get("type"), held.get("class"))
                elif entry.get("kind") == "value":
                    namespace[name] = self.value(entry)
                elif entry.get("kind") == "other":
                    namespace[name] = NotJudgeable(name, str(entry.get("why", "not data")))
            except (ValueError, TypeError, KeyError) as error:
                namespace[name] = NotJudgeable(name, f"something the grader could not read ({error})")
        return namespace

    def run(self, source: str) -> tuple[str, BaseException | None]:
        """Run the hidden code; (what it printed, the exception that failed it or None)."""
        printed = io.StringIO()
        # The exercise's forbidden names are functions, modules and library code: no operator-level recording.
        with recording(operators=False) if self._forbidden else contextlib.nullcontext(set()) as ran:
            try:
                namespace = self.namespace(source)
                code = compile(source, "<hidden test>", "exec")
                with contextlib.redirect_stdout(printed):
                    exec(code, namespace)
            except self._passthrough:
                raise
            except Exception as error:  # noqa: BLE001  (any failure of the test is its verdict)
                verdict = error
            else:
                verdict = None
        self.ask("release", "{}")  # the objects this test made in the kernel are not kept
        try:
            assert_not_run(ran, {name: name for name in self._forbidden}, "the code this test calls")
        except (AssertionError, ForReview) as forbidden:  # what the exercise forbids outweighs the values
            verdict = forbidden
        return printed.getvalue(), verdict


def failure_output(error: BaseException) -> dict:
    """The error output a failed hidden test leaves in the notebook: its type and message, no source."""
    from nbformat.v4 import new_output

    name = type(error).__name__
    message = str(error) if str(error) else "(this check gives no message)"
    if isinstance(error, LearnerRaised):
        name = error.kind
    return new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


# ------------------------------------------------------------------------------------------------
# Probes: language models of the grader's own, made in the kernel (kernel_calls, Probes).
# ------------------------------------------------------------------------------------------------


def probe_language_model(near: Remote, **settings) -> Remote:
    """A small language model of the grader's own, made in the kernel where ``near`` (any learner object the
    test holds) lives, from ``settings`` (kernel_calls.LANGUAGE_MODEL_SETTINGS: vocab_size, architecture,
    mask, mask_in, bidirectional, dropout, width, max_len, seed): for a test that hands the learner's code a
    model whose leak it knows (``mask="off_by_one"``, ``mask_in="train"``...). Same settings, same weights."""
    judge = near._judge
    answer = judge.answered(judge.ask("language_model_probe", json.dumps(settings)), "the grader's language model")
    return judge.value(answer["result"])


# ------------------------------------------------------------------------------------------------
# Probes: timing workloads and a pretend GPU of the grader's own, made in the kernel (kernel_calls).
# ------------------------------------------------------------------------------------------------


def probe_timing(near: Remote, kind: str, **settings) -> Remote:
    """A timing probe of the grader's own, made in the kernel where ``near`` (any learner object the test
    holds) lives, for a test that hands the learner's timing code a function whose timings it knows:

    - ``"workload"`` (settings ``first``, ``then``: lists of seconds): a function of tensors whose first
      calls take the seconds of ``first``, the later ones those of ``then`` over and over; it returns its
      first argument. ``probe.recorded()`` gives back, per call, the shapes, dtypes and devices of its tensors.
    - ``"pretend_gpu"``: a pretend CUDA device; ``gpu.run(function, *args, **kwargs)`` calls learner code on
      it, ``gpu.workload(first=..., then=...)`` is a workload that queues its time there (the call returns at
      once), ``gpu.enqueue(seconds)`` queues work, ``gpu.synchronize()`` waits for it."""
    judge = near._judge
    request = json.dumps({"kind": kind, "settings": encode(settings)})
    answer = judge.answered(judge.ask("timing_probe", request), f"the grader's {kind}")
    return judge.value(answer["result"])
