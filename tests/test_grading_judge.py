"""The judge (course_grader/judging/judge.py) and its channel into the kernel (kernel_calls.py), without a kernel.

The kernel's side is run in this process on a namespace of our own, so that what crosses the channel
can be checked directly: data only (JSON, .npy without pickle), the learner's results and exceptions
as answers, the learner's changes to its arguments written back, the hidden test's code never sent.
The whole path through a sandboxed kernel is tested by the grading pipeline (ex1 is judged outside).
"""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import torch

from course_grader.guard import kernel_calls
from course_grader.judging import judge


def _kernel(namespace: dict, sent: list[str]):
    """A stand-in for the learner's kernel: the guard's answer to the judge's question, in this process
    (`learner` points kernel_calls at `namespace`); `sent` keeps every question as "verb request"."""

    def run_in_kernel(verb: str, request: str) -> str:
        sent.append(f"{verb} {request}")
        return kernel_calls.respond(verb, request)

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
    assert len(sent) == 3 and "describe" in sent[0] and "call" in sent[1] and "release" in sent[2]


def test_only_the_arguments_a_call_changed_come_back(learner):
    def scale_first(a, b):
        a *= 2.0
        return a.sum() + b.sum()

    learner["scale_first"] = scale_first
    a, b = np.ones((2, 3)), np.arange(4.0)
    request = {"name": "scale_first", "args": [kernel_calls.encode(a), kernel_calls.encode(b)], "kwargs": {}}
    answer = json.loads(kernel_calls.respond("call", json.dumps(request)))
    changed, unchanged = answer["args_after"]
    assert np.array_equal(kernel_calls.decode(changed["data"]), 2 * a) and unchanged is None, answer["args_after"]


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
    assert isinstance(error, judge.LearnerRaised) and error.kind == "AttributeError"


def test_learner_prints_never_mix_with_the_answer(learner):
    def chatty(x):
        print("noise " * 100_000)
        return x + 1

    learner["chatty"] = chatty
    printed, error = judge.Judge(_kernel(learner, [])).run("assert chatty(1) == 2\n")
    assert error is None


def test_only_the_channels_verbs_are_questions(learner):
    learner["x"] = 1
    for verb in ("encode", "decode", "_hold", "respond", "json", None):
        answer = json.loads(kernel_calls.respond(verb, "[]"))
        assert answer["raised"][0] == "ValueError" and "not a question" in answer["raised"][1], (verb, answer)
    assert json.loads(kernel_calls.respond("describe", '["x"]'))["described"]["x"]["data"] == 1


def test_a_kernel_that_does_not_answer_is_no_verdict():
    with pytest.raises(judge.JudgeError, match="unreadable"):
        judge.Judge(lambda verb, request: "not json").run("self_attention(1)\n")


def test_a_learners_module_stays_in_the_kernel_and_is_worked_by_handle(learner):
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.linear1 = nn.Linear(width, width)
            self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(2)])

        def forward(self, x):
            return torch.relu(self.linear1(x)) + x

    Layer.__module__ = "__main__"
    learner["Layer"] = Layer
    hidden = (
        "import torch\n"
        "from torch import nn\n"
        "from course_grader.judging.judge import fetch, is_instance, learner_class, learner_type, vjp\n"
        "assert learner_class(Layer).module == '__main__' and ('torch.nn.modules.module', 'Module') in learner_class(Layer).mro\n"
        "torch.manual_seed(0)\n"
        "layer = Layer(4).eval()\n"
        "assert is_instance(layer, Layer) and learner_type(layer).name.endswith('Layer')\n"
        "theirs = nn.Linear(4, 4)\n"
        "with torch.no_grad():\n"
        "    layer.linear1.weight.copy_(theirs.weight)\n"
        "    layer.linear1.bias.copy_(theirs.bias)\n"
        "assert torch.equal(fetch(layer.linear1.weight), theirs.weight.detach())\n"
        "x = torch.randn(3, 4)\n"
        "assert torch.allclose(layer(x), torch.relu(theirs(x)) + x)\n"
        "assert len(layer.blocks) == 2 and len(list(layer.blocks)) == 2\n"
        "names = [name for name, _ in layer.named_parameters()]\n"
        "assert names[:2] == ['linear1.weight', 'linear1.bias'], names\n"
        "state = layer.state_dict()\n"
        "assert type(state) is dict and torch.equal(state['linear1.bias'], theirs.bias.detach())\n"
        "layer.load_state_dict({key: torch.zeros_like(value) for key, value in state.items()})\n"
        "assert torch.equal(layer(x), x)\n"
        "layer.load_state_dict(state)\n"
        "x.requires_grad_(True)\n"
        "out, grads, (dx,) = vjp(layer, x, upstream=torch.ones(3, 4))\n"
        "x_here = x.detach().clone().requires_grad_(True)\n"
        "(torch.relu(theirs(x_here)) + x_here).sum().backward()\n"
        "assert torch.allclose(dx, x_here.grad) and grads['blocks.0.weight'] is None\n"
        "assert torch.allclose(grads['linear1.bias'], (theirs(x.detach()) > 0).float().sum(0))\n"
    )
    sent: list[str] = []
    printed, error = judge.Judge(_kernel(learner, sent)).run(hidden)
    assert error is None, repr(error)
    assert kernel_calls._held == {}, "the objects a test made are released after it"
    assert all("assert" not in statement and "theirs" not in statement for statement in sent)


