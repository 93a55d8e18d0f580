"""Installed in every learner's kernel during grading, before any learner code (standard library only).

Two jobs:

1. Output limits. Every output message leaves the kernel through `Session.send`; the guard caps
   each message and the total per cell, so `print` in an endless loop cannot flood the grader.
   Text beyond the cell's limit is dropped already when it is written to sys.stdout/sys.stderr,
   so a printing loop cannot fill the kernel's memory between two flushes either.
   Errors are always delivered (shortened if huge), and when stderr text is dropped a short stderr
   note is kept, so that truncation never turns a failing cell into a passing one.
2. A tripwire. It remembers the objects the tests rely on (builtins, NumPy and PyTorch checks,
   IPython's execution machinery, interpreter hooks). Before every test cell the grader calls
   `course_grader_guard.restore()`, which puts back whatever learner code replaced (patched
   library functions, custom exception handlers, input or AST transformers, trace functions,
   import hooks, torch function modes), so that tests run with the real checks. At the end the
   grader calls `course_grader_guard.report(nonce)`, which prints one JSON line listing what was
   restored and what is still changed. Learner code can try to silence the guard, but only with
   constructs the static checks flag, and a missing report is itself reported.
"""
from __future__ import annotations

import builtins
import json
import os
import sys
import types

OUTPUT_MESSAGES = {"stream", "display_data", "execute_result", "update_display_data", "error"}
CHECKED_ATTRIBUTES = {
    "numpy": "allclose isclose array_equal array asarray abs max min exp sum all any isfinite ndarray float64 "
             "max maximum where".split(),
    "numpy.testing": "assert_allclose assert_array_equal assert_equal assert_array_almost_equal".split(),
    "math": "isclose sqrt exp isfinite fabs".split(),
    "torch": "allclose isclose equal tensor as_tensor from_numpy Tensor softmax float32 float64".split(),
    "torch.testing": "assert_close".split(),
    "torch.nn.functional": "softmax scaled_dot_product_attention".split(),
    "json": "dumps loads".split(),
    "sys": "stdout stderr".split(),
}
TENSOR_METHODS = "tolist detach cpu numpy double float __eq__ __array__ __bool__ __float__ __torch_function__".split()
SHELL_METHODS = ("run_cell run_cell_async run_ast_nodes run_code transform_cell showtraceback _showtraceback "
                 "showsyntaxerror CustomTB set_custom_exc ex ev should_run_async").split()
# IPython swaps these builtins in and out around every execution, and sets `_` to the last result.
IPYTHON_MANAGED_BUILTINS = {"exit", "quit", "get_ipython", "display", "__IPYTHON__", "dreload", "_", "__", "___",
                            "input", "raw_input"}
_MISSING = object()


def _current(container, key):
    """What a watched place holds now: a dict entry, a class attribute as stored, or an attribute."""
    if isinstance(container, dict):
        return container.get(key, _MISSING)
    if isinstance(container, type):
        return _raw_attribute(container, key)
    return getattr(container, key, _MISSING)


def _raw_attribute(klass, name):
    """The attribute as stored in the class (getattr would build a fresh bound object each time)."""
    for base in klass.__mro__:
        if name in vars(base):
            return vars(base)[name]
    return _MISSING


def install(app, settings: dict) -> None:
    shell, kernel = app.shell, app.kernel
    sessions = {id(obj): obj for obj in (kernel.session, getattr(shell.displayhook, "session", None),
                                         getattr(shell.display_pub, "session", None),
                                         getattr(sys.stdout, "session", None), getattr(sys.stderr, "session", None))
                if obj is not None}
    limiter = _OutputLimiter(int(settings.get("message_chars", 200_000)), int(settings.get("cell_chars", 2_000_000)))
    for session in sessions.values():
        limiter.wrap(session)
    for stream in (sys.stdout, sys.stderr):
        limiter.wrap_stream(stream)
    tripwire = _Tripwire(shell)
    module = types.ModuleType("course_grader_guard")
    module.report = tripwire.report
    module.restore = tripwire.restore
    sys.modules["course_grader_guard"] = module


