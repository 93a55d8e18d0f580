"""Reading learners' code before it runs: constructs that can fake a grade are listed for review.

A learner's kernel runs the hidden tests in the same Python process as the learner's code, so code
that patches libraries, reaches into IPython, inspects the caller's frame or reads files could make a
test pass without the work being done. The sandbox and the runtime guard stop or detect most of that;
this scanner is the layer that cannot be tampered with, because it reads the code without running it.
A finding does not change a score: it puts the submission on the instructor's review list with the
line that caused it.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
from collections.abc import Callable

# Modules that give access to files, processes, the interpreter or the notebook machinery.
SENSITIVE_MODULES = frozenset(
    """
    os sys subprocess socket ctypes cffi gc inspect importlib builtins IPython ipykernel jupyter_client
    zmq signal threading _thread multiprocessing concurrent resource shutil pathlib glob io pickle
    marshal dill cloudpickle atexit traceback code codeop dis runpy sqlite3 sqlalchemy nbgrader
    nbformat nbclient nbconvert pty fcntl mmap tempfile urllib http requests ftplib smtplib asyncio
    faulthandler sysconfig site pdb bdb trace tracemalloc unittest pytest types weakref copyreg
    platform pwd grp posix nt select selectors shlex webbrowser
""".split()
)
# Learners may use the course's helpers, but not the grader.
SENSITIVE_PACKAGES = ("course_grader",)
# Parts of sensitive packages that notebooks use innocently.
HARMLESS_MODULES = frozenset({"IPython.display", "os.path"})
# Builtins that execute strings, reach namespaces or files, or change objects by name.
SENSITIVE_CALLS = frozenset(
    """
    exec eval compile __import__ globals locals vars setattr delattr getattr open breakpoint
    exit quit get_ipython memoryview __build_class__
""".split()
)
SENSITIVE_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "_ih", "_oh", "_ii", "_iii", "In", "Out"})
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__", "__name__", "__doc__", "__qualname__", "__version__"})
FRAME_ATTRIBUTES = frozenset(
    """
    f_back f_locals f_globals f_builtins f_code f_lineno tb_frame tb_next gi_frame gi_code cr_frame
    ag_frame co_code co_consts co_names func_globals _getframe
""".split()
)
# Methods that let an object answer comparisons or conversions however it likes.
HOOK_METHODS = frozenset(
    """
    __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __float__ __int__ __index__ __complex__
    __abs__ __array__ __array_ufunc__ __array_function__ __array_wrap__ __array_finalize__
    __torch_function__ __torch_dispatch__ __getattr__ __getattribute__ __instancecheck__
    __subclasscheck__ __class_getitem__ __init_subclass__ __del__ __hash__ __len__ __iter__
    __sub__ __rsub__ __format__ __round__
""".split()
)
TENSOR_TYPES = frozenset({"Tensor", "ndarray", "TorchFunctionMode", "TorchDispatchMode", "Parameter"})
INFRASTRUCTURE_WORDS = (
    "nbgrader",
    "gradebook",
    "/proc/",
    ".ipynb",
    "autograded",
    "submitted/",
    "solutions/",
    "course_grader",
    "course_sandbox",
)
# Names the tests themselves use; rebinding them at the top level changes what the tests do.
TEST_BUILTINS = frozenset(
    """
    print len isinstance issubclass type float int abs max min all any sum range zip enumerate list
    tuple dict set str repr round sorted reversed map filter iter next hasattr id object super
    AssertionError Exception BaseException ValueError TypeError RuntimeError KeyError NameError
    True False None
""".split()
)


@dataclasses.dataclass(frozen=True)
class StaticFinding:
    code: str
    message: str
    line: int


def to_python(source: str) -> str:
    """IPython syntax (magics, `!shell`) turned into the Python that IPython would run."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # a cell IPython cannot transform is checked as written
        return source