def test_a_modules_methods_take_one_question_each_and_anything_else_stays_an_attribute(learner):
    """``model.train()`` or ``model.load_state_dict(...)`` is looked up and called in the kernel in one question
    (a test calls them hundreds of times); a method used in any other way, an attribute that is data and a
    method the learner's class replaced are still what the kernel says they are."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(2, 2)
            self.scale = 3

        def eval(self):  # the learner's own method under PyTorch's name runs, as the kernel finds it
            return "learner's eval"

    Net.__module__ = "__main__"
    learner["Net"] = Net
    hidden = (
        "from course_grader.judging.judge import LearnerRaised, ModuleMethod\n"
        "net = Net()\n"
        'assert net.train(False) is not None and net.eval() == "learner\'s eval"\n'
        "state = net.state_dict()\n"
        "net.load_state_dict(state)\n"
        "assert isinstance(net.train, ModuleMethod) and net.train.__name__.endswith('Net.train')\n"
        "scale = net.scale\n"
        "assert scale == 3 and type(scale) is int\n"
        "assert net.named_parameters.resolved().__name__ == 'method'  # used otherwise: the kernel's bound method\n"
        "try:\n"
        "    net.zero_grad(7, 8, 9)\n"
        "except LearnerRaised as error:\n"
        "    assert error.kind == 'TypeError' and 'Net.zero_grad' in str(error), str(error)\n"
        "else:\n"
        "    raise AssertionError('a wrong call of a method must raise in the kernel')\n"
    )
    sent: list[str] = []
    _, error = judge.Judge(_kernel(learner, sent)).run(hidden)
    assert error is None, repr(error)
    verbs = [statement.split(" ", 1)[0] for statement in sent]
    asked_for = [
        json.loads(statement.split(" ", 1)[1]).get("attribute") for statement in sent if statement.startswith("get ")
    ]
    assert asked_for == ["scale", "named_parameters"], asked_for
    assert verbs.count("call") == 6, verbs  # Net(), train, eval, state_dict, load_state_dict, zero_grad


def test_library_code_loaded_between_two_recorded_calls_is_named_in_the_second(learner, tmp_path, monkeypatch):
    """The recording keeps its map of the watched modules' files between calls: a module loaded since (the
    learner's code may import one) is found all the same."""
    import sys
    import types

    source = tmp_path / "scratch_watched.py"
    source.write_text("import torch\n\ndef helper(x):\n    return torch.relu(x)\n")
    module = types.ModuleType("course_utils.scratch_watched")
    module.__file__ = str(source)
    exec(compile(source.read_text(), str(source), "exec"), vars(module))

    def first(x):
        return torch.relu(x)

    def second(x):
        monkeypatch.setitem(sys.modules, module.__name__, module)  # loaded between the two calls
        return module.helper(x)

    learner.update(first=first, second=second)
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import recording\n"
        "with recording(operators=False) as ran:\n"
        "    first(torch.ones(2))\n"
        "assert not any('scratch_watched' in name for name in ran), sorted(ran)\n"
        "second(torch.ones(2))  # not recorded: the module is loaded now\n"
        "with recording(operators=False) as ran:\n"
        "    second(torch.ones(2))\n"
        "assert 'python course_utils.scratch_watched.helper' in ran, sorted(ran)\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)


