"""The judge (course_utils/grading/judge.py) and its channel into the kernel (kernel_calls.py), without a kernel.

The kernel's side is run in this process on a namespace of our own, so that what crosses the channel
can be checked directly: data only (JSON, .npy without pickle), the learner's results and exceptions
as answers, the learner's changes to its arguments written back, the hidden test's code never sent.
The whole path through a sandboxed kernel is tested by the grading pipeline (ex1 is judged outside).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json

import numpy as np
import pytest
import torch

from course_utils.grading import judge, kernel_calls


def _kernel(namespace: dict, sent: list[str]):
    """A stand-in for the learner's kernel: runs the judge's statement against `namespace`."""

    def run_in_kernel(statement: str) -> str:
        sent.append(statement)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            eval(statement, {"__builtins__": __builtins__})  # the statement is one call of kernel_calls
        return printed.getvalue()

    return run_in_kernel


@pytest.fixture
def learner(monkeypatch):
    namespace: dict = {}
    monkeypatch.setattr(kernel_calls, "_namespace", lambda: namespace)
    return namespace


def test_values_cross_as_data_and_come_back_as_they_were():
    values = [
        None,
        True,
        3,
        2.5,
        "text",
        [1, [2.0, 3]],
        (1, 2),
        {"a": [1]},
        np.arange(6.0).reshape(2, 3),
        np.float32(1.5),
        torch.arange(4.0).reshape(2, 2),
        torch.ones(2, dtype=torch.bfloat16),
    ]
    for value in values:
        back = kernel_calls.decode(json.loads(json.dumps(kernel_calls.encode(value))))
        assert type(back) is type(value) or isinstance(value, np.generic), (value, back)
        if isinstance(value, torch.Tensor):
            assert back.dtype == value.dtype and torch.equal(back, value)
        elif isinstance(value, np.ndarray):
            assert np.array_equal(back, value)
        elif not isinstance(value, np.generic):
            assert back == value


def test_nothing_that_can_carry_code_crosses():
    class Agreeable(np.ndarray):
        pass

    for value in (
        object(),
        np.zeros(2).view(Agreeable),
        np.array([object()]),
        torch.zeros(2).as_subclass(torch.Tensor).__class__,
    ):
        with pytest.raises(kernel_calls.NotData):
            kernel_calls.encode(value)
    # An .npy that holds pickled objects is refused when it is read (allow_pickle=False).
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError):
        kernel_calls.decode({"array": base64.b64encode(buffer.getvalue()).decode()})


def test_free_names_are_the_learners_names_only():
    source = (
        "import numpy as np\nfrom math import sqrt\n"
        "def _hidden_check():\n    got = np.asarray(scores_by_hand)\n    out, w = self_attention(got, got, got, got)\n"
        "    assert abs(sqrt(2) - len(w)) >= 0, f'{out}'\n"
        "_hidden_check()\n"
    )
    assert judge.free_names(source) == ["scores_by_hand", "self_attention"]


def test_a_hidden_test_runs_here_and_the_kernel_sees_only_names_and_inputs(learner):
    def self_attention(X, W_q, W_k, W_v):
        scores = (X @ W_q) @ (X @ W_k).T / np.sqrt(W_k.shape[1])
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        X += 1.0  # the learner's function changes an argument: the test must be able to see it
        return weights @ (X @ W_v), weights

    learner.update(self_attention=self_attention, scores_by_hand=[[0.7071, 0.0], [0.0, 0.7071]])
    hidden = (
        "import numpy as np\n"
        "SECRET_REFERENCE = 123.456\n"
        "rng = np.random.default_rng(9876)\n"
        "X, W = rng.normal(size=(4, 3)), rng.normal(size=(3, 2))\n"
        "before = X.copy()\n"
        "out, weights = self_attention(X, W, W, W)\n"
        "assert isinstance(out, np.ndarray) and out.shape == (4, 2)\n"
        "assert np.allclose(weights.sum(axis=1), 1)\n"
        "assert np.allclose(X, before + 1.0), 'the change to X was written back'\n"
        "assert np.asarray(scores_by_hand).shape == (2, 2)\n"
        "print('checked')\n"
    )
    sent: list[str] = []
    printed, error = judge.Judge(_kernel(learner, sent)).run(hidden)
    assert error is None and printed == "checked\n", (error, printed)
    crossing = "\n".join(sent)
    assert "SECRET_REFERENCE" not in crossing and "9876" not in crossing and "allclose" not in crossing
    assert len(sent) == 2 and "describe" in sent[0] and "call" in sent[1]


def test_a_failing_hidden_test_gives_its_message_and_no_code(learner):
    learner["self_attention"] = lambda X, W_q, W_k, W_v: (X, X)
    hidden = (
        "import numpy as np\n"
        "out, w = self_attention(np.eye(2), np.eye(2), np.eye(2), np.eye(2))\n"
        "assert w.sum() == 2 and False, 'divide by sqrt(d_k)'\n"
    )
    printed, error = judge.Judge(_kernel(learner, [])).run(hidden)
    output = judge.failure_output(error)
    assert output["ename"] == "AssertionError" and output["evalue"] == "divide by sqrt(d_k)"
    assert output["traceback"] == ["AssertionError: divide by sqrt(d_k)"]


def test_the_learners_exceptions_missing_names_and_objects_are_verdicts(learner):
    def broken(*args):
        raise NotImplementedError()

    learner.update(broken=broken, model=object())
    _, error = judge.Judge(_kernel(learner, [])).run("broken(1)\n")
    assert isinstance(error, judge.LearnerRaised) and error.kind == "NotImplementedError"
    _, error = judge.Judge(_kernel(learner, [])).run("scores_by_hand\n")
    assert isinstance(error, NameError)
    _, error = judge.Judge(_kernel(learner, [])).run("model.forward\n")
    assert isinstance(error, TypeError) and "cannot be checked by the grader" in str(error)


def test_learner_prints_cannot_drown_the_answer(learner):
    def chatty(x):
        print("noise " * 100_000)
        return x + 1

    learner["chatty"] = chatty
    printed, error = judge.Judge(_kernel(learner, [])).run("assert chatty(1) == 2\n")
    assert error is None


def test_a_kernel_that_does_not_answer_is_no_verdict():
    with pytest.raises(judge.JudgeError, match="gave no answer"):
        judge.Judge(lambda statement: "course-judge-answer forged {}\n").run("self_attention(1)\n")