def _root_name(node: ast.AST) -> str | None:
    """`np` for `np.testing.assert_allclose`, `sys` for `sys.modules["x"].y`; None if no name at the root."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _store_targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    elif isinstance(node, ast.NamedExpr):
        targets = [node.target]
    else:
        return []
    flat = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        else:
            flat.append(target)
    return flat


class _Scanner(ast.NodeVisitor):
    def __init__(
        self,
        aliases: "_Aliases",
        protected_names: set[str],
        forbidden: set[str],
        allowed_imports: set[str],
        fixed_bindings: dict[str, str],
    ):
        self.aliases = aliases
        self.module_names = aliases.names
        self.fixed_bindings = fixed_bindings
        self.protected_names = protected_names
        self.forbidden = forbidden
        self.allowed_imports = allowed_imports
        self.findings: list[StaticFinding] = []
        self.depth = 0  # 0 = top level of the cell

    def flag(self, node: ast.AST, code: str, message: str) -> None:
        self.findings.append(StaticFinding(code, message, getattr(node, "lineno", 0)))

    # imports -----------------------------------------------------------------------------
    def _check_import(self, node: ast.AST, module: str) -> None:
        if any(module == package or module.startswith(package + ".") for package in SENSITIVE_PACKAGES):
            self.flag(node, "sensitive-import", f"imports {module} (the grader itself)")
            return
        if module in HARMLESS_MODULES:
            return
        root = module.split(".")[0]
        if root in SENSITIVE_MODULES and module not in self.allowed_imports and root not in self.allowed_imports:
            self.flag(node, "sensitive-import", f"imports {module} (files, processes or interpreter internals)")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_import(node, alias.name)
            bound = (alias.asname or alias.name).split(".")[0]
            # Importing again what the setup cell imported (`import numpy as np`) changes nothing.
            if self.fixed_bindings.get(bound) != (alias.name if alias.asname else bound):
                self._check_rebinding(node, bound)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level == 0:
            self._check_import(node, module)
            for alias in node.names:
                if f"{module}.{alias.name}" in ("torch.overrides.TorchFunctionMode", "unittest.mock.patch"):
                    self.flag(node, "patching-tool", f"imports {module}.{alias.name}")
        for alias in node.names:
            bound = alias.asname or alias.name
            if self.fixed_bindings.get(bound) != f"{module}.{alias.name}":
                self._check_rebinding(node, bound)
        self.generic_visit(node)

    # names, calls, attributes ------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in SENSITIVE_CALLS and node.id not in self.allowed_imports:
            self.flag(node, "dynamic-access", f"uses {node.id}() (runs strings, reaches namespaces, files or IPython)")
        elif node.id in SENSITIVE_NAMES:
            self.flag(node, "dynamic-access", f"uses {node.id} (interpreter or notebook internals)")
        if node.id in self.forbidden:
            self.flag(node, "forbidden-helper", f"uses {node.id}, which this assignment does not allow")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDER_ATTRIBUTES:
            self.flag(node, "dunder-access", f"accesses .{name} (object internals)")
        elif name in FRAME_ATTRIBUTES:
            self.flag(node, "frame-access", f"accesses .{name} (other code's variables)")
        if name in self.forbidden:
            self.flag(node, "forbidden-helper", f"uses .{name}, which this assignment does not allow")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            lowered = node.value.lower()
            for word in INFRASTRUCTURE_WORDS:
                if word in lowered:
                    self.flag(node, "infrastructure-string", f"a string mentions {word!r} (grading files)")
                    break

    # stores: monkeypatching and rebinding ------------------------------------------------------
    def _check_store(self, statement: ast.AST) -> None:
        for target in _store_targets(statement):
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                root = _root_name(target)
                if root is None or root in self.module_names or self.aliases.valued(target.value, at_store=True):
                    what = ast.unparse(target)
                    self.flag(statement, "monkeypatch", f"changes {what} (a library or shared object)")
            elif isinstance(target, ast.Name):
                self._check_rebinding(statement, target.id)

    def _check_rebinding(self, node: ast.AST, name: str) -> None:
        if self.depth == 0 and name in self.protected_names:
            self.flag(node, "rebinds-test-name", f"rebinds {name!r}, which the tests use")

    def generic_visit(self, node: ast.AST) -> None:
        self._check_store(node)
        super().generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def _visit_function(self, node) -> None:
        self._check_rebinding(node, node.name)
        if node.name in HOOK_METHODS:
            self.flag(node, "comparison-hook", f"defines {node.name} (an object can answer comparisons as it likes)")
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._check_rebinding(node, node.name)
        for base in node.bases:
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if base_name in TENSOR_TYPES:
                self.flag(node, "tensor-subclass", f"class {node.name} subclasses {ast.unparse(base)}")
        for keyword in node.keywords:
            if keyword.arg == "metaclass":
                self.flag(node, "comparison-hook", f"class {node.name} sets a metaclass")
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            if name in self.protected_names:
                self.flag(node, "rebinds-test-name", f"rebinds {name!r} through a global statement")
        self.generic_visit(node)


def import_bindings(sources: list[str]) -> dict[str, str]:
    """name -> what it is bound to, for every import statement in these cells (`np` -> `numpy`)."""
    bindings: dict[str, str] = {}
    for source in sources:
        try:
            tree = ast.parse(to_python(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = (alias.asname or alias.name).split(".")[0]
                    bindings[bound] = alias.name if alias.asname else bound
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    bindings[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}"
    return bindings


def imported_names(sources: list[str]) -> set[str]:
    """Every name bound by an import statement in these cells (module aliases such as `np`)."""
    return set(import_bindings(sources))


GETTER_FUNCTIONS = frozenset(
    {
        "attrgetter",
        "itemgetter",
        "methodcaller",
        "getattr",
        "SimpleNamespace",
        "dict",
        "list",
        "tuple",
        "set",
        "deque",
        "namedtuple",
        "reduce",
        "vars",
    }
)


class _Aliases:
    """Which names stand for a library module or object in the notebook, however they were reached.

    `m = np` and `t = np.testing` (aliases), `holder = [torch.nn]` (a container of them: `holder[0]`
    is the module), `get = operator.attrgetter("nn")` or `get = lambda: torch.nn` (getters:
    `get(torch)` and `get()` are the module), `for m in (np, torch): ...` (each `m` is one).
    """

    def __init__(self, module_names: set[str]):
        self.names, self.holders, self.getters = set(module_names), set(), set()

    def valued(self, node: ast.AST | None, at_store: bool = False) -> bool:
        """Does this expression evaluate to a library module or object? (`at_store`: the base of an
        attribute or item store, where a call that is handed a module counts as well)."""
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, (ast.Attribute, ast.Starred)):
            return self.valued(node.value, at_store)
        if isinstance(node, ast.NamedExpr):
            return self.valued(node.value, at_store)
        if isinstance(node, ast.Subscript):
            base = node.value
            return (
                (isinstance(base, ast.Name) and base.id in self.holders)
                or self.valued(base, at_store)
                or self.holds(base)
            )
        if isinstance(node, ast.IfExp):
            return self.valued(node.body, at_store) or self.valued(node.orelse, at_store)
        if isinstance(node, ast.BoolOp):
            return any(self.valued(value, at_store) for value in node.values)
        if isinstance(node, ast.Call):
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            handed = any(self.valued(argument) or self.holds(argument) for argument in arguments)
            func = node.func
            terminal = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if isinstance(func, ast.Name) and func.id in self.getters:
                return True
            if isinstance(func, ast.Call) or terminal in GETTER_FUNCTIONS:
                return handed
            return at_store and handed
        return False

    def holds(self, node: ast.AST | None) -> bool:
        """A list, tuple, set or dict display (or comprehension) with a library module or object in it."""
        if isinstance(node, ast.Name):
            return node.id in self.holders
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any(self.valued(element) or self.holds(element) for element in node.elts)
        if isinstance(node, ast.Dict):
            return any(self.valued(value) or self.holds(value) for value in node.values if value is not None)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.valued(node.elt) or any(self.holds(generator.iter) for generator in node.generators)
        if isinstance(node, ast.DictComp):
            return self.valued(node.value) or any(self.holds(generator.iter) for generator in node.generators)
        return False

    def learn(self, trees: list[ast.AST]) -> None:
        """Follow assignments until nothing new is learned."""
        changed = True
        while changed:
            before = (len(self.names), len(self.holders), len(self.getters))
            for tree in trees:
                for node in ast.walk(tree):
                    self._learn_from(node)
            changed = before != (len(self.names), len(self.holders), len(self.getters))

    def _learn_from(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and getattr(node, "value", None) is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [target.id for target in targets if isinstance(target, ast.Name)]
            value = node.value
            if self.valued(value):
                self.names.update(names)
            elif self.holds(value):
                self.holders.update(names)
            elif isinstance(value, ast.Lambda) and self.valued(value.body):
                self.getters.update(names)
            elif isinstance(value, ast.Call):
                func = value.func
                terminal = (
                    func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
                )
                if terminal in ("attrgetter", "itemgetter", "methodcaller", "partial"):
                    self.getters.update(names)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            if self.holds(node.iter) or self.valued(node.iter):
                self.names.update(target.id for target in ast.walk(node.target) if isinstance(target, ast.Name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            returns = [child.value for child in ast.walk(node) if isinstance(child, ast.Return)]
            if any(self.valued(value) for value in returns if value is not None):
                self.getters.add(node.name)


def scan_cells(
    learner_sources: dict[str, str],
    *,
    fixed_sources: list[str] = (),
    forbidden: tuple[str, ...] = (),
    allowed_imports: tuple[str, ...] = (),
) -> dict[str, list[StaticFinding]]:
    """Findings per cell label for the cells a learner wrote.

    `fixed_sources` are the cells the grader restores (setup, tests): their imports define which names
    are modules, and the names they bind are the ones a learner must not rebind.
    """
    fixed_bindings = import_bindings(list(fixed_sources))
    fixed_imports = set(fixed_bindings)
    learner_imports = imported_names(list(learner_sources.values()))
    parsed: dict[str, ast.AST | None] = {}
    syntax_errors: dict[str, StaticFinding] = {}
    for label, source in learner_sources.items():
        try:
            parsed[label] = ast.parse(to_python(source))
        except SyntaxError as error:
            parsed[label] = None
            syntax_errors[label] = StaticFinding("syntax-error", f"does not parse: {error.msg}", error.lineno or 0)
    aliases = _Aliases(fixed_imports | learner_imports | set(SENSITIVE_MODULES))
    aliases.learn([tree for tree in parsed.values() if tree is not None])
    protected = (fixed_imports | TEST_BUILTINS) & (fixed_imports | set(dir(builtins)))
    results: dict[str, list[StaticFinding]] = {}
    for label, tree in parsed.items():
        if tree is None:
            results[label] = [syntax_errors[label]]
            continue
        scanner = _Scanner(aliases, protected, set(forbidden), set(allowed_imports), fixed_bindings)
        scanner.visit(tree)
        unique = list(dict.fromkeys(scanner.findings))
        if unique:
            results[label] = unique
    return results


def modules_the_tests_reach(sources: list[str]) -> list[str]:
    """The modules that these cells (an assignment's setup, helper and test cells, hidden parts
    included) import or reach through an attribute (`np.random.default_rng` reaches numpy.random),
    as names for the warm kernel to import before the kernel guard takes its snapshot (see
    warmkernel.preload: a trailing "?" means "if it is a module"). Imported ahead, they cannot be
    loaded first by learner code, and the guard watches them from the start.
    """
    required: dict[str, bool] = {}  # name -> must be importable (an import statement names it)
    trees = _parsed(sources)

    def want(name: str, must: bool) -> None:
        if name.split(".")[0] != "__future__" and name != "course_grader" and not name.startswith("course_grader."):
            required[name] = required.get(name, False) or must

    bindings = _want_imports(trees, want)
    _want_attribute_chains(trees, bindings, want)
    return [name if must else f"{name}?" for name, must in required.items()]


# The steps of modules_the_tests_reach. `want(name, must)` adds a module name (must: an import statement names it).
def _parsed(sources: list[str]) -> list[ast.AST]:
    """The cells that parse (one that does not runs nothing, so it imports nothing)."""
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(to_python(source)))
        except SyntaxError:
            continue
    return trees


def _want_imports(trees: list[ast.AST], want: Callable[[str, bool], None]) -> dict[str, str]:
    """Each module an import statement names, with its parents, and each name a `from` import takes (a module,
    perhaps); what each imported name is bound to (name -> dotted name), for the attribute chains."""
    bindings: dict[str, str] = {}
    for node in (node for tree in trees for node in ast.walk(tree)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                for end in range(1, len(parts) + 1):
                    want(".".join(parts[:end]), True)
                bindings[alias.asname or parts[0]] = alias.name if alias.asname else parts[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            want(node.module, True)
            for alias in node.names:
                if alias.name != "*":
                    want(f"{node.module}.{alias.name}", False)
                    bindings[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bindings


def _want_attribute_chains(trees: list[ast.AST], bindings: dict[str, str], want: Callable[[str, bool], None]) -> None:
    """Each dotted name an attribute chain on an imported name reaches (`np.random.default_rng`: numpy.random and
    numpy.random.default_rng), perhaps a module."""
    for node in (node for tree in trees for node in ast.walk(tree)):
        chain, current = [], node
        while isinstance(current, ast.Attribute):
            chain.append(current.attr)
            current = current.value
        if chain and isinstance(current, ast.Name) and current.id in bindings:
            dotted = bindings[current.id]
            for attribute in reversed(chain):
                dotted = f"{dotted}.{attribute}"
                want(dotted, False)
