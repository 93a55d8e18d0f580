"""Installed in every learner's kernel during grading, before any learner code (standard library only).

Three jobs:

1. Output limits (output.py). Every output message leaves the kernel through `Session.send`;
   the guard caps each message and the total per cell, so `print` in an endless loop cannot flood
   the grader, and truncation never turns a failing cell into a passing one.
2. References the tests rely on (the snapshot: references.py). Before any learner code runs,
   the guard takes a snapshot of every name a test can reach: each function, class and module bound
   in a loaded module's namespace (numpy, torch, math, the course's library and the modules the
   assignment's tests import, which the warm kernel imports ahead for that reason), the methods and
   descriptors of those modules' classes, the `sys.modules` entries, the builtins, IPython's
   execution machinery and the interpreter hooks. Before each part of a test cell the grader asks the guard to `restore` the
   snapshot (whatever learner code replaced, added over an inherited attribute, or removed is put
   back), and after the hidden part to `verify` it: a reference that changed *while the test ran*
   (learner code called by the test patched it) means the test's result cannot be trusted, and the
   grader fails that test. What cannot be undone fails the test too. Changing a library function
   in place (`__code__`, `__defaults__`) and installing trace or profile functions from notebook
   code are refused outright (an audit hook, which cannot be removed).
3. Threads. Notebook code may not start threads while it is graded (a thread could re-apply
   patches between the guard's restore and the test): the guard refuses them, and before and
   after every test it stops any thread running notebook code that got through anyway; one that
   cannot be stopped fails the test.

The grader talks to the guard with its own Jupyter message (`course_guard_request` on the shell
channel, answered by `course_guard_reply`), handled by the kernel directly: no code is executed in
the notebook's namespace for it, so nothing learner code rebinds there (`__import__`, `sys.modules`,
the guard's module) can intercept it. The guard's own code runs with a private copy of the builtins.
Learner code can still try to disable the guard, but only with constructs the static checks flag
(`get_ipython`, `gc`, frames, `ctypes`), and each request's reply carries the grader's nonce.

The guard's files are loaded by their paths with a private copy of the builtins (warmkernel.load_guard
loads this one; this one loads the others, see `_part`), and none of them stays in sys.modules.
"""

from __future__ import annotations

import _thread
import builtins
import ctypes
import importlib
import importlib.util
import os
import sys
import threading
import time
import types


def _part(filename: str) -> types.ModuleType:
    """A file of the guard's, loaded the way the guard is (warmkernel.load_guard): by its path, with the
    guard's builtins (a private copy in a kernel), and not left in sys.modules, where notebook code
    could reach it (it is there while it runs: dataclasses look their module up)."""
    name = f"course_grader_guard_{os.path.basename(filename).removesuffix('.py')}"
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    )
    part = importlib.util.module_from_spec(spec)
    vars(part)["__builtins__"] = __builtins__
    sys.modules[name] = part
    try:
        spec.loader.exec_module(part)
    finally:
        del sys.modules[name]
    return part


_references, _output = _part("references.py"), _part("output.py")
_messages = _part(os.path.join(os.pardir, "ground", "messages.py"))  # the records the grader reads
_References, _OutputLimiter = _references.References, _output.OutputLimiter
raw_attribute, trusted_roots = _references.raw_attribute, _references.trusted_roots
MESSAGE, REPLY = _messages.GUARD_REQUEST, _messages.GUARD_REPLY  # the grader's request, the guard's answer
SHELL_METHODS = (
    "run_cell run_cell_async run_ast_nodes run_code transform_cell showtraceback _showtraceback "
    "showsyntaxerror CustomTB set_custom_exc ex ev should_run_async"
).split()
MOST_LISTED = 40
_FUNCTION_PARTS = {"__code__", "__defaults__", "__kwdefaults__"}
_prepared: "_References | None" = None


