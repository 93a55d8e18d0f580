"""The judge's narrow channel into a learner's kernel: names looked up, functions called, results as data.

The hidden tests run in the grader's process
(judge.py), never in the learner's kernel. When a test needs the learner's work it asks the kernel
a question: a verb and a request (names, handles and inputs as data; nothing of the test), sent as
a Jupyter message of the kernel guard's own type and answered in its reply (kernel_guard.py calls
``respond``). Nothing of it passes through a cell: no history, no output, no line cache. The verbs:

    describe(names)     for each name: a function, a class, data (numbers, strings, nested lists,
                        arrays, tensors), another object (held here, see below) or missing
    call(target, ...)   a learner function, class or held object (or one of its methods) called on
                        the judge's inputs, with autograd on or off as the judge's own is; back come
                        its result and the arguments it changed, as they are after the call (a test
                        may ask whether the function changed them); with ``record``, also the names of what
                        ran (PyTorch functions, ATen operators, module classes, library functions) and
                        the size of the largest tensor an operator made, for the judge to judge
    get(handle, name)   an attribute of a held object
    items(handle)       the items of a held object (a ModuleList, a generator of parameters)
    fetch(handle)       a held tensor, as data
    vjp(target, ...)    a call with autograd, and the gradients of sum(output * upstream) with respect
                        to the module's parameters and the tensor inputs that require them
    release()           forget every held object (after each test)
    cpu_seconds()       the CPU time the kernel's process has used

A learner object that is not data (a module, a model) never crosses: the kernel holds it under a
handle, an opaque name, and the judge works on it by handle (``judge.Remote``). Tensors reached as
attributes are held too, so that the judge can set a module's weights in place (``.copy_``).

What crosses is data only, in both directions: JSON for numbers, strings, lists and dicts, and
NumPy's ``.npy`` format, read with ``allow_pickle=False``, for arrays and tensors (a tensor is sent
as its array and its kind, and rebuilt on the other side). Nothing is unpickled, so an answer can
carry no code. The kernel is the learner's: it may answer anything, and the judge treats every answer
as a claim to check against references it computes itself.

This module is imported in the kernel (by the guard, before any notebook code) and in the grader (for the codec);
it needs NumPy, and PyTorch where tensors are involved, nothing of the grader.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import inspect
import io
import json
import sys

MAX_LIST_ITEMS = 100_000  # a list longer than this is not data a test asks for


class NotData(ValueError):
    """A value that cannot cross as data (an object, a module, a list too long)."""


def encode(value, _depth: int = 0):
    """``value`` as JSON-able data: None, bools, numbers, strings, lists, dicts of them, arrays, tensors."""
    import numpy as np

    if _depth > 20:
        raise NotData("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and type(value) in (int, float):
        return value
    if isinstance(value, np.generic) and type(value).__module__ == "numpy":
        return {"scalar": value.item()}
    torch = sys.modules.get("torch")
    if torch is not None and type(value) in (torch.Tensor, torch.nn.Parameter):  # subclasses are not data
        array = value.detach().cpu()
        dtype = str(array.dtype).replace("torch.", "")
        if array.dtype == torch.bfloat16:
            array = array.float()
        return {"tensor": _npy(array.numpy()), "dtype": dtype, "requires_grad": bool(value.requires_grad)}
    if type(value) is np.ndarray:
        if value.dtype.hasobject:
            raise NotData("an array of Python objects")
        return {"array": _npy(value)}
    if type(value) in (list, tuple):
        if len(value) > MAX_LIST_ITEMS:
            raise NotData(f"a {type(value).__name__} of {len(value)} items")
        return {type(value).__name__: [encode(item, _depth + 1) for item in value]}
    if torch is not None and type(value) is torch.Size:
        return {"tuple": [encode(item, _depth + 1) for item in value]}
    if torch is not None and type(value) in (torch.dtype, torch.device):
        return {"torch": str(value).replace("torch.", ""), "what": type(value).__name__}
    if type(value) is dict or type(value) is collections.OrderedDict:
        if not all(type(key) is str for key in value):
            raise NotData("a dict whose keys are not all strings")
        return {"dict": {key: encode(item, _depth + 1) for key, item in value.items()}}
    raise NotData(f"a {type(value).__module__}.{type(value).__qualname__}")


def decode(data):
    """The value ``encode`` described (arrays with ``allow_pickle=False``; tensors need PyTorch)."""
    import numpy as np

    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if not isinstance(data, dict) or len(data) < 1:
        raise ValueError(f"not an encoded value: {type(data).__name__}")
    if "scalar" in data:
        return np.asarray(data["scalar"])[()]
    if "array" in data:
        return _array(data["array"])
    if "tensor" in data:
        import torch

        tensor = torch.from_numpy(_array(data["tensor"]).copy())
        if data.get("dtype") == "bfloat16":
            tensor = tensor.to(torch.bfloat16)
        return tensor.requires_grad_(bool(data.get("requires_grad"))) if tensor.is_floating_point() else tensor
    if "list" in data:
        return [decode(item) for item in data["list"]]
    if "tuple" in data:
        return tuple(decode(item) for item in data["tuple"])
    if "dict" in data:
        return {str(key): decode(item) for key, item in data["dict"].items()}
    if "torch" in data:
        import torch

        value = getattr(torch, str(data["torch"])) if data.get("what") == "dtype" else torch.device(str(data["torch"]))
        if not isinstance(value, (torch.dtype, torch.device)):
            raise ValueError(f"not a dtype: {data['torch']!r}")
        return value
    raise ValueError(f"not an encoded value: keys {sorted(data)[:5]}")


def _npy(array) -> str:
    buffer = io.BytesIO()
    import numpy as np

    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _array(text: str):
    import numpy as np

    return np.load(io.BytesIO(base64.b64decode(text.encode("ascii"), validate=True)), allow_pickle=False)


# ------------------------------------------------------------------------------------------------
# The kernel's side: run by the one statement the judge sends.
# ------------------------------------------------------------------------------------------------

_held: dict[str, object] = {}  # the learner's objects the judge refers to, by handle
MAX_ITEMS = 10_000  # items of one held object the judge may ask for


def _namespace() -> dict:
    from IPython import get_ipython

    return get_ipython().user_ns


_answers: list[dict] = []  # the answer of the verb running now (see respond)


def _answer(nonce: str, payload: dict) -> None:
    _answers.append(payload)


def respond(verb: str, request: str) -> str:
    """The answer to one question of the judge, as JSON text: what the kernel guard sends back in its reply
    (kernel_guard.py, command "judge"), never through the notebook's outputs. Every public function of this
    module called as ``name(nonce, request)`` is a verb."""
    function = globals().get(verb) if isinstance(verb, str) and not verb.startswith("_") else None
    if (
        function is None
        or getattr(function, "__code__", None) is None
        or function.__code__.co_varnames[:2]
        != (
            "nonce",
            "request",
        )
    ):
        return json.dumps({"raised": ["ValueError", f"the judge asked for {verb!r}, which is not a question"]})
    _answers.clear()
    try:
        function("", request)
    except Exception as error:  # noqa: BLE001  (a request the kernel could not read)
        return json.dumps({"raised": [type(error).__name__, str(error)[:2000]]})
    return json.dumps(_answers[-1] if _answers else {"raised": ["RuntimeError", f"{verb} gave no answer"]})


def _type_info(cls: type) -> dict:
    """What the judge may know of a class: names only (its module, its name, those of its bases)."""
    return {
        "name": cls.__qualname__,
        "module": cls.__module__,
        "mro": [[c.__module__, c.__qualname__] for c in cls.__mro__],
    }


def _hold(value) -> dict:
    handle = f"h{len(_held) + 1}"
    _held[handle] = value
    held = {"handle": handle, "type": _type_info(type(value))}
    if isinstance(value, type):
        held["class"] = _type_info(value)
    return held


def _reply(value, hold_tensors: bool = False) -> dict:
    """A value for the judge: as data when it is data, otherwise (and tensors when asked) held here."""
    torch = sys.modules.get("torch")
    if hold_tensors and torch is not None and isinstance(value, torch.Tensor):
        return {"held": _hold(value)}
    try:
        return {"data": encode(value)}
    except NotData:
        return {"held": _hold(value)}


def _argument(data):
    """An input from the judge: data, or a handle of an object held here (top level or in a list)."""
    if _is_handle(data):
        if data["handle"] not in _held:
            raise ValueError(f"no held object {data['handle']!r}")
        return _held[data["handle"]]
    if isinstance(data, dict) and set(data) == {"named"}:
        namespace = _namespace()
        if data["named"] not in namespace:
            raise NameError(f"name {data['named']!r} is not defined")
        return namespace[data["named"]]
    if isinstance(data, dict) and set(data) in ({"list"}, {"tuple"}):
        items = [_argument(item) for item in next(iter(data.values()))]
        return items if "list" in data else tuple(items)
    return decode(data)


def _is_handle(data) -> bool:
    return isinstance(data, dict) and set(data) == {"handle"}


def _target(asked: dict):
    if "handle" in asked:
        target = _argument({"handle": asked["handle"]})
    else:
        namespace = _namespace()
        if asked["name"] not in namespace:
            raise NameError(f"name {asked['name']!r} is not defined")
        target = namespace[asked["name"]]
    return getattr(target, asked["attribute"]) if asked.get("attribute") else target


def describe(nonce: str, request: str) -> None:
    namespace, described = _namespace(), {}
    for name in json.loads(request):
        if name not in namespace:
            described[name] = {"kind": "missing"}
            continue
        value = namespace[name]
        try:
            if isinstance(value, type):
                described[name] = {"kind": "class", "held": _hold(value)}
            elif inspect.isroutine(value):  # a module or any other callable object is held, by handle
                described[name] = {"kind": "function"}
            else:
                described[name] = {"kind": "value", **_reply(value)}
        except Exception as error:  # noqa: BLE001  (a learner's value may fail in any way when read)
            described[name] = {"kind": "other", "why": f"{type(error).__name__}: {error}"[:300]}
    _answer(nonce, {"described": described})


WATCHED_PYTHON = ("torch.nn", "course_utils")  # Python code recorded by name when it runs (not the grader's)
DISTURBED = "recording disturbed"


@contextlib.contextmanager
def _recording(names: set, largest: list | None = None, operators: bool = True):
    """What runs, by name: PyTorch functions (whatever name they were reached by), ATen operators, the
    classes of the modules called, and the Python functions of torch.nn and the course's library that are
    computing when PyTorch is (an unbound ``TransformerEncoderLayer.forward`` called on the learner's own
    module shows). The learner's process may switch the recording off: then ``DISTURBED`` is among the
    names, for the judge to flag. ``largest[0]`` becomes the number of elements of the largest tensor an
    operator returned. ``operators=False``: no ATen operators and no largest tensor (PyTorch's operator-level
    hook is half the cost of a recording).

    The Python functions are read off the call stack whenever a PyTorch function is called from Python, up
    to the judge's call (``_run``): a library function that computes anything calls PyTorch. (A profile
    function would see every call, and slows pure-Python code such as Triton's interpreter fourfold.)"""
    largest = [0] if largest is None else largest
    import torch
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack, _pop_mode

    # What ran is kept as the objects themselves while the learner's code runs (a set insertion per call),
    # and named once at the end: a recorded forward pass costs about three times an unrecorded one.
    functions_run, operators_run, classes_run, code_run = set(), set(), set(), set()
    # The caller whose callers were noted last, held so that it stays this very call: a function calls PyTorch
    # many times in a row, and the callers of a call that is still running do not change.
    noted = [None]
    Functions = _functions_recorder(TorchFunctionMode, names, functions_run, code_run, noted)
    Operators = _operators_recorder(TorchDispatchMode, torch.Tensor, operators_run, largest)

    def module_called(module, inputs):
        classes_run.add(type(module))

    hook = register_module_forward_pre_hook(module_called)
    functions, operator_mode = Functions(), Operators() if operators else None
    try:
        functions.__enter__()
        if operator_mode is not None:
            operator_mode.__enter__()
        yield
    finally:
        hook.remove()
        noted[0] = None  # the frame is let go (a PyTorch call made while the modes are taken off still finds a slot)
        function_modes, dispatch_modes = _get_current_function_mode_stack(), _get_current_dispatch_mode_stack()
        if (function_modes and function_modes[-1] is functions) and (
            operator_mode is None or (dispatch_modes and dispatch_modes[-1] is operator_mode)
        ):
            if operator_mode is not None:
                operator_mode.__exit__(None, None, None)
            functions.__exit__(None, None, None)
        else:  # the learner's code took a mode of the recording off, or left one of its own above it
            names.add(DISTURBED)
            if any(mode is operator_mode for mode in dispatch_modes):
                while _pop_mode() is not operator_mode:
                    pass
            if any(mode is functions for mode in function_modes):
                while torch._C._pop_torch_function_stack() is not functions:
                    pass
        names.update("function " + getattr(func, "__name__", str(func)) for func in functions_run)
        names.update(f"aten {func.overloadpacket.__name__}" for func in operators_run)
        names.update(f"module {cls.__module__}.{cls.__qualname__}" for cls in classes_run)
        names.update(_watched_python_names(code_run))


