"""The judge: hidden tests decided in the grader's process, out of the learner's reach.

For an assignment whose source says ``metadata["course_grading"]["judge"] = "outside"``, the hidden part
of every test cell never enters the learner's kernel. After the visible part has run there (for the
learner, as in the lab), the grader runs the hidden part here, in a fresh namespace of its own:

    grader process (trusted)                                learner's kernel (confined)
    ------------------------                                ---------------------------
    hidden test source, its seeds,                          the learner's functions and values
    its references, its comparisons
           |  names the test reads (scores_by_hand, self_attention, ...)
           |------ describe([...]) ----------------------->  kind of each; data as .npy/JSON
           |  a call of a learner function on inputs the test chose
           |------ call(name, inputs as .npy/JSON) ------->  learner code runs here
           |<----- result and arguments after the call ---  (data only, never pickle)
    the test's asserts decide; its message (only) goes
    into the notebook's output, as an error of the cell

The statement the kernel runs (kernel_calls.describe or kernel_calls.call) names a function and carries
inputs, nothing of the test. A learner function seen from here is a `LearnerFunction`: calling it sends
the arguments as data and returns the answer as data (NumPy arrays stay arrays, PyTorch tensors stay
tensors), and writes back into the judge's arguments what the call did to the kernel's copies, so that
a test can still see whether the function changed its inputs. Learner values that are not data (an
object, a class) are `NotJudgeable`: a test that uses them fails with that reason.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import secrets

from .kernel_calls import ANSWER_PREFIX, decode, encode


class JudgeError(Exception):
    """The kernel did not answer as the channel expects (it timed out, or printed no answer)."""


class JudgeTimeout(JudgeError):
    """A call of the learner's code ran past the cell's time limit (the test fails; the grader counts it)."""


class NotJudgeable:
    """A learner value that cannot cross as data: any use of it in a test fails with the reason."""

    def __init__(self, name: str, why: str):
        self._name, self._why = name, why

    def __getattr__(self, attribute):
        raise TypeError(f"{self._name} cannot be checked by the grader: it is {self._why}")

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self._name} cannot be checked by the grader: it is {self._why}")


class LearnerFunction:
    """A function of the learner's notebook, called in the learner's kernel."""

    def __init__(self, judge: "Judge", name: str):
        self._judge, self.__name__ = judge, name

    def __call__(self, *args, **kwargs):
        request = {
            "name": self.__name__,
            "args": [encode(item) for item in args],
            "kwargs": {key: encode(item) for key, item in kwargs.items()},
        }
        answer = self._judge.ask("call", json.dumps(request))
        if "raised" in answer:
            kind, message = answer["raised"]
            raise LearnerRaised(f"{self.__name__} raised {kind}: {message}", kind)
        if "not_data" in answer:
            raise TypeError(f"{self.__name__}: {answer['not_data']}")
        for mine, after in zip(args, answer.get("args_after", [])):
            _write_back(mine, decode(after))
        return decode(answer["result"])


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
    return sorted(name for name in loaded - bound if not hasattr(builtins, name))


class Judge:
    """Runs hidden test code here; ``run_in_kernel(code) -> text it printed`` reaches the kernel."""

    def __init__(self, run_in_kernel, passthrough: tuple[type[BaseException], ...] = ()):
        self._run_in_kernel = run_in_kernel
        self._passthrough = (JudgeError, *passthrough)  # not a verdict: the grader handles them

    def ask(self, verb: str, payload: str) -> dict:
        nonce = secrets.token_hex(8)
        statement = (
            f"__import__('course_utils.grading.kernel_calls', fromlist=['{verb}']).{verb}({nonce!r}, {payload!r})"
        )
        printed = self._run_in_kernel(statement)
        marker = f"{ANSWER_PREFIX} {nonce} "
        lines = [line for line in printed.splitlines() if line.startswith(marker)]
        if not lines:
            raise JudgeError(f"the notebook's kernel gave no answer to the grader's {verb}")
        try:
            return json.loads(lines[-1][len(marker) :])
        except ValueError as error:
            raise JudgeError(f"the notebook's kernel answered the grader's {verb} with something unreadable") from error

    def namespace(self, source: str) -> dict:
        names = free_names(source)
        namespace = {"__name__": "__hidden_test__", "__builtins__": builtins}
        if not names:
            return namespace
        described = self.ask("describe", json.dumps(names)).get("described", {})
        for name in names:
            entry = described.get(name, {"kind": "missing"})
            if entry.get("kind") == "function":
                namespace[name] = LearnerFunction(self, name)
            elif entry.get("kind") == "data":
                try:
                    namespace[name] = decode(entry["value"])
                except (ValueError, TypeError, KeyError) as error:
                    namespace[name] = NotJudgeable(name, f"data the grader could not read ({error})")
            elif entry.get("kind") == "other":
                namespace[name] = NotJudgeable(name, str(entry.get("why", "not data")))
        return namespace

    def run(self, source: str) -> tuple[str, BaseException | None]:
        """Run the hidden code; (what it printed, the exception that failed it or None)."""
        printed = io.StringIO()
        try:
            namespace = self.namespace(source)
            code = compile(source, "<hidden test>", "exec")
            with contextlib.redirect_stdout(printed):
                exec(code, namespace)
        except self._passthrough:
            raise
        except Exception as error:  # noqa: BLE001  (any failure of the test is its verdict)
            return printed.getvalue(), error
        return printed.getvalue(), None


def failure_output(error: BaseException) -> dict:
    """The error output a failed hidden test leaves in the notebook: its type and message, no source."""
    from nbformat.v4 import new_output

    name = type(error).__name__
    message = str(error) if str(error) else "(this check gives no message)"
    if isinstance(error, LearnerRaised):
        name = error.kind
    return new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])