class _OutputLimiter:
    def __init__(self, message_chars: int, cell_chars: int):
        self.message_chars, self.cell_chars = message_chars, cell_chars
        self.used: dict[str, int] = {}
        self.noted: set[str] = set()
        self.written: dict[tuple[str, str], int] = {}   # (cell, stream name) -> characters buffered

    def wrap_stream(self, stream) -> None:
        """Drop text written past the cell's limit before the kernel buffers it.

        One character more than the limit is let through, so that `limit` below still sees the
        excess and adds its note to the cell's output.
        """
        original = getattr(stream, "write", None)
        if original is None or not hasattr(stream, "parent_header"):
            return
        limit = self.cell_chars + 1

        def write(text):
            parent = getattr(stream, "parent_header", None) or {}
            key = ((parent.get("header") or parent).get("msg_id", ""), getattr(stream, "name", ""))
            written = self.written.get(key, 0)
            if not isinstance(text, str) or written + len(text) <= limit:
                self.written[key] = written + (len(text) if isinstance(text, str) else 0)
                return original(text)
            kept = text[:max(limit - written, 0)]
            self.written[key] = limit
            if kept:
                original(kept)
            return len(text)

        stream.write = write

    def wrap(self, session) -> None:
        original = session.send
        limiter = self

        def send(stream, msg_or_type, content=None, parent=None, ident=None, buffers=None, track=False,
                 header=None, metadata=None):
            if isinstance(msg_or_type, dict):
                message_type = msg_or_type.get("header", {}).get("msg_type")
                parent_id = msg_or_type.get("parent_header", {}).get("msg_id", "")
                body = msg_or_type.get("content")
            else:
                message_type = msg_or_type
                source = parent or {}
                parent_id = (source.get("header") or source).get("msg_id", "")
                body = content
            if message_type in OUTPUT_MESSAGES and isinstance(body, dict):
                replacement = limiter.limit(message_type, parent_id, body)
                if replacement is None:
                    return None
                if isinstance(msg_or_type, dict):
                    msg_or_type = dict(msg_or_type, content=replacement)
                else:
                    content = replacement
            return original(stream, msg_or_type, content, parent, ident, buffers, track, header, metadata)

        session.send = send

    def limit(self, message_type: str, parent_id: str, body: dict) -> dict | None:
        if message_type == "error":
            shortened = dict(body)
            shortened["evalue"] = str(body.get("evalue", ""))[:10_000]
            shortened["traceback"] = [str(line)[:10_000] for line in list(body.get("traceback", []))[:200]]
            return shortened
        used = self.used.get(parent_id, 0)
        left = max(self.cell_chars - used, 0)
        if message_type == "stream":
            text = str(body.get("text", ""))
            allowed = min(len(text), self.message_chars, left)
            self.used[parent_id] = used + allowed
            if allowed == len(text):
                return body
            kept = text[:allowed]
            note_key = f"{parent_id}:{body.get('name')}"
            if note_key not in self.noted:
                self.noted.add(note_key)
                kept += f"\n[output cut by the grader: more than {self.cell_chars} characters in this cell]\n"
            elif not kept:
                return None
            return dict(body, text=kept)
        data = body.get("data", {})
        size = sum(len(str(value)) for value in data.values()) if isinstance(data, dict) else 0
        if size <= min(self.message_chars, left):
            self.used[parent_id] = used + size
            return body
        self.used[parent_id] = self.cell_chars
        return dict(body, data={"text/plain": f"[display output of {size} characters removed by the grader]"},
                    metadata={})