# The two modes of a recording (_recording), made anew for each. PyTorch calls their methods directly on every call
# (note_callers' frame_of(2) counts on no layer in between), and what they record into are closure variables. Their
# bases and Tensor are what _recording bound before the learner's code ran.
def _functions_recorder(base: type, names: set, functions_run: set, code_run: set, noted: list) -> type:
    """The recording's torch function mode: each PyTorch function called from Python into ``functions_run``,
    and the code of the Python functions between the judge's call and that call into ``code_run``."""
    entry, frame_of = _run.__code__, sys._getframe

    def note_callers() -> None:  # the Python functions between the judge's call and this PyTorch call
        frame = frame_of(2)
        if frame is noted[0]:
            return
        noted[0] = frame
        while frame is not None and frame.f_code is not entry:
            code_run.add(frame.f_code)
            frame = frame.f_back

    class Functions(base):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            note_callers()
            try:
                functions_run.add(func)
            except TypeError:  # an unhashable callable
                names.add("function " + getattr(func, "__name__", type(func).__name__))
            return func(*args, **(kwargs or {}))

    return Functions


def _operators_recorder(base: type, Tensor: type, operators_run: set, largest: list) -> type:
    """The recording's torch dispatch mode: each ATen operator run into ``operators_run``, and the number of
    elements of the largest tensor one returned into ``largest[0]``."""

    class Operators(base):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:  # nothing here is compiled: torch._dynamo (some 900 modules,
            return False  # 1-4 s) would be imported by the first recorded call otherwise

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            operators_run.add(func)
            result = func(*args, **(kwargs or {}))
            for output in result if isinstance(result, (tuple, list)) else (result,):
                if type(output) is Tensor and output.numel() > largest[0]:  # n x n scores made?
                    largest[0] = output.numel()
            return result

    return Operators


