"""The judge's narrow channel into a learner's kernel: names looked up, functions called, results as data.

The hidden tests of an assignment graded with ``judge: "outside"`` run in the grader's process
(judge.py), never in the learner's kernel. When a test needs the learner's work it asks the kernel,
with one short statement that calls this module (the statement names a function and carries the
inputs, nothing of the test), and reads the answer from one line of the kernel's output:

    describe(names)     for each name: is it a function, data (numbers, strings, nested lists,
                        arrays, tensors) or missing; data comes back as data
    call(name, args)    the learner's function called on the judge's inputs; back come its result
                        and the arguments as they are after the call (a test may ask whether the
                        function changed them)

What crosses is data only, in both directions: JSON for numbers, strings, lists and dicts, and
NumPy's ``.npy`` format, read with ``allow_pickle=False``, for arrays and tensors (a tensor is sent
as its array and its kind, and rebuilt on the other side). Nothing is unpickled, so an answer can
carry no code. The kernel is the learner's: it may answer anything, and the judge treats every answer
as a claim to check against references it computes itself.

This module is imported in the kernel (by the statement above) and in the grader (for the codec);
it needs NumPy, and PyTorch where tensors are involved, nothing of the grader.
"""

from __future__ import annotations

import base64
import io
import json
import sys

ANSWER_PREFIX = "course-judge-answer"
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
    if type(value) is dict:
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


def _namespace() -> dict:
    from IPython import get_ipython

    return get_ipython().user_ns


def _answer(nonce: str, payload: dict) -> None:
    stream = sys.stdout
    stream.write(f"\n{ANSWER_PREFIX} {nonce} {json.dumps(payload)}\n")
    stream.flush()


def describe(nonce: str, request: str) -> None:
    namespace, described = _namespace(), {}
    for name in json.loads(request):
        if name not in namespace:
            described[name] = {"kind": "missing"}
        elif callable(namespace[name]) and not isinstance(namespace[name], type):
            described[name] = {"kind": "function"}
        else:
            try:
                described[name] = {"kind": "data", "value": encode(namespace[name])}
            except NotData as why:
                described[name] = {"kind": "other", "why": str(why)}
            except Exception as error:  # noqa: BLE001  (a learner's value may fail in any way when read)
                described[name] = {"kind": "other", "why": f"{type(error).__name__}: {error}"[:300]}
    _answer(nonce, {"described": described})


class _Discard(io.TextIOBase):
    """Where the learner's prints go while the judge calls their code: the answer must not drown in them."""

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        return len(text)


def call(nonce: str, request: str) -> None:
    import contextlib

    asked = json.loads(request)
    function = _namespace().get(asked["name"])
    args = [decode(item) for item in asked["args"]]
    kwargs = {key: decode(item) for key, item in asked["kwargs"].items()}
    try:
        with contextlib.redirect_stdout(_Discard()), contextlib.redirect_stderr(_Discard()):
            result = function(*args, **kwargs)
    except BaseException as error:  # noqa: BLE001  (the learner's exception is the answer)
        _answer(nonce, {"raised": [type(error).__name__, str(error)[:2000]]})
        return
    try:
        payload = {"result": encode(result), "args_after": [encode(item) for item in args]}
    except NotData as why:
        payload = {"not_data": f"the function returned {why}"}
    _answer(nonce, payload)
