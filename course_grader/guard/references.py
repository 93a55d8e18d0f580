"""The kernel guard's snapshot of the tests' references, and how it is compared and put back.

Part of the kernel guard (kernel_guard.py says what the guard does, and loads this file the way it
is loaded itself: by its path, with the guard's private builtins, outside sys.modules). Standard
library only; it imports nothing of the package.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import operator
import os
import sys
import types

# IPython swaps these builtins in and out around every execution, and sets `_` to the last result.
IPYTHON_MANAGED_BUILTINS = {
    "exit",
    "quit",
    "get_ipython",
    "display",
    "__IPYTHON__",
    "dreload",
    "_",
    "__",
    "___",
    "input",
    "raw_input",
}
# Places the interpreter, IPython or ipykernel change on their own while a notebook runs (not references):
# ipykernel swaps getpass.getpass (like input) for its own while a cell runs.
CHANGING_BY_DESIGN = {
    "sys": {"displayhook", "excepthook", "last_type", "last_value", "last_traceback", "ps1", "ps2"},
    "getpass": {"getpass"},
}
# Data (not functions or classes) that the tests rely on all the same.
WATCHED_DATA = {"sys": ("stdout", "stderr", "modules", "meta_path", "path_hooks")}
# Modules that are not references: the notebook itself, the guard, and IPython's per-cell modules.
NOT_REFERENCES = ("__main__", "course_grader_guard", "__mp_main__")
_MISSING = object()
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: C types whose attributes cannot be set at all


def raw_attribute(klass, name):
    """The attribute as stored in the class (getattr would build a fresh bound object each time)."""
    for base in klass.__mro__:
        if name in vars(base):
            return vars(base)[name]
    return _MISSING


def trusted_roots() -> tuple[str, ...]:
    """Folders whose code is not the notebook's: the Python installation, the course's library and the grader
    (side by side, in a checkout as in an installation)."""
    grader = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    library = os.path.join(os.path.dirname(grader), "course_utils")
    roots = set()
    for path in (sys.prefix, sys.base_prefix, sys.exec_prefix, grader, library):
        for form in (path, os.path.realpath(path)):
            roots.add(form.rstrip(os.sep) + os.sep)
    return tuple(sorted(roots)) + ("<frozen ",)


def _is_definition(value) -> bool:
    """A function, class, module or descriptor: what a test calls or looks up, not data it reads."""
    kind = type(value)
    return callable(value) or issubclass(kind, types.ModuleType) or hasattr(kind, "__get__")


class References:
    """A snapshot of every name the tests can reach, taken before learner code ran.

    `changes()` lists what differs from it now and, asked to, puts the snapshot back. Namespaces are
    compared as a whole first (C loops), so a check of some 60 000 names takes a few hundredths of a
    second when nothing changed. Taking the snapshot costs more, so the warm kernel takes it ahead
    (`prepare`) and the kernel re-reads what its own start-up changed once it is ready (`rebase`).

    Libraries change a few of their own names after they are imported, and those changes are not
    tampering: torch wraps `torch.manual_seed` when torch._dynamo is first imported, and an
    optimizer class's `step` when the first optimizer is made. The snapshot takes such a change in
    (`accept`) when the new value is the library's own code wrapping the original (`__wrapped__`), or
    when it was made while the library imported new modules of its own (the tripwire's import window).
    """

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self.modules: dict[str, types.ModuleType] = {}  # sys.modules entries
        self.skipped: set[str] = set()
        self.classes: set[int] = set()
        # One record per watched namespace (a module's dict, a class's mapping):
        # [label, namespace, class or None, names watched, getter of their values, values, all names].
        # The getter (operator.itemgetter) reads all values of a namespace in one C call, and
        # `any(map(is_not, ...))` compares them, so a check of some 65 000 names takes milliseconds.
        self.spaces: list[list] = []
        self.data: list[tuple[str, object, str, object]] = []
        self.add_new_modules()

    # -- what counts as the libraries' own ------------------------------------------------------
    def trusted_file(self, filename) -> bool:
        return isinstance(filename, str) and filename.startswith(self.roots)

    def trusted_module(self, module, fileless: bool = True) -> bool:
        """A module loaded from the Python installation or the course's package, or built in. A
        module without a file (the submodules that C extensions make, `torch._C._nn`) counts with
        `fileless` only: the notebook could have made it as well."""
        if not isinstance(module, types.ModuleType):
            return False
        namespace = vars(module)
        name = namespace.get("__name__")
        if not isinstance(name, str) or name in NOT_REFERENCES or name.startswith("__ipython"):
            return False
        filename = namespace.get("__file__")
        if filename is not None:
            return self.trusted_file(filename)
        spec = namespace.get("__spec__")
        if spec is not None and getattr(spec, "origin", None) in ("built-in", "frozen"):
            return True
        paths = namespace.get("__path__")
        if paths is not None and not isinstance(paths, (str, bytes)):
            try:
                return all(self.trusted_file(str(path) + os.sep) for path in list(paths))
            except TypeError:
                return False
        return fileless or name in sys.builtin_module_names

    def trusted_value(self, value, depth: int = 0) -> bool:
        """Code that comes from the libraries: a function from a trusted file, a partial or a
        descriptor of one, a class or module of a trusted module, a function written in C."""
        if depth > 5:
            return False
        if isinstance(value, types.FunctionType):
            return self.trusted_file(value.__code__.co_filename)
        if isinstance(value, functools.partial):
            return self.trusted_value(value.func, depth + 1)
        if isinstance(value, (classmethod, staticmethod)):
            return self.trusted_value(value.__func__, depth + 1)
        if isinstance(value, property):
            return all(
                self.trusted_value(part, depth + 1) for part in (value.fget, value.fset, value.fdel) if part is not None
            )
        if isinstance(value, type):
            module_name = vars(value).get("__module__")
            return isinstance(module_name, str) and self.trusted_module(sys.modules.get(module_name))
        if isinstance(value, types.ModuleType):
            return self.trusted_module(value)
        return isinstance(
            value,
            (
                types.BuiltinFunctionType,
                types.WrapperDescriptorType,
                types.MethodDescriptorType,
                types.ClassMethodDescriptorType,
            ),
        )

    def wraps_original(self, value, original) -> bool:
        """The library's own wrapper around the original: a function from a trusted file that holds
        the original (as `__wrapped__`, functools.wraps, or in its closure, like IPython's
        `flag_calls` around pyplot.draw_if_interactive) and nothing the notebook made."""
        inner = getattr(value, "__func__", value)  # classmethod and staticmethod
        original = getattr(original, "__func__", original)
        for _ in range(8):
            if not (isinstance(inner, types.FunctionType) and self.trusted_file(inner.__code__.co_filename)):
                return False
            held = []
            for cell in inner.__closure__ or ():
                try:
                    held.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
            if any(self._notebook_made(item) for item in held):
                return False
            wrapped = vars(inner).get("__wrapped__", _MISSING)
            if wrapped is original or any(item is original for item in held):
                return True
            inner = wrapped
        return False

    def _notebook_made(self, item) -> bool:
        """A function, method or object whose code comes from the notebook."""
        function = getattr(item, "__func__", item)
        if isinstance(function, types.FunctionType):
            return not self.trusted_file(function.__code__.co_filename)
        module = vars(type(item)).get("__module__") if not isinstance(item, type) else vars(item).get("__module__")
        return isinstance(module, str) and (
            module in NOT_REFERENCES
            or module.startswith("__ipython")
            or not self.trusted_module(sys.modules.get(module))
        )

    # -- taking the snapshot --------------------------------------------------------------------
    def add_new_modules(self, force: bool = False, fileless: bool = True) -> None:
        """Take in every module loaded since the last call (at the start: all of them). Modules
        without a file are taken in only while nothing but library code ran (`fileless`)."""
        if not force and len(sys.modules) == len(self.modules) + len(self.skipped):
            return
        for name, module in list(sys.modules.items()):
            if name in self.modules or name in self.skipped:
                continue
            if (
                name in NOT_REFERENCES
                or name == "course_grader"
                or name.startswith("course_grader.")
                or not self.trusted_module(module, fileless)
            ):
                self.skipped.add(name)  # the notebook's own modules, the grader's, and anything not a library's
                continue
            namespace = vars(module)
            self.modules[name] = module
            skipped = CHANGING_BY_DESIGN.get(name, ())
            keys = [
                key
                for key, value in list(namespace.items())
                if key not in skipped
                and not (name == "builtins" and key in IPYTHON_MANAGED_BUILTINS)
                and _is_definition(value)
            ]
            self._watch_space(name, namespace, None, keys)
            for key in keys:
                value = namespace[key]
                if isinstance(value, type) and id(value) not in self.classes:
                    self._add_class(value)
            for key in WATCHED_DATA.get(name, ()):
                self.data.append((f"{name}.{key}", module, key, getattr(module, key, _MISSING)))

    def _add_class(self, klass: type) -> None:
        self.classes.add(id(klass))
        if klass.__flags__ & _IMMUTABLE_TYPE:
            return  # a C type: nothing in it can be replaced
        namespace = vars(klass)
        keys = [key for key, value in list(namespace.items()) if _is_definition(value)]
        label = f"{getattr(klass, '__module__', '?')}.{getattr(klass, '__qualname__', klass.__name__)}"
        self._watch_space(label, namespace, klass, keys)

    def _watch_space(self, label: str, namespace, klass, keys: list[str]) -> None:
        keys = tuple(keys)
        self.spaces.append(
            [label, namespace, klass, keys, _getter(keys), tuple(namespace[key] for key in keys), frozenset(namespace)]
        )

    @staticmethod
    def _values(space) -> tuple:
        try:
            return space[4](space[1])
        except KeyError:  # a name was deleted
            return tuple(space[1].get(key, _MISSING) for key in space[3])

    def rebase(self) -> None:
        """Accept the present state as the snapshot (the kernel's own start-up is trusted)."""
        self.modules = {name: sys.modules.get(name, module) for name, module in self.modules.items()}
        for space in self.spaces:
            space[5] = self._values(space)
            if len(space[1]) != len(space[6]):
                space[6] = frozenset(space[1])
        self.data = [(label, owner, key, getattr(owner, key, _MISSING)) for label, owner, key, _ in self.data]
        self.add_new_modules(force=True)

    # -- comparing ------------------------------------------------------------------------------
    def changes(self, undo: bool, accept_trusted: bool = False) -> tuple[list[str], list[str]]:
        """(what differs from the snapshot, what of it could not be put back); with `undo`, put it
        back. The libraries' own wrappers of their functions are taken into the snapshot instead,
        and with `accept_trusted` (during a library's import) any value that is the libraries' code."""
        changed, stuck = [], []
        modules = sys.modules
        if any(
            map(_is_not, map(modules.get, self.modules, _repeat(_MISSING, len(self.modules))), self.modules.values())
        ):
            for name, module in self.modules.items():
                if modules.get(name, _MISSING) is not module:
                    changed.append(f"sys.modules[{name!r}]")
                    if undo:
                        modules[name] = module
        for label, owner, key, original in self.data:
            if getattr(owner, key, _MISSING) is not original:
                changed.append(label)
                if undo:
                    try:
                        setattr(owner, key, original)
                    except Exception:
                        stuck.append(label)
        values = self._values
        for space in self.spaces:
            now = values(space)
            if any(map(_is_not, now, space[5])):
                self._check_space(space, now, undo, accept_trusted, changed, stuck)
            if len(space[1]) != len(space[6]):
                self._check_additions(space, undo, accept_trusted, changed, stuck)
        return changed, stuck

    def _check_space(self, space, now: tuple, undo: bool, accept_trusted: bool, changed: list, stuck: list) -> None:
        label, namespace, klass, keys, _, originals, _ = space
        accepted = list(originals)
        for position, (key, current, original) in enumerate(zip(keys, now, originals, strict=False)):
            if current is original:
                continue
            if self._acceptable(current, original, accept_trusted):
                accepted[position] = current
                continue
            changed.append(f"{label}.{key}")
            if not undo:
                continue
            try:
                if klass is None:
                    if original is _MISSING:
                        namespace.pop(key, None)
                    else:
                        namespace[key] = original
                elif original is _MISSING:
                    delattr(klass, key)
                else:
                    setattr(klass, key, original)
            except Exception:
                stuck.append(f"{label}.{key}")
        space[5] = tuple(accepted)

    def _check_additions(self, space, undo: bool, accept_trusted: bool, changed: list, stuck: list) -> None:
        """Names added to a namespace: in a module, one that shadows a builtin changes the module's
        code; in a class, a function or descriptor over an inherited one takes precedence."""
        label, namespace, klass, keys, _, originals, names = space
        offending = []
        for key, value in list(namespace.items()):
            if key in names:
                continue
            if klass is None:
                if label == "builtins" or key not in _BUILTIN_NAMES or _is_submodule(value, label, key):
                    continue  # (names added to builtins itself shadow nothing; IPython adds exit and quit)
                if accept_trusted and self.trusted_value(value):
                    continue
                offending.append((f"{label}.{key} (shadows the builtin)", key))
                continue
            if not _is_definition(value) or not any(key in vars(base) for base in klass.__mro__[1:]):
                continue
            inherited = raw_attribute(klass.__mro__[1], key)
            if self.wraps_original(value, inherited) or (accept_trusted and self.trusted_value(value)):
                # torch hooks an optimizer subclass's inherited `step` so: watched from now on
                space[3] = keys = keys + (key,)
                space[5] = originals = originals + (value,)
                space[4] = _getter(keys)
                continue
            offending.append((f"{label}.{key} (added over an inherited attribute)", key))
        for description, key in offending:
            changed.append(description)
            if undo:
                try:
                    if klass is None:
                        namespace.pop(key, None)
                    else:
                        delattr(klass, key)
                except Exception:
                    stuck.append(description)
        if undo or accept_trusted or not offending:
            space[6] = frozenset(namespace)

    def _acceptable(self, current, original, accept_trusted: bool) -> bool:
        if current is _MISSING or original is _MISSING:
            return False
        return self.wraps_original(current, original) or (accept_trusted and self.trusted_value(current))

    def size(self) -> int:
        return len(self.modules) + sum(len(space[3]) for space in self.spaces) + len(self.data)


def _getter(keys: tuple):
    """A function that reads these names of a namespace as one tuple (KeyError if one is gone)."""
    if len(keys) == 1:
        key = keys[0]
        return lambda namespace: (namespace[key],)
    return operator.itemgetter(*keys) if keys else (lambda namespace: ())


_BUILTIN_NAMES = frozenset(vars(builtins))


def _is_submodule(value, package: str, key: str) -> bool:
    """A package's own submodule, bound as its attribute when it is imported (`pygments.filter`)."""
    return isinstance(value, types.ModuleType) and getattr(value, "__name__", None) == f"{package}.{key}"


_repeat, _is_not = itertools.repeat, operator.is_not