_watched_files = [-1, {}]  # [the number of modules loaded when it was read, {file: module name} of the watched ones]


def _watched_python_names(codes: set) -> set:
    """ "python <module>.<qualified name>" for the code objects that belong to a watched module's file."""
    if _watched_files[0] != len(sys.modules):  # read again whenever a module was loaded since (a call may import one)
        files = {}
        for name, module in list(sys.modules.items()):
            if name.startswith(WATCHED_PYTHON):
                path = getattr(module, "__file__", None)
                if path:
                    files[path] = name
        _watched_files[:] = [len(sys.modules), files]
    files = _watched_files[1]
    return {f"python {files[code.co_filename]}.{code.co_qualname}" for code in codes if code.co_filename in files}


def _run(asked: dict, work):
    """``work()`` with autograd as the judge asked, recorded if asked. What the learner's code prints goes to
    the kernel's output under the judge's request, which no cell shows."""
    torch = sys.modules.get("torch")
    names, largest = set(), [0]
    with contextlib.ExitStack() as stack:
        if torch is not None:
            stack.enter_context(torch.set_grad_enabled(bool(asked.get("grad", True))))
        if asked.get("record"):  # "operators" (or true): everything; "functions": no ATen operators
            stack.enter_context(_recording(names, largest, operators=asked["record"] != "functions"))
        result = work()
    return result, {"names": sorted(names), "largest_output": largest[0]}