class _Tripwire:
    """Remembers the objects tests rely on; `report` says which ones learner code replaced."""

    def __init__(self, shell):
        self.shell = shell
        self.watched: list[tuple[str, object, str, object]] = []   # (label, container, key, original)
        self.print_line = sys.stdout.write
        self.flush = sys.stdout.flush
        self.dumps = json.dumps
        self.work_dir = os.getcwd()
        for name, value in vars(builtins).items():
            if name in IPYTHON_MANAGED_BUILTINS:
                continue
            self.watched.append((f"builtins.{name}", vars(builtins), name, value))
        for module_name, attributes in CHECKED_ATTRIBUTES.items():
            module = sys.modules.get(module_name)
            if module is None:
                continue
            self.watched.append((f"sys.modules[{module_name!r}]", sys.modules, module_name, module))
            for attribute in attributes:
                self.watched.append((f"{module_name}.{attribute}", module, attribute, getattr(module, attribute, _MISSING)))
        torch = sys.modules.get("torch")
        if torch is not None:
            for method in TENSOR_METHODS:
                self.watched.append((f"torch.Tensor.{method}", torch.Tensor, method, _raw_attribute(torch.Tensor, method)))
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            for method in ("__eq__", "__array_function__", "__array_ufunc__", "tolist"):
                self.watched.append((f"numpy.ndarray.{method}", numpy.ndarray, method, _raw_attribute(numpy.ndarray, method)))
        shell_class = type(shell)
        for method in SHELL_METHODS:
            self.watched.append((f"IPython shell method {method}", shell_class, method, _raw_attribute(shell_class, method)))
        self.instance_overrides = {name for name in SHELL_METHODS if name in vars(shell)}
        self.state = self._shell_state()
        self.modules_before = set(sys.modules)
        self.saved = self._saved_objects()
        self.restored: list[str] = []

    def _shell_state(self) -> dict:
        shell = self.shell
        manager = getattr(shell, "input_transformer_manager", None)
        return {
            "custom exception handlers": tuple(shell.custom_exceptions),
            "AST transformers": tuple(id(item) for item in shell.ast_transformers),
            "input transformers (cleanup)": tuple(id(item) for item in shell.input_transformers_cleanup),
            "input transformers (post)": tuple(id(item) for item in shell.input_transformers_post),
            "input transformer manager": id(manager),
            "input transformer manager lists": tuple(
                tuple(id(item) for item in getattr(manager, name, ()))
                for name in ("cleanup_transforms", "line_transforms", "token_transformers")),
            "compiler": id(shell.compile),
            "display hook": id(shell.displayhook),
            "display publisher": id(shell.display_pub),
            # Libraries register callbacks and import hooks of their own; only the notebook's count.
            "event callbacks": tuple(sorted(name for name, callbacks in shell.events.callbacks.items()
                                            for callback in callbacks if self._learner_made(callback))),
            "trace function": id(sys.gettrace()),
            "profile function": id(sys.getprofile()),
            "import hooks": tuple(id(item) for item in sys.meta_path if self._learner_made(item)),
            "path hooks": tuple(id(item) for item in sys.path_hooks if self._learner_made(item)),
        }

    def _saved_objects(self) -> dict:
        shell = self.shell
        manager = getattr(shell, "input_transformer_manager", None)
        return {
            "custom_exceptions": tuple(shell.custom_exceptions),
            "ast_transformers": list(shell.ast_transformers),
            "input_transformers_cleanup": list(shell.input_transformers_cleanup),
            "input_transformers_post": list(shell.input_transformers_post),
            "manager": manager,
            "manager_lists": {name: list(getattr(manager, name)) for name in
                              ("cleanup_transforms", "line_transforms", "token_transformers") if hasattr(manager, name)},
            "compile": shell.compile, "displayhook": shell.displayhook, "display_pub": shell.display_pub,
            "callbacks": {name: list(callbacks) for name, callbacks in shell.events.callbacks.items()},
            "meta_path": list(sys.meta_path), "path_hooks": list(sys.path_hooks),
        }

    def _learner_made(self, item) -> bool:
        module = getattr(item, "__module__", None) or getattr(type(item), "__module__", "")
        return module in ("__main__", self.shell.user_module.__name__) or str(module).startswith("__ipython")

    def restore(self) -> None:
        """Undo what learner code replaced, before a test cell runs; remembers what it undid."""
        undone = []
        for label, container, key, original in self.watched:
            current = _current(container, key)
            if current is original:
                continue
            try:
                if isinstance(container, dict):
                    container[key] = original
                else:
                    setattr(container, key, original)
                undone.append(label)
            except Exception:
                undone.append(f"{label} (could not be undone)")
        shell, saved = self.shell, self.saved
        for name in SHELL_METHODS:
            if name in vars(shell) and name not in self.instance_overrides:
                delattr(shell, name)
                undone.append(f"IPython shell method {name}")
        if tuple(shell.custom_exceptions) != saved["custom_exceptions"]:
            shell.custom_exceptions = saved["custom_exceptions"]
            undone.append("custom exception handlers")
        for name in ("ast_transformers", "input_transformers_cleanup", "input_transformers_post"):
            current = getattr(shell, name)
            if [id(item) for item in current] != [id(item) for item in saved[name]]:
                current[:] = saved[name]
                undone.append(name.replace("_", " "))
        if shell.input_transformer_manager is not saved["manager"]:
            shell.input_transformer_manager = saved["manager"]
            undone.append("input transformer manager")
        for name, items in saved["manager_lists"].items():
            current = getattr(saved["manager"], name)
            if [id(item) for item in current] != [id(item) for item in items]:
                current[:] = items
                undone.append(f"input transformer manager {name}")
        for name in ("compile", "displayhook", "display_pub"):
            if getattr(shell, name) is not saved[name]:
                setattr(shell, name, saved[name])
                undone.append(f"IPython {name}")
        for name, callbacks in shell.events.callbacks.items():
            learner_made = [callback for callback in callbacks if self._learner_made(callback)]
            for callback in learner_made:
                callbacks.remove(callback)
                undone.append(f"{name} event callback")
        for hooks, label in ((sys.meta_path, "import hook"), (sys.path_hooks, "path hook")):
            for item in [item for item in hooks if self._learner_made(item)]:
                hooks.remove(item)
                undone.append(label)
        if sys.gettrace() is not None:
            sys.settrace(None)
            undone.append("trace function")
        if sys.getprofile() is not None:
            sys.setprofile(None)
            undone.append("profile function")
        torch = sys.modules.get("torch")
        if torch is not None:
            for length, pop, label in (("_len_torch_function_stack", "_pop_torch_function_stack", "torch function mode"),
                                       ("_len_torch_dispatch_stack", "_pop_torch_dispatch_stack", "torch dispatch mode")):
                try:
                    while getattr(torch._C, length)() > 0:
                        getattr(torch._C, pop)()
                        undone.append(label)
                except Exception:
                    pass
        self.restored.extend(item for item in undone if item not in self.restored)

    def report(self, nonce: str) -> None:
        problems = []
        for label, container, key, original in self.watched:
            current = _current(container, key)
            if current is not original:
                problems.append(f"{label} was replaced")
        overridden = {name for name in SHELL_METHODS if name in vars(self.shell)} - self.instance_overrides
        problems += [f"IPython shell method {name} was overridden on the instance" for name in sorted(overridden)]
        state = self._shell_state()
        problems += [f"{name} changed" for name, value in state.items() if value != self.state[name]]
        problems += self._torch_modes() + self._subclasses() + self._shadowed_builtins()
        for name in sorted(set(sys.modules) - self.modules_before):
            module_file = getattr(sys.modules.get(name), "__file__", None) or ""
            if module_file.startswith(self.work_dir + os.sep):
                problems.append(f"imported a module from the notebook's folder: {name}")
        problems = [f"undone before a test: {item} had been replaced" for item in self.restored] + problems
        self.print_line(self.dumps({"course_grader_guard": nonce, "problems": problems,
                                    "checked": len(self.watched) + len(state)}) + "\n")
        self.flush()

    def _torch_modes(self) -> list[str]:
        torch = sys.modules.get("torch")
        found = []
        if torch is None:
            return found
        for label, getter in (("a torch function mode is active", "_len_torch_function_stack"),
                              ("a torch dispatch mode is active", "_len_torch_dispatch_stack")):
            length = getattr(torch._C, getter, None)
            try:
                if length is not None and length() > 0:
                    found.append(label)
            except Exception:
                pass
        return found

    def _subclasses(self) -> list[str]:
        found = []
        for module_name, class_name in (("torch", "Tensor"), ("numpy", "ndarray")):
            module = sys.modules.get(module_name)
            if module is None:
                continue
            pending = list(type.__subclasses__(getattr(module, class_name)))
            while pending:
                subclass = pending.pop()
                pending.extend(type.__subclasses__(subclass))
                if subclass.__module__ in ("__main__", self.shell.user_module.__name__) or \
                        subclass.__module__.startswith("__ipython"):
                    found.append(f"the notebook defines a subclass of {module_name}.{class_name}: {subclass.__name__}")
        return found

    def _shadowed_builtins(self) -> list[str]:
        user_namespace = self.shell.user_ns
        names = sorted(name for name in ("print", "len", "isinstance", "type", "float", "int", "abs", "max", "min",
                                         "all", "any", "sum", "range", "zip", "AssertionError", "Exception")
                       if name in user_namespace and user_namespace[name] is not vars(builtins).get(name))
        return [f"the notebook rebinds the builtin {name!r}" for name in names]