def test_what_runs_in_the_learners_call_is_recorded_by_name(learner):
    import torch.nn.functional as F

    learner["sneaky"] = lambda q: getattr(F, "scaled_dot_product_" + "attention")(q, q, q)
    learner["honest"] = lambda q: torch.softmax(q @ q.transpose(-2, -1), dim=-1) @ q
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import recording\n"
        "q = torch.randn(1, 3, 4)\n"
        "with recording() as ran:\n"
        "    sneaky(q)\n"
        "assert 'function scaled_dot_product_attention' in ran, sorted(ran)\n"
        "with recording() as ran:\n"
        "    honest(q)\n"
        "assert not any('scaled_dot_product' in name for name in ran), sorted(ran)\n"
        "assert {'function softmax', 'function matmul', 'aten bmm'} <= ran, sorted(ran)\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)


def test_library_code_called_unbound_shows_and_a_recording_switched_off_is_for_review(learner):
    from torch import nn

    reference = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)

    def borrowed(x):  # PyTorch's layer's forward, called unbound on an object of the learner's
        return nn.TransformerEncoderLayer.forward(reference, x)

    def hiding(x):  # takes the recording's function mode off PyTorch's stack
        torch._C._pop_torch_function_stack()
        return x * 2

    learner.update(borrowed=borrowed, hiding=hiding)
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import assert_not_run, recording\n"
        "with recording() as ran:\n"
        "    borrowed(torch.randn(1, 3, 8))\n"
        "assert_not_run(ran, {'TransformerEncoderLayer': 'nn.TransformerEncoderLayer'}, 'EncoderLayer')\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert isinstance(error, AssertionError) and "uses nn.TransformerEncoderLayer" in str(error), repr(error)
    hidden = hidden.replace("borrowed(", "hiding(")
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert isinstance(error, judge.ForReview) and "review" in str(error), repr(error)
    assert torch._C._len_torch_function_stack() == 0


def test_an_exercises_forbidden_names_fail_every_judged_test_that_runs_them(learner):
    import torch.nn.functional as F

    learner["attend"] = lambda q: getattr(F, "scaled_dot_product_" + "attention")(q, q, q)  # no forbidden word
    hidden = "import torch\nq = torch.randn(1, 3, 4)\nassert attend(q).shape == q.shape\n"
    forbidden = ("scaled_dot_product_attention", "MultiheadAttention")
    _, error = judge.Judge(_kernel(learner, []), forbidden=forbidden).run(hidden)
    assert isinstance(error, AssertionError) and "uses scaled_dot_product_attention" in str(error), repr(error)
    learner["attend"] = lambda q: torch.softmax(q @ q.transpose(-2, -1) / 2, dim=-1) @ q
    _, error = judge.Judge(_kernel(learner, []), forbidden=forbidden).run(hidden)
    assert error is None, repr(error)