def call(nonce: str, request: str) -> None:
    asked = json.loads(request)
    try:
        target = _target(asked)
        args = [_argument(item) for item in asked["args"]]
        kwargs = {key: _argument(item) for key, item in asked["kwargs"].items()}
        result, recorded = _run(asked, lambda: target(*args, **kwargs))
    except BaseException as error:  # noqa: BLE001  (the learner's exception is the answer)
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})
        return
    # An argument the call left as it came goes back as None (the judge keeps its own): only what changed crosses.
    after = []
    for sent, item in zip(asked["args"], args, strict=False):
        reply = None if _is_handle(sent) else _reply(item)
        after.append(None if reply is None or reply.get("data") == sent else reply)
    payload = {"result": _reply(result), "args_after": after, "recorded": recorded}
    _answer(nonce, payload)


def get(nonce: str, request: str) -> None:
    asked = json.loads(request)
    try:
        value = getattr(_argument({"handle": asked["handle"]}), asked["attribute"])
        _answer(nonce, {"result": _reply(value, hold_tensors=True)})
    except BaseException as error:  # noqa: BLE001
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})


def items(nonce: str, request: str) -> None:
    asked = json.loads(request)
    try:
        found = []
        for item in _argument({"handle": asked["handle"]}):
            if len(found) == MAX_ITEMS:
                raise ValueError(f"more than {MAX_ITEMS} items")
            found.append(item)
        _answer(nonce, {"result": [_reply(item, hold_tensors=True) for item in found]})
    except BaseException as error:  # noqa: BLE001
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})