def prepare() -> None:
    """Take the snapshot ahead, in the warm kernel, after its libraries are imported (see sandbox.py)."""
    global _prepared
    _prepared = _References(trusted_roots())


def install(app, settings: dict) -> None:
    """Put the guard into a started IPython kernel app: output limits, then the tripwire. `settings`: a
    GuardSettings as a dict (messages.py)."""
    shell, kernel = app.shell, app.kernel
    sessions = {
        id(obj): obj
        for obj in (
            kernel.session,
            getattr(shell.displayhook, "session", None),
            getattr(shell.display_pub, "session", None),
            getattr(sys.stdout, "session", None),
            getattr(sys.stderr, "session", None),
        )
        if obj is not None
    }
    limiter = _OutputLimiter(int(settings.get("message_chars", 200_000)), int(settings.get("cell_chars", 2_000_000)))
    for session in sessions.values():
        limiter.wrap(session)
    for stream in (sys.stdout, sys.stderr):
        limiter.wrap_stream(stream)
    _quiet_library_threads()
    _Tripwire(shell, kernel)  # reached through its message handler (see _Tripwire._handle)


def _thread_kind(function) -> str:
    """What a new thread would run, for the review: its class and target (threading) or the function."""
    thread = getattr(function, "__self__", None)
    target = getattr(thread, "_target", None) if thread is not None else function
    kind = type(thread).__qualname__ if thread is not None else "thread"
    where = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or ""
    return f"{kind} running {where}.{name}" if name else kind


def _quiet_library_threads() -> None:
    """tqdm starts a monitor thread with its first progress bar; threads are refused to notebook code,
    and the monitor only tidies up stalled bars, so it is switched off."""
    tqdm_std = sys.modules.get("tqdm.std")
    if tqdm_std is not None:
        tqdm_std.tqdm.monitor_interval = 0