def test_a_timing_probe_is_handed_to_learner_code_and_tells_what_it_saw(learner):
    import time

    def benchmark(fn, n, repeats):
        q = torch.zeros(1, n, 4, dtype=torch.float64)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn(q, q, q)
            times.append(time.perf_counter() - start)
        return times

    learner["benchmark"] = benchmark
    hidden = (
        "from course_grader.judging.judge import probe_timing\n"
        "fn = probe_timing(benchmark, 'workload', first=[0.05], then=[0.0, 0.02])\n"
        "times = benchmark(fn, 3, repeats=4)\n"
        "assert times[0] >= 0.05 and times[1] < 0.01 and times[2] >= 0.02 and times[3] < 0.01, times\n"
        "calls = fn.recorded()\n"
        "assert len(calls) == 4 and calls[0]['shapes'] == [[1, 3, 4]] * 3 and calls[0]['dtypes'][0] == 'float64'\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)
    _, error = judge.Judge(_kernel(learner, [])).run(
        "from course_grader.judging.judge import probe_timing\nprobe_timing(benchmark, 'workload', then=[60])\n"
    )
    assert isinstance(error, judge.LearnerRaised) and error.kind == "ValueError", repr(error)


def test_learner_code_run_on_the_pretend_gpu_sees_queued_work_only_when_it_synchronises(learner):
    import time

    def timed(fn, synchronise):
        q = torch.zeros(2, 3, device="cuda")
        assert q.is_cuda and torch.cuda.is_available()
        start = time.perf_counter()
        fn(q, q, q)
        if synchronise:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    learner["timed"] = timed
    real_synchronize = torch.cuda.synchronize
    hidden = (
        "from course_grader.judging.judge import probe_timing\n"
        "gpu = probe_timing(timed, 'pretend_gpu')\n"
        "queued = gpu.workload(then=[0.05])\n"
        "assert gpu.run(timed, queued, True) >= 0.05\n"
        "assert gpu.run(timed, queued, False) < 0.03\n"
        "gpu.synchronize()\n"
        "assert queued.recorded()[0]['devices'] == ['cuda'] * 3\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)
    assert torch.cuda.synchronize is real_synchronize, "torch.cuda is itself again after run()"


def test_a_learners_module_instance_is_held_and_the_kernels_clock_can_be_read(learner):
    from torch import nn

    learner["model"] = nn.Linear(2, 3)
    hidden = (
        "from course_grader.judging.judge import kernel_cpu_seconds, learner_type\n"
        "assert learner_type(model).name == 'Linear' and tuple(model.weight.shape) == (3, 2)\n"
        "assert kernel_cpu_seconds(model) > 0\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)


def _leaks_in(model, mode: bool, vocab_size: int = 10, length: int = 7) -> bool:
    """Whether changing the tokens after position i moves an output at a position <= i, in train (True) or
    eval (False) mode, with the same dropout masks for the changed and the unchanged batch."""
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, vocab_size, (2, length), generator=generator)
    model.train(mode)
    for i in range(length - 1):
        changed = tokens.clone()
        shift = torch.randint(1, vocab_size, (2, length - i - 1), generator=generator)
        changed[:, i + 1 :] = (tokens[:, i + 1 :] + shift) % vocab_size  # every later token differs
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            before = model(tokens)
            torch.manual_seed(0)
            after = model(changed)
        if not torch.allclose(before[:, : i + 1], after[:, : i + 1], atol=1e-5):
            return True
    return False


@pytest.mark.parametrize(
    "settings, leaks_in_train, leaks_in_eval",
    [
        ({}, False, False),
        ({"dropout": 0.5}, False, False),
        ({"mask": "none"}, True, True),
        ({"mask": "off_by_one"}, True, True),
        ({"mask": "transposed"}, True, True),
        ({"mask": "last_key_visible"}, True, True),
        ({"mask_in": "train"}, False, True),
        ({"mask_in": "eval", "dropout": 0.0}, True, False),
        ({"architecture": "recurrent"}, False, False),
        ({"architecture": "recurrent", "bidirectional": True}, True, True),
        ({"architecture": "token_by_token"}, False, False),
    ],
)
def test_a_probe_language_model_leaks_as_its_settings_say(settings, leaks_in_train, leaks_in_eval):
    model = kernel_calls.make_language_model({"vocab_size": 10, "seed": 3, **settings})
    assert (_leaks_in(model, True), _leaks_in(model, False)) == (leaks_in_train, leaks_in_eval)
    assert model(torch.randint(0, 10, (3, 5))).shape == (3, 5, 10)


def test_a_probe_language_model_is_made_from_data_in_the_kernel_and_handed_to_learner_code(learner):
    def leaks_future(model, vocab_size, seq_len):
        return _leaks_in(model, model.training, vocab_size, seq_len)

    learner["leaks_future"] = leaks_future
    state = torch.random.get_rng_state()
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import LearnerRaised, learner_type, probe_language_model\n"
        "honest = probe_language_model(leaks_future, vocab_size=10, seed=4).eval()\n"
        "leaky = probe_language_model(leaks_future, vocab_size=10, seed=4, mask='off_by_one')\n"
        "assert leaks_future(honest, 10, 6) is False and leaks_future(leaky, 10, 6) is True\n"
        "assert learner_type(leaky).name.endswith('ProbeAttentionModel') and leaky.training and not honest.training\n"
        "again = probe_language_model(leaks_future, vocab_size=10, seed=4).state_dict()\n"
        "assert all(torch.equal(value, again[key]) for key, value in honest.state_dict().items())\n"
        "for wrong in ({'mask': 'sideways'}, {'colour': 'red'}, {'dropout': 1.5}, {'width': 15}):\n"
        "    try:\n"
        "        probe_language_model(leaks_future, vocab_size=10, **wrong)\n"
        "    except LearnerRaised as error:\n"
        "        assert error.kind == 'ValueError', error\n"
        "    else:\n"
        "        raise AssertionError(f'settings {wrong} were taken')\n"
    )
    sent: list[str] = []
    _, error = judge.Judge(_kernel(learner, sent)).run(hidden)
    assert error is None, repr(error)
    assert torch.equal(torch.random.get_rng_state(), state), "making a probe leaves the kernel's random state alone"
    assert any(statement.startswith("language_model_probe ") for statement in sent)
    assert kernel_calls._held == {}, "the probes a test made are released after it"


def test_recordings_nest_and_measure_the_largest_tensor_made(learner):
    learner["scores"] = lambda q: torch.softmax(q @ q.transpose(-2, -1), dim=-1)
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import recording\n"
        "q = torch.randn(1, 50, 4)\n"
        "with recording() as outer:\n"
        "    with recording() as inner:\n"
        "        scores(q)\n"
        "    assert inner == outer and inner.largest_output == 50 * 50, (sorted(inner), inner.largest_output)\n"
        "    scores(q[:, :10])\n"
        "assert outer.largest_output == 2500 and inner.largest_output == 2500\n"
    )
    _, error = judge.Judge(_kernel(learner, []), forbidden=("scaled_dot_product_attention",)).run(hidden)
    assert error is None, repr(error)