def fetch(nonce: str, request: str) -> None:
    asked = json.loads(request)
    try:
        _answer(nonce, {"result": {"data": encode(_argument({"handle": asked["handle"]}))}})
    except BaseException as error:  # noqa: BLE001
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})


def vjp(nonce: str, request: str) -> None:
    """The call with autograd on, then the gradients of sum(output * upstream): for every parameter of the
    module called (by name; None where it gets none) and every tensor input that requires a gradient."""
    import torch

    asked = json.loads(request)
    try:
        target = _target(asked)
        args = [_argument(item) for item in asked["args"]]
        kwargs = {key: _argument(item) for key, item in asked["kwargs"].items()}
        module = target if isinstance(target, torch.nn.Module) else getattr(target, "__self__", None)
        parameters = list(module.named_parameters()) if isinstance(module, torch.nn.Module) else []
        inputs = [item for item in args if isinstance(item, torch.Tensor) and item.requires_grad]
        upstream = decode(asked["upstream"])

        def forward_and_backward():
            output = target(*args, **kwargs)
            wanted = [p for _, p in parameters] + inputs
            grads = torch.autograd.grad(output, wanted, grad_outputs=upstream, allow_unused=True) if wanted else ()
            return output, grads

        (output, grads), recorded = _run({**asked, "grad": True}, forward_and_backward)
    except BaseException as error:  # noqa: BLE001
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})
        return
    names = [name for name, _ in parameters]
    _answer(
        nonce,
        {
            "result": _reply(output),
            "parameter_grads": {name: _reply(g) for name, g in zip(names, grads[: len(names)], strict=False)},
            "input_grads": [_reply(g) for g in grads[len(names) :]],
            "recorded": recorded,
        },
    )


def release(nonce: str, request: str) -> None:
    _held.clear()
    _answer(nonce, {"released": True})


def cpu_seconds(nonce: str, request: str) -> None:
    """The CPU time the kernel's process has used (a test of a training budget compares it with the notebook's)."""
    import time

    _answer(nonce, {"result": {"data": time.process_time()}})


# ------------------------------------------------------------------------------------------------
# Probes: language models of the grader's own, made in the kernel from data (settings, a seed), for
# tests that hand the learner's code a model (a leak detector is handed models that let the future
# leak and models that do not). Held like any object (judge.probe_language_model gives the Remote);
# the learner's code may look inside them, as at any model it is handed.
# ------------------------------------------------------------------------------------------------

LANGUAGE_MODEL_SETTINGS = {  # setting: default (vocab_size has none)
    "vocab_size": None,
    "architecture": "attention",  # "attention", "recurrent" (a GRU) or "token_by_token" (embedding, linear)
    "mask": "causal",  # attention: "causal", "none", "off_by_one", "transposed" or "last_key_visible"
    "mask_in": "both",  # attention: the modes the mask is applied in ("both", "train", "eval"); else none
    "bidirectional": False,  # recurrent
    "dropout": 0.1,  # attention: on the attention weights and on each block's outputs
    "width": 16,
    "max_len": 64,
    "seed": 0,  # the weights: made under this seed, the kernel's random state untouched
}
_probe_classes: dict = {}


