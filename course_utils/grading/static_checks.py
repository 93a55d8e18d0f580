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

# Modules that give access to files, processes, the interpreter or the notebook machinery.
SENSITIVE_MODULES = frozenset("""
    os sys subprocess socket ctypes cffi gc inspect importlib builtins IPython ipykernel jupyter_client
    zmq signal threading _thread multiprocessing concurrent resource shutil pathlib glob io pickle
    marshal dill cloudpickle atexit traceback code codeop dis runpy sqlite3 sqlalchemy nbgrader
    nbformat nbclient nbconvert pty fcntl mmap tempfile urllib http requests ftplib smtplib asyncio
    faulthandler sysconfig site pdb bdb trace tracemalloc unittest pytest types weakref copyreg
    platform pwd grp posix nt select selectors shlex webbrowser
""".split())
# Learners may use the course's helpers, but not the grader.
SENSITIVE_PACKAGES = ("course_utils.grading",)
# Parts of sensitive packages that notebooks use innocently.
HARMLESS_MODULES = frozenset({"IPython.display", "os.path"})
# Builtins that execute strings, reach namespaces or files, or change objects by name.
SENSITIVE_CALLS = frozenset("""
    exec eval compile __import__ globals locals vars setattr delattr getattr open breakpoint
    exit quit get_ipython memoryview __build_class__
""".split())
SENSITIVE_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "_ih", "_oh", "_ii", "_iii", "In", "Out"})
ALLOWED_DUNDER_ATTRIBUTES = frozenset({"__init__", "__name__", "__doc__", "__qualname__", "__version__"})
FRAME_ATTRIBUTES = frozenset("""
    f_back f_locals f_globals f_builtins f_code f_lineno tb_frame tb_next gi_frame gi_code cr_frame
    ag_frame co_code co_consts co_names func_globals _getframe
""".split())
# Methods that let an object answer comparisons or conversions however it likes.
HOOK_METHODS = frozenset("""
    __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __float__ __int__ __index__ __complex__
    __abs__ __array__ __array_ufunc__ __array_function__ __array_wrap__ __array_finalize__
    __torch_function__ __torch_dispatch__ __getattr__ __getattribute__ __instancecheck__
    __subclasscheck__ __class_getitem__ __init_subclass__ __del__ __hash__ __len__ __iter__
    __sub__ __rsub__ __format__ __round__
""".split())
TENSOR_TYPES = frozenset({"Tensor", "ndarray", "TorchFunctionMode", "TorchDispatchMode", "Parameter"})
INFRASTRUCTURE_WORDS = ("nbgrader", "gradebook", "/proc/", ".ipynb", "autograded", "submitted/",
                        "solutions/", "course_grader", "course_sandbox")
# Names the tests themselves use; rebinding them at the top level changes what the tests do.
TEST_BUILTINS = frozenset("""
    print len isinstance issubclass type float int abs max min all any sum range zip enumerate list
    tuple dict set str repr round sorted reversed map filter iter next hasattr id object super
    AssertionError Exception BaseException ValueError TypeError RuntimeError KeyError NameError
    True False None
""".split())


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
    def __init__(self, module_names: set[str], protected_names: set[str], forbidden: set[str],
                 allowed_imports: set[str], fixed_bindings: dict[str, str]):
        self.module_names = module_names
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
                if root is None or root in self.module_names:
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


def _module_aliases(trees: list[ast.AST], module_names: set[str]) -> set[str]:
    """Names assigned from a module name (`m = np`, `t = np.testing`) behave like the module."""
    aliases = set(module_names)
    changed = True
    while changed:
        changed = False
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Name, ast.Attribute)):
                    if _root_name(node.value) in aliases:
                        for target in node.targets:
                            if isinstance(target, ast.Name) and target.id not in aliases:
                                aliases.add(target.id)
                                changed = True
    return aliases


def scan_cells(learner_sources: dict[str, str], *, fixed_sources: list[str] = (), forbidden: tuple[str, ...] = (),
               allowed_imports: tuple[str, ...] = ()) -> dict[str, list[StaticFinding]]:
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
    module_names = _module_aliases([tree for tree in parsed.values() if tree is not None],
                                   fixed_imports | learner_imports | set(SENSITIVE_MODULES))
    protected = (fixed_imports | TEST_BUILTINS) & (fixed_imports | set(dir(builtins)))
    results: dict[str, list[StaticFinding]] = {}
    for label, tree in parsed.items():
        if tree is None:
            results[label] = [syntax_errors[label]]
            continue
        scanner = _Scanner(module_names, protected, set(forbidden), set(allowed_imports), fixed_bindings)
        scanner.visit(tree)
        unique = list(dict.fromkeys(scanner.findings))
        if unique:
            results[label] = unique
    return results