def test_a_recording_without_operators_still_sees_functions_modules_and_library_code(learner):
    from torch import nn

    layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
    learner["encode"] = lambda x: layer(torch.softmax(x, dim=-1))
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import recording\n"
        "x = torch.randn(1, 3, 8)\n"
        "with recording(operators=False) as light:\n"
        "    encode(x)\n"
        "assert 'function softmax' in light and not any(name.startswith('aten ') for name in light), sorted(light)\n"
        "assert 'module torch.nn.modules.transformer.TransformerEncoderLayer' in light, sorted(light)\n"
        "assert any('TransformerEncoderLayer._sa_block' in name for name in light), sorted(light)\n"
        "assert light.largest_output == 0\n"
        "with recording(operators=False) as light, recording() as full:\n"
        "    encode(x)\n"
        "assert 'aten _softmax' in light and light == full and full.largest_output >= 3 * 8, sorted(full)\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)


def test_every_library_function_on_the_way_to_pytorch_is_recorded_whatever_ran_just_before(learner):
    """The recording reads the callers of each PyTorch call off the stack, and skips the walk when the call comes
    from the same running function as the last one: functions that run one after the other, nested, and again
    from another caller all show."""
    from torch import nn

    layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
    norm = nn.LayerNorm(8)

    def encode(x):
        y = norm(torch.relu(x))  # torch.nn's module call machinery runs first for the norm
        y = layer(y)  # then again, deeper: the encoder layer's blocks, below frames of functions seen before
        return layer._ff_block(y)  # and a block called straight from the learner's function

    learner["encode"] = encode
    hidden = (
        "import torch\n"
        "from course_grader.judging.judge import recording\n"
        "x = torch.randn(1, 3, 8)\n"
        "with recording(operators=False) as ran:\n"
        "    encode(x)\n"
        "python = {name.rsplit('.', 1)[-1] for name in ran if name.startswith('python torch.nn')}\n"
        "assert {'_sa_block', '_ff_block', 'forward'} <= python, sorted(python)\n"
        "assert 'python torch.nn.modules.normalization.LayerNorm.forward' in ran, sorted(ran)\n"
        "assert 'python torch.nn.modules.transformer.TransformerEncoderLayer._ff_block' in ran, sorted(ran)\n"
    )
    _, error = judge.Judge(_kernel(learner, [])).run(hidden)
    assert error is None, repr(error)