def probe_mask(rule: str, length: int):
    """(length, length) bool, True where query i may attend to key j, for a mask rule of the settings."""
    import torch

    causal = torch.ones(length, length, dtype=torch.bool).tril()  # key j <= query i
    if rule == "causal":
        return causal
    if rule == "none":
        return torch.ones_like(causal)
    if rule == "off_by_one":
        return torch.ones(length, length, dtype=torch.bool).tril(1)  # query i also sees key i + 1
    if rule == "transposed":
        return causal.T.contiguous()  # query i sees keys i.. (the future, not the past)
    if rule == "last_key_visible":
        causal[:, -1] = True  # every query sees the last token
        return causal
    raise ValueError(f"no mask rule {rule!r}")


def _language_model_classes() -> dict:
    """The probes' module classes, made once (PyTorch is imported only when a probe is asked for)."""
    if _probe_classes:
        return _probe_classes
    import torch
    from torch import nn

    class ProbeBlock(nn.Module):
        """Pre-norm block: multi-head self-attention under a mask (or none), then an MLP; dropout on the
        attention weights and on what each part adds to the residual stream."""

        def __init__(self, width: int, heads: int, dropout: float):
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
            self.dropout = nn.Dropout(dropout)

        def forward(self, x, mask):
            batch, length, width = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, heads, T, T)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            mixed = self.dropout(scores.softmax(dim=-1)) @ v  # (B, heads, T, d)
            x = x + self.dropout(self.out(mixed.transpose(1, 2).reshape(batch, length, width)))
            return x + self.dropout(self.mlp(self.norm2(x)))

    class ProbeAttentionModel(nn.Module):
        """tokens (B, T) -> logits (B, T, vocab): embeddings and positions, two blocks, a linear head."""

        def __init__(self, settings: dict):
            super().__init__()
            self.rule, self.mask_in = settings["mask"], settings["mask_in"]
            width, vocab_size = settings["width"], settings["vocab_size"]
            self.embedding = nn.Embedding(vocab_size, width)
            self.positions = nn.Embedding(settings["max_len"], width)
            self.blocks = nn.ModuleList(ProbeBlock(width, 2, settings["dropout"]) for _ in range(2))
            self.head = nn.Linear(width, vocab_size)

        def forward(self, tokens):
            length = tokens.shape[1]
            x = self.embedding(tokens) + self.positions(torch.arange(length, device=tokens.device))
            masked = self.mask_in == "both" or (self.mask_in == "train") == self.training
            mask = probe_mask(self.rule, length).to(tokens.device) if masked else None
            for block in self.blocks:
                x = block(x, mask)
            return self.head(x)

    class ProbeRecurrentModel(nn.Module):
        """tokens (B, T) -> logits (B, T, vocab) through a GRU (one way: causal; both ways: sees the future)."""

        def __init__(self, settings: dict):
            super().__init__()
            width, vocab_size, both = settings["width"], settings["vocab_size"], settings["bidirectional"]
            self.embedding = nn.Embedding(vocab_size, width)
            self.rnn = nn.GRU(width, width, batch_first=True, bidirectional=both)
            self.head = nn.Linear(2 * width if both else width, vocab_size)

        def forward(self, tokens):
            return self.head(self.rnn(self.embedding(tokens))[0])

    def token_by_token(settings: dict) -> nn.Module:
        """tokens (B, T) -> logits (B, T, vocab), each position from its own token only."""
        width, vocab_size = settings["width"], settings["vocab_size"]
        return nn.Sequential(nn.Embedding(vocab_size, width), nn.Linear(width, vocab_size))

    _probe_classes.update(attention=ProbeAttentionModel, recurrent=ProbeRecurrentModel, token_by_token=token_by_token)
    return _probe_classes


def language_model_settings(asked: dict) -> dict:
    """The settings of a probe language model, checked: known names, plain values, defaults filled in."""
    unknown = sorted(set(asked) - set(LANGUAGE_MODEL_SETTINGS))
    if unknown:
        raise ValueError(f"unknown settings {unknown}")
    settings = {**LANGUAGE_MODEL_SETTINGS, **asked}
    for name in ("vocab_size", "width", "max_len", "seed"):
        if type(settings[name]) is not int or settings[name] < (0 if name == "seed" else 1):
            raise ValueError(f"{name} must be a positive int, got {settings[name]!r}")
    if settings["width"] % 2:
        raise ValueError("width must be even (two heads)")
    if type(settings["dropout"]) not in (int, float) or not 0 <= settings["dropout"] < 1:
        raise ValueError(f"dropout must be in [0, 1), got {settings['dropout']!r}")
    choices = {
        "architecture": ("attention", "recurrent", "token_by_token"),
        "mask": ("causal", "none", "off_by_one", "transposed", "last_key_visible"),
        "mask_in": ("both", "train", "eval"),
        "bidirectional": (False, True),
    }
    for name, allowed in choices.items():
        if settings[name] not in allowed or type(settings[name]) is not type(allowed[0]):
            raise ValueError(f"{name} must be one of {allowed}, got {settings[name]!r}")
    return settings