class _Tripwire:
    """Keeps the tests' references as they were before learner code ran (see the module's docstring)."""

    def __init__(self, shell, kernel):
        self.shell, self.kernel = shell, kernel
        self.roots = trusted_roots()
        self.work_dir = os.getcwd()
        self.restored: list[str] = []  # what was undone before a test, over the whole notebook
        self.refused: list[str] = []  # what notebook code tried and the guard refused
        self.changed_during: list[str] = []
        self.undone_before_import: list[str] = []
        self.undone_since_check: list[str] = []  # undone by import windows since the last restore or verify
        self.threads_stopped: list[str] = []
        self.window = False
        self.current_frames, self.get_ident = sys._current_frames, threading.get_ident
        self.send = kernel.session.send
        # Installed before the snapshot is re-read, so that they are what it holds and restores.
        self._refuse_threads()
        self._watch_imports()
        self.references = _prepared if _prepared is not None else _References(self.roots)
        # The snapshot is re-read when the first cell (or the grader's first request) arrives: until
        # then only the kernel's own start-up has run, and the kernel answers sooner.
        self.started = False
        original_execute = kernel.shell_handlers["execute_request"]

        async def execute_request(stream, ident, parent):
            self._start()
            result = original_execute(stream, ident, parent)
            if hasattr(result, "__await__"):
                result = await result
            return result

        kernel.shell_handlers["execute_request"] = execute_request
        shell_class = type(shell)
        self.shell_methods = [(name, raw_attribute(shell_class, name)) for name in SHELL_METHODS]
        self.instance_overrides = {name for name in SHELL_METHODS if name in vars(shell)}
        self.handler = self._handle  # one bound method, so that its identity can be checked
        kernel.shell_handlers[MESSAGE] = self.handler
        self.state = self._shell_state()
        self.kernel_calls = _part("kernel_calls.py")  # the judge's questions: a private copy, out of imports' reach
        self.modules_before = set(sys.modules)
        self.saved = self._saved_objects()
        sys.addaudithook(self._audit)

    def _start(self) -> None:
        """Before anything of the notebook's runs: what the kernel's start-up changed is accepted."""
        if not self.started:
            self.references.rebase()
            self.started = True

    # -- what the grader asks -------------------------------------------------------------------
    def _handle(self, stream, ident, parent) -> None:
        self._start()
        content = parent.get("content", {}) if isinstance(parent, dict) else {}
        command = content.get("command")
        try:
            if command == "restore":
                answer = self.restore()
            elif command == "verify":
                answer = self.verify()
            elif command == "report":
                answer = {"problems": self.problems(), "checked": self.references.size()}
            elif command == "judge":  # a question of the judge (judge.py), answered in this reply, not in a cell
                answer = {"answer": self.kernel_calls.respond(content.get("verb"), content.get("request"))}
            else:
                answer = {"error": f"unknown command {command!r}"}
        except BaseException as error:  # the grader must hear of it, whatever happened
            answer = {"error": f"{type(error).__name__}: {error}"[:2000]}
        answer["nonce"] = content.get("nonce")
        self.send(stream, REPLY, answer, parent, ident)

    def restore(self) -> dict:
        """Before a test: stop notebook threads, then undo whatever learner code replaced."""
        threads = self._stop_notebook_threads()
        changed, stuck = self.references.changes(undo=True)
        changed += self._restore_shell()
        self.restored.extend(item for item in changed if item not in self.restored)
        self.undone_since_check.clear()
        return {"undone": changed[:MOST_LISTED], "undone_count": len(changed), "not_undone": stuck + threads}

    def verify(self) -> dict:
        """After a test: what changed while it ran (learner code called by the test); put back too."""
        threads = self._stop_notebook_threads()
        changed, stuck = self.references.changes(undo=True)
        changed += self._restore_shell()
        # What an import in the middle of the test put back was changed during the test all the same.
        changed += [item for item in dict.fromkeys(self.undone_since_check) if item not in changed]
        self.undone_since_check.clear()
        self.changed_during.extend(item for item in changed if item not in self.changed_during)
        return {"changed": changed[:MOST_LISTED], "changed_count": len(changed), "not_undone": stuck + threads}

    def problems(self) -> list[str]:
        problems = [f"undone before a test: {item} had been replaced" for item in self.restored]
        problems += [f"changed while a test ran: {item}" for item in self.changed_during]
        problems += [
            f"undone before a library was imported: {item} had been replaced" for item in self.undone_before_import
        ]
        problems += [f"refused: {item}" for item in self.refused]
        problems += [f"stopped a thread started by the notebook: {item}" for item in self.threads_stopped]
        changed, _ = self.references.changes(undo=False)
        problems += [f"{item} was replaced" for item in changed]
        overridden = {name for name in SHELL_METHODS if name in vars(self.shell)} - self.instance_overrides
        problems += [f"IPython shell method {name} was overridden on the instance" for name in sorted(overridden)]
        state = self._shell_state()
        problems += [f"{name} changed" for name, value in state.items() if value != self.state[name]]
        problems += self._torch_modes() + self._subclasses() + self._shadowed_builtins()
        for name in sorted(set(sys.modules) - self.modules_before):
            module_file = getattr(sys.modules.get(name), "__file__", None) or ""
            if module_file.startswith(self.work_dir + os.sep):
                problems.append(f"imported a module from the notebook's folder: {name}")
        return list(dict.fromkeys(problems))

    # -- notebook code, threads and refusals ----------------------------------------------------
    def notebook_code(self, code) -> bool:
        """Code that comes from the notebook (its cells, strings it executed, files in its folder)."""
        return not code.co_filename.startswith(self.roots)

    def called_from_notebook(self, frame) -> bool:
        while frame is not None:
            if self.notebook_code(frame.f_code):
                return True
            frame = frame.f_back
        return False

    def _audit(self, event: str, args: tuple) -> None:
        """Refused to notebook code: trace and profile functions, library functions changed in place."""
        if event in ("sys.settrace", "sys.setprofile"):
            if self.called_from_notebook(sys._getframe(1)):
                self._refuse(f"{event}() from the notebook (a trace function can skip or change the tests)")
        elif event == "object.__setattr__" and len(args) >= 2 and args[1] in _FUNCTION_PARTS:
            target = args[0]
            code = getattr(target, "__code__", None) if isinstance(target, types.FunctionType) else None
            # Only where the notebook itself does it: libraries set these on their own new wrappers.
            if code is not None and not self.notebook_code(code) and self.notebook_code(sys._getframe(1).f_code):
                self._refuse(f"changing {getattr(target, '__module__', '?')}.{target.__qualname__}.{args[1]} in place")
        elif event in ("_thread.start_new_thread", "_thread.start_joinable_thread"):  # Python 3.13 and later
            if self.called_from_notebook(sys._getframe(1)):
                self._refuse("starting a thread from the notebook")

    def _refuse(self, what: str) -> None:
        if what not in self.refused:
            self.refused.append(what)
        raise RuntimeError(f"The grader does not allow {what} while a notebook is graded.")

    def _watch_imports(self) -> None:
        """Imports that load new modules run in a window: the snapshot is restored first (nothing of
        the notebook's is in force while a library starts up), and what the libraries change about
        themselves meanwhile is taken into the snapshot. Nothing changes for an import of a module
        that is loaded already."""
        import_statement, import_module = builtins.__import__, importlib.import_module
        guard, main_thread = self, threading.get_ident()
        resolve = importlib.util.resolve_name

        def loads_something(name, package, fromlist, level) -> bool:
            try:
                absolute = resolve(("." * level) + name, package) if level else name
            except (ImportError, ValueError, TypeError):
                return True
            if absolute not in sys.modules:
                return True
            names = vars(sys.modules[absolute])  # not hasattr: a module's __getattr__ may import
            return any(
                f"{absolute}.{item}" not in sys.modules and item not in names
                for item in (fromlist or ())
                if isinstance(item, str) and item != "*"
            )

        def windowed(function, *args):
            if guard.window or not guard.started or guard.get_ident() != main_thread:
                return function(*args)
            guard.window = True
            try:
                undone, _ = guard.references.changes(undo=True)
                guard.undone_before_import.extend(item for item in undone if item not in guard.undone_before_import)
                guard.undone_since_check.extend(undone)  # during a test, the test's result is not trusted
                before = set(sys.modules)
                try:
                    return function(*args)
                finally:
                    # Only library code ran, unless a module came from a file of the notebook's.
                    new = set(sys.modules) - before
                    libraries_only = all(guard.references.trusted_module(sys.modules.get(name)) for name in new)
                    if libraries_only:
                        guard.references.changes(undo=False, accept_trusted=True)
                    guard.references.add_new_modules(fileless=libraries_only)
            finally:
                guard.window = False

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
            package = (globals or {}).get("__package__") or (globals or {}).get("__name__") if level else None
            if not loads_something(name, package, fromlist, level):
                return import_statement(name, globals, locals, fromlist, level)
            return windowed(import_statement, name, globals, locals, fromlist, level)

        def guarded_import_module(name, package=None):
            level = len(name) - len(name.lstrip("."))
            if not loads_something(name.lstrip("."), package, (), level):
                return import_module(name, package)
            return windowed(import_module, name, package)

        guarded_import_module.__doc__, guarded_import_module.__name__ = import_module.__doc__, "import_module"
        builtins.__import__ = guarded_import
        importlib.import_module = guarded_import_module

    def _refuse_threads(self) -> None:
        """Python 3.11 and 3.12 raise no audit event for a new thread: the functions are wrapped instead."""
        start = _thread.start_new_thread
        guard = self

        def start_new_thread(function, args, kwargs=None):
            if guard.called_from_notebook(sys._getframe(1)):
                guard._refuse(f"starting a thread from the notebook ({_thread_kind(function)})")
            return start(function, args, kwargs) if kwargs is not None else start(function, args)

        for owner, name in ((_thread, "start_new_thread"), (_thread, "start_new"), (threading, "_start_new_thread")):
            if getattr(owner, name, None) is start:
                setattr(owner, name, start_new_thread)

    def _notebook_threads(self) -> dict[int, str]:
        """Threads (other than this one) that are running notebook code, with where they are."""
        found = {}
        current = self.get_ident()
        for ident, frame in self.current_frames().items():
            if ident == current:
                continue
            place = frame
            while place is not None:
                if self.notebook_code(place.f_code):
                    found[ident] = f"{place.f_code.co_name} (thread {ident})"
                    break
                place = place.f_back
        return found

    def _stop_notebook_threads(self) -> list[str]:
        """Stop threads running notebook code; those that do not stop are returned."""
        threads = self._notebook_threads()
        if not threads:
            return []
        for ident in threads:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(SystemExit))
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and set(threads) & set(self._notebook_threads()):
            time.sleep(0.01)
        left = self._notebook_threads()
        for ident, where in threads.items():
            if ident not in left and where not in self.threads_stopped:
                self.threads_stopped.append(where)
        return [f"a thread started by the notebook is still running: {where}" for ident, where in left.items()]

    # -- IPython's execution machinery and the interpreter's hooks -------------------------------
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
                for name in ("cleanup_transforms", "line_transforms", "token_transformers")
            ),
            "compiler": id(shell.compile),
            "display hook": id(shell.displayhook),
            "display publisher": id(shell.display_pub),
            # Libraries register callbacks and import hooks of their own; only the notebook's count.
            "event callbacks": tuple(
                sorted(
                    name
                    for name, callbacks in shell.events.callbacks.items()
                    for callback in callbacks
                    if self._learner_made(callback)
                )
            ),
            "trace function": id(sys.gettrace()),
            "profile function": id(sys.getprofile()),
            "import hooks": tuple(id(item) for item in sys.meta_path if self._learner_made(item)),
            "path hooks": tuple(id(item) for item in sys.path_hooks if self._learner_made(item)),
            "message handler": id(self.kernel.shell_handlers.get(MESSAGE)),
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
            "manager_lists": {
                name: list(getattr(manager, name))
                for name in ("cleanup_transforms", "line_transforms", "token_transformers")
                if hasattr(manager, name)
            },
            "compile": shell.compile,
            "displayhook": shell.displayhook,
            "display_pub": shell.display_pub,
            "callbacks": {name: list(callbacks) for name, callbacks in shell.events.callbacks.items()},
            "meta_path": list(sys.meta_path),
            "path_hooks": list(sys.path_hooks),
        }

    def _learner_made(self, item) -> bool:
        module = getattr(item, "__module__", None) or getattr(type(item), "__module__", "")
        return module in ("__main__", self.shell.user_module.__name__) or str(module).startswith("__ipython")

    def _restore_shell(self) -> list[str]:
        """Undo changes to IPython's execution machinery and the interpreter's hooks; what was undone."""
        undone = []
        # Read once: every step works on these very objects, whatever learner-made objects do when a step reads
        # them (their __module__, their __eq__).
        shell, saved, shell_class = self.shell, self.saved, type(self.shell)
        self._restore_shell_methods(shell, shell_class, undone)
        self._restore_transformers(shell, saved, undone)
        self._restore_execution_objects(shell, saved, undone)
        self._remove_learner_hooks(shell, undone)
        self._restore_handler_and_tracing(undone)
        self._pop_torch_modes(undone)
        return undone

    # The steps of _restore_shell, in its order; each appends what it undid to `undone`.
    def _restore_shell_methods(self, shell, shell_class: type, undone: list[str]) -> None:
        """The shell's methods on its class as they were, and none of the notebook's on the instance."""
        for name, original in self.shell_methods:
            if raw_attribute(shell_class, name) is not original:
                setattr(shell_class, name, original)
                undone.append(f"IPython shell method {name}")
        for name in SHELL_METHODS:
            if name in vars(shell) and name not in self.instance_overrides:
                delattr(shell, name)
                undone.append(f"IPython shell method {name}")

    def _restore_transformers(self, shell, saved: dict, undone: list[str]) -> None:
        """The custom exception handlers, the transformer lists, the input transformer manager and its lists."""
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

    def _restore_execution_objects(self, shell, saved: dict, undone: list[str]) -> None:
        """The compiler, the display hook and the display publisher."""
        for name in ("compile", "displayhook", "display_pub"):
            if getattr(shell, name) is not saved[name]:
                setattr(shell, name, saved[name])
                undone.append(f"IPython {name}")

    def _remove_learner_hooks(self, shell, undone: list[str]) -> None:
        """The notebook's event callbacks, import hooks and path hooks (libraries' own stay)."""
        for name, callbacks in shell.events.callbacks.items():
            learner_made = [callback for callback in callbacks if self._learner_made(callback)]
            for callback in learner_made:
                callbacks.remove(callback)
                undone.append(f"{name} event callback")
        for hooks, label in ((sys.meta_path, "import hook"), (sys.path_hooks, "path hook")):
            for item in [item for item in hooks if self._learner_made(item)]:
                hooks.remove(item)
                undone.append(label)

    def _restore_handler_and_tracing(self, undone: list[str]) -> None:
        """The grader's message handler back in place; no trace or profile function."""
        if self.kernel.shell_handlers.get(MESSAGE) is not self.handler:
            self.kernel.shell_handlers[MESSAGE] = self.handler
            undone.append("the grader's message handler")
        if sys.gettrace() is not None:
            sys.settrace(None)
            undone.append("trace function")
        if sys.getprofile() is not None:
            sys.setprofile(None)
            undone.append("profile function")

    def _pop_torch_modes(self, undone: list[str]) -> None:
        """The torch function and dispatch modes left active, popped (the judge's recordings end with their calls)."""
        torch = sys.modules.get("torch")
        if torch is None:
            return
        for length, pop, label in (
            (torch._C._len_torch_function_stack, torch._C._pop_torch_function_stack, "torch function mode"),
            # The dispatch stack's pop takes the key of an infrastructure mode; None pops the innermost user mode.
            (
                torch._C._len_torch_dispatch_stack,
                lambda: torch._C._pop_torch_dispatch_stack(None),
                "torch dispatch mode",
            ),
        ):
            try:
                while length() > 0:
                    pop()
                    undone.append(label)
            except Exception:
                pass

    def _torch_modes(self) -> list[str]:
        torch = sys.modules.get("torch")
        found = []
        if torch is None:
            return found
        for label, getter in (
            ("a torch function mode is active", "_len_torch_function_stack"),
            ("a torch dispatch mode is active", "_len_torch_dispatch_stack"),
        ):
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
                if subclass.__module__ in (
                    "__main__",
                    self.shell.user_module.__name__,
                ) or subclass.__module__.startswith("__ipython"):
                    found.append(f"the notebook defines a subclass of {module_name}.{class_name}: {subclass.__name__}")
        return found

    def _shadowed_builtins(self) -> list[str]:
        user_namespace = self.shell.user_ns
        names = sorted(
            name
            for name in (
                "print",
                "len",
                "isinstance",
                "type",
                "float",
                "int",
                "abs",
                "max",
                "min",
                "all",
                "any",
                "sum",
                "range",
                "zip",
                "AssertionError",
                "Exception",
            )
            if name in user_namespace and user_namespace[name] is not vars(builtins).get(name)
        )
        return [f"the notebook rebinds the builtin {name!r}" for name in names]