def make_language_model(settings: dict):
    """The probe language model for these settings (checked), its weights made under settings["seed"]."""
    import torch

    settings = language_model_settings(settings)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(settings["seed"])
        return _language_model_classes()[settings["architecture"]](settings)


def language_model_probe(nonce: str, request: str) -> None:
    """Make a probe language model from the judge's settings and hold it; the answer is its handle."""
    try:
        model = make_language_model(json.loads(request))
        _answer(nonce, {"result": {"held": _hold(model)}})
    except BaseException as error:  # noqa: BLE001
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})


# ------------------------------------------------------------------------------------------------
# Probes for timing code: workloads whose calls take times the test chose, and a pretend GPU, made in
# the kernel from data (judge.probe_timing gives the Remote), for tests that hand a learner's benchmark a
# function whose timings they know. A workload records its calls; recorded() gives them back as data.
# ------------------------------------------------------------------------------------------------

TIMING_PROBE_MAX_SECONDS = 5.0  # the longest call of a workload, and the most work queued at once


def _seconds(values, what: str) -> tuple:
    values = tuple(values)
    if not all(type(s) in (int, float) and 0 <= s <= TIMING_PROBE_MAX_SECONDS for s in values):
        raise ValueError(f"{what} must be seconds between 0 and {TIMING_PROBE_MAX_SECONDS}, got {values!r}")
    return values


class ProbeWorkload:
    """A function of tensors whose calls take known times: the seconds of ``first`` for the first calls,
    then those of ``then`` over and over; it returns its first argument. The time is slept, or queued on a
    pretend GPU (``ProbePretendGPU.workload``: the call returns at once and the GPU is busy that long).
    ``recorded()``: per call, the shapes, dtypes and device types of its tensor arguments, in order."""

    def __init__(self, first=(), then=(0.0,), gpu=None):
        self._first, self._then = _seconds(first, "first"), _seconds(then, "then")
        if not self._then:
            raise ValueError("then needs at least one duration")
        self._gpu, self._calls = gpu, []

    def __call__(self, *args, **kwargs):
        import time

        import torch

        arguments = [*args, *kwargs.values()]
        tensors = [value for value in arguments if isinstance(value, torch.Tensor)]
        self._calls.append(
            {
                "shapes": [list(tensor.shape) for tensor in tensors],
                "dtypes": [str(tensor.dtype).replace("torch.", "") for tensor in tensors],
                "devices": [tensor.device.type for tensor in tensors],
            }
        )
        index = len(self._calls) - 1
        late = index - len(self._first)
        seconds = self._first[index] if late < 0 else self._then[late % len(self._then)]
        if self._gpu is not None:
            self._gpu.enqueue(seconds)
        elif seconds:
            time.sleep(seconds)
        return arguments[0] if arguments else None

    def recorded(self) -> list:
        return [dict(call) for call in self._calls]


class ProbePretendGPU:
    """A pretend CUDA device for timing code on a CPU. Inside ``run(function, *args, **kwargs)``, "cuda"
    tensors are CPU tensors; the work a workload of this GPU queues (``workload(first, then)``, or
    ``enqueue(seconds)``) keeps it busy while the call returns at once, as a kernel launch does;
    ``torch.cuda.synchronize()`` waits for that work, and CUDA events complete when the work queued before
    them is done. torch.cuda is itself again when run() returns."""

    def __init__(self):
        import time

        self._free_at = time.perf_counter()  # when the queued work will be done

    def enqueue(self, seconds) -> None:
        import time

        (seconds,) = _seconds([seconds], "enqueue")
        self._free_at = max(self._free_at, time.perf_counter()) + seconds

    def synchronize(self) -> None:
        import time

        delay = self._free_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    def workload(self, first=(), then=(0.0,)) -> ProbeWorkload:
        return ProbeWorkload(first, then, gpu=self)

    def run(self, function, *args, **kwargs):
        with self._on_pretend_gpu():
            return function(*args, **kwargs)

    @contextlib.contextmanager
    def _on_pretend_gpu(self):
        import time

        import torch
        from torch.overrides import TorchFunctionMode

        gpu = self
        Event = _pretend_cuda_event(gpu, time)
        CudaOnCpu = _cuda_on_cpu_mode(TorchFunctionMode, torch)
        fakes = {
            "is_available": lambda: True,
            "device_count": lambda: 1,
            "current_device": lambda: 0,
            "get_device_name": lambda *a, **k: "pretend GPU",
            "synchronize": lambda *a, **k: gpu.synchronize(),
            "Event": Event,
            "current_stream": lambda *a, **k: gpu,
            "default_stream": lambda *a, **k: gpu,
            "reset_peak_memory_stats": lambda *a, **k: None,
            "reset_max_memory_allocated": lambda *a, **k: None,
            "memory_allocated": lambda *a, **k: 0,
            "max_memory_allocated": lambda *a, **k: 0,
            "memory_reserved": lambda *a, **k: 0,
            "max_memory_reserved": lambda *a, **k: 0,
            "empty_cache": lambda: None,
        }
        saved = {name: getattr(torch.cuda, name) for name in fakes}
        try:
            for name, fake in fakes.items():
                setattr(torch.cuda, name, fake)
            with CudaOnCpu():
                yield
        finally:
            for name, original in saved.items():
                setattr(torch.cuda, name, original)


# The pretend GPU's parts (ProbePretendGPU._on_pretend_gpu), made each time it runs a function: its events are
# that GPU's (they complete when its queued work is done).
def _pretend_cuda_event(gpu: ProbePretendGPU, time) -> type:
    """torch.cuda.Event on the pretend GPU: recorded, it completes when the work ``gpu`` has queued is done."""

    class Event:
        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.done_at = None

        def record(self, stream=None):
            self.done_at = max(gpu._free_at, time.perf_counter())

        def query(self):
            return self.done_at is not None and time.perf_counter() >= self.done_at

        def synchronize(self):
            if self.done_at is not None and self.done_at > time.perf_counter():
                time.sleep(self.done_at - time.perf_counter())

        def wait(self, stream=None):
            pass

        def elapsed_time(self, end):
            if self.done_at is None or end.done_at is None:
                raise RuntimeError("both events must be recorded before elapsed_time")
            if not end.query():
                raise RuntimeError("CUDA error: device not ready (synchronize the end event before elapsed_time)")
            return (end.done_at - self.done_at) * 1e3  # milliseconds, as CUDA events report

    return Event


def _cuda_on_cpu_mode(base: type, torch) -> type:
    """A torch function mode under which "cuda" means the CPU, and tensors say they are on the pretend GPU."""

    def on_cpu(value):
        if isinstance(value, torch.device) and value.type == "cuda":
            return torch.device("cpu")
        return "cpu" if isinstance(value, str) and value.startswith("cuda") else value

    class CudaOnCpu(base):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.Tensor.cuda:
                return args[0]
            if func is torch.device:  # torch.device("cuda") itself stays a CUDA device
                return func(*args, **kwargs)
            owner = getattr(func, "__self__", None)  # tensor.device and tensor.is_cuda tell of the pretend GPU
            if owner is torch.Tensor.device:
                return torch.device("cuda", 0)
            if owner is torch.Tensor.is_cuda:
                return True
            args = tuple(on_cpu(a) for a in args)
            return func(*args, **{key: on_cpu(value) for key, value in kwargs.items()})

    return CudaOnCpu


TIMING_PROBES = {"workload": ProbeWorkload, "pretend_gpu": ProbePretendGPU}


def timing_probe(nonce: str, request: str) -> None:
    """Make a timing probe (TIMING_PROBES) from the judge's kind and settings and hold it; the answer is its handle."""
    try:
        asked = json.loads(request)
        settings = decode(asked["settings"])
        if asked["kind"] not in TIMING_PROBES or type(settings) is not dict:
            raise ValueError(f"no timing probe {asked['kind']!r} with settings {settings!r}")
        _answer(nonce, {"result": {"held": _hold(TIMING_PROBES[asked["kind"]](**settings))}})
    except BaseException as error:  # noqa: BLE001
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})
