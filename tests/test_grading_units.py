"""Fast checks of the grading package's parts that run no kernel: static checks, repairs, settings."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from grading_support import fixtures
from grading_support.fixtures import discover_attacks, discover_fixtures

from course_grader.exchange import pipeline
from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout, GradingSettings, discover_assignments
from course_grader.ground.report import read_csv, write_csv
from course_grader.guard import kernel_guard
from course_grader.judging.preflight import inspect_submission, rebuild
from course_grader.judging.static_checks import scan_cells
from course_grader.sandbox.namespaces import plan_mounts

REPOSITORY = Path(__file__).resolve().parents[1]
SUBMISSIONS = REPOSITORY / "tests" / "submissions"
SETUP = "import math\n\nimport numpy as np\nimport torch\n"


def _codes(source: str, **options) -> set[str]:
    found = scan_cells({"cell": source}, fixed_sources=[SETUP], **options)
    return {finding.code for finding in found.get("cell", [])}


@pytest.mark.parametrize(
    "source,expected",
    [
        ("np.allclose = lambda *a, **k: True", "monkeypatch"),
        ("import numpy.testing as t\nt.assert_allclose = print", "monkeypatch"),
        ("alias = np\nalias.isclose = None", "monkeypatch"),
        ("get_ipython().set_custom_exc((Exception,), None)", "dynamic-access"),
        ("%config InteractiveShell.ast_node_interactivity = 'none'", "dynamic-access"),
        ("import sys\nx = sys._getframe(1).f_locals", "frame-access"),
        ("class Fake(torch.Tensor):\n    pass", "tensor-subclass"),
        ("class Yes:\n    def __eq__(self, other):\n        return True", "comparison-hook"),
        ("import os\nprint(os.environ)", "sensitive-import"),
        ("print(open('/etc/passwd').read())", "dynamic-access"),
        ("x = 'NBGRADER_EXECUTION'", "infrastructure-string"),
        ("float = lambda value: 0.7", "rebinds-test-name"),
        ("np = None", "rebinds-test-name"),
        ("out = torch.nn.functional.scaled_dot_product_attention(q, k, v)", "forbidden-helper"),
        ("x = ().__class__.__base__.__subclasses__()", "dunder-access"),
        # Stores that name no module where they happen: through a container, a getter, a loop variable.
        ("holder = [torch.nn]\nholder[0].TransformerEncoderLayer = object", "monkeypatch"),
        ("box = {'random': np.random}\nbox['random'].default_rng = len", "monkeypatch"),
        ("import operator\nget = operator.attrgetter('random')\nget(np).default_rng = len", "monkeypatch"),
        ("from operator import attrgetter\nattrgetter('nn')(torch).Linear = object", "monkeypatch"),
        ("get = lambda: torch\nget().allclose = print", "monkeypatch"),
        ("def library():\n    return np\nlibrary().allclose = print", "monkeypatch"),
        ("for library in (np, torch):\n    library.allclose = print", "monkeypatch"),
        ("def same(x):\n    return x\nsame(np.random).default_rng = len", "monkeypatch"),
    ],
)
def test_static_checks_flag_tampering(source, expected):
    codes = _codes(source, forbidden=("scaled_dot_product_attention",))
    assert expected in codes, f"{source!r} should be flagged as {expected}, got {sorted(codes)}"


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\nimport torch\ndef f(X):\n    Q = X @ X.T\n"
        "    w = np.exp(Q - Q.max(axis=-1, keepdims=True))\n    return w / w.sum(axis=-1, keepdims=True)",
        "class Layer(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.linear = torch.nn.Linear(2, 2)\n    def forward(self, x):\n        return self.linear(x)",
        "weights = [[0.4, 0.2, 0.4]]\nweights[0][1] = 0.2\nresult = {'a': 1}\nresult['b'] = 2",
        "from math import sqrt\nimport numpy as np\nvalues = sorted(x for x in range(3))",
        # Containers and results that merely involve a library function are the notebook's own.
        "weights = np.apply_along_axis(np.exp, 1, np.ones((2, 2)))\nweights[0, 0] = 1.0",
        "activations = {'relu': torch.relu}\nactivations['tanh'] = torch.tanh",
        "values = list(map(math.sqrt, [1.0, 4.0]))\nvalues[0] = 3.0",
        "act = torch.relu if True else torch.tanh\nouts = [act(torch.ones(2))]\nouts[0] = None",
        "t = torch.zeros(2)\nt.requires_grad = True",
    ],
)
def test_static_checks_leave_ordinary_code_alone(source):
    assert _codes(source) == set(), f"ordinary code was flagged: {_codes(source)}"


def test_static_checks_accept_every_model_solution_and_correct_fixture():
    for assignment in discover_assignments(REPOSITORY / "solutions"):
        answers = notebooks.solution_answers(notebooks.load_json(assignment.main_notebook))
        fixed = [
            notebooks.source_text(cell)
            for cell in notebooks.load_json(assignment.main_notebook)["cells"]
            if cell["cell_type"] == "code" and notebooks.is_locked(cell) and not notebooks.is_solution(cell)
        ]
        code = {
            gid: text
            for gid, text in answers.items()
            if notebooks.graded_cells(notebooks.load_json(assignment.main_notebook))[gid]["cell_type"] == "code"
        }
        found = scan_cells(
            code,
            fixed_sources=fixed,
            forbidden=assignment.settings.forbidden_calls,
            allowed_imports=assignment.settings.allowed_imports,
        )
        assert not found, f"{assignment.id}: the model solution is flagged: {found}"
        for fixture in discover_fixtures(SUBMISSIONS, assignment.id):
            if fixture.expected.get("failing"):
                continue  # only correct alternatives must pass unflagged
            answers = {gid: text for gid, text in fixture.answers(assignment).items() if gid in code}
            found = scan_cells(
                answers,
                fixed_sources=fixed,
                forbidden=assignment.settings.forbidden_calls,
                allowed_imports=assignment.settings.allowed_imports,
            )
            assert not found, f"{assignment.id}/{fixture.name} is flagged: {found}"


def _release_like() -> dict:
    """A tiny notebook shaped like a release: a locked setup cell, a solution cell, a test cell."""

    def cell(cell_type, source, grade_id=None, **flags):
        made = {"cell_type": cell_type, "metadata": {}, "source": source}
        if cell_type == "code":
            made.update(outputs=[], execution_count=None)
        if grade_id:
            made["metadata"]["nbgrader"] = {
                "grade_id": grade_id,
                "grade": False,
                "solution": False,
                "locked": False,
                "schema_version": 3,
                "task": False,
                **flags,
            }
        return made

    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3"}},
        "cells": [
            cell("markdown", "# statement"),
            cell("code", "import numpy as np", "setup", locked=True),
            cell("code", "# YOUR CODE HERE\nraise NotImplementedError()", "answer", solution=True),
            cell("code", "assert answer == 42", "test_answer", grade=True, locked=True, points=2),
        ],
    }


def test_rebuild_restores_deleted_tests_and_drops_stray_metadata():
    release = _release_like()
    submitted = json.loads(json.dumps(release))
    submitted["cells"][2]["source"] = "answer = 42"
    del submitted["cells"][3]  # the test cell is gone
    submitted["cells"].append(
        {
            "cell_type": "code",
            "source": "print(1)",
            "outputs": [],
            "execution_count": None,
            "metadata": {"nbgrader": {"grade_id": "bonus", "grade": True, "points": 50}},
        }
    )
    submitted["cells"].append(
        {
            "cell_type": "code",
            "source": "pass",
            "outputs": [],
            "execution_count": None,
            "metadata": {"nbgrader": "garbage"},
        }
    )
    findings = []
    clean = rebuild(submitted, release, "nb", findings)
    ids = [notebooks.grade_id(cell) for cell in clean["cells"]]
    assert ids.count("test_answer") == 1 and ids.index("test_answer") == ids.index("answer") + 1, (
        f"the deleted test should come back right after its answer cell: {ids}"
    )
    assert "bonus" not in ids, "a made-up graded cell must lose its metadata"
    assert {f.code for f in findings} >= {"cell-restored", "unknown-cell-id", "stray-metadata"}, findings
    assert clean["cells"][ids.index("answer")]["source"] == "answer = 42", "the learner's answer must be kept"


def test_rebuild_keeps_the_first_copy_of_a_duplicated_id_and_restores_points_and_types():
    release = _release_like()
    submitted = json.loads(json.dumps(release))
    copy = json.loads(json.dumps(submitted["cells"][3]))
    copy["source"] = "pass"
    submitted["cells"].insert(0, copy)
    submitted["cells"][4]["metadata"]["nbgrader"]["points"] = 100
    submitted["cells"][4]["cell_type"] = "markdown"
    findings = []
    clean = rebuild(submitted, release, "nb", findings)
    graded = [cell for cell in clean["cells"] if notebooks.grade_id(cell) == "test_answer"]
    assert len(graded) == 1, "a duplicated id must be graded once"
    assert graded[0]["source"] == "assert answer == 42", "a locked cell must get the release's source back"
    assert graded[0]["metadata"]["nbgrader"]["points"] == 2 and graded[0]["cell_type"] == "code"
    assert {"duplicate-cell-id", "points-changed", "cell-type-changed", "locked-cell-edited"} & {
        f.code for f in findings
    }


def test_unreadable_and_renamed_notebooks(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(REPOSITORY / "solutions" / "ex1_manual_attention", root / "solutions" / "ex1_manual_attention")
    layout = CourseLayout.from_directory(root)
    assignment = layout.assignment("ex1_manual_attention")
    release_dir = tmp_path / "release"
    release_dir.mkdir()
    notebooks.save_json(_release_like(), release_dir / "ex1_manual_attention.ipynb")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "ex1_manual_attention.ipynb").write_text('{"cells": [')
    result = inspect_submission(broken, assignment, release_dir)
    assert result.unreadable == ["ex1_manual_attention"] and not result.notebooks
    assert any("not valid JSON" in finding.message for finding in result.findings), result.findings
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    notebooks.save_json(_release_like(), renamed / "Untitled (copy).ipynb")
    result = inspect_submission(renamed, assignment, release_dir)
    assert "ex1_manual_attention" in result.notebooks
    assert "renamed-notebook" in {finding.code for finding in result.findings}


def test_grading_settings_reject_unknown_or_invalid_values():
    with pytest.raises(ValueError, match="unknown key"):
        GradingSettings.from_metadata({"course_grading": {"cell_timeout": 5}}, "nb")
    with pytest.raises(ValueError, match="positive integer"):
        GradingSettings.from_metadata({"course_grading": {"cell_timeout_s": -1}}, "nb")
    settings = GradingSettings.from_metadata({"course_grading": {"cell_timeout_s": 5, "preload": ["numpy"]}}, "nb")
    assert settings.cell_timeout_s == 5 and settings.preload == ("numpy",)
    assert settings.judge == "outside", "the hidden tests run in the grader unless said otherwise"
    with pytest.raises(ValueError, match="always run in the grader"):
        GradingSettings.from_metadata({"course_grading": {"judge": "kernel"}}, "nb")


def test_mount_plan_covers_untraversable_parents_and_refuses_system_folders(tmp_path):
    secret = tmp_path / "home"
    (secret / "python" / "lib").mkdir(parents=True)
    secret.chmod(0o700)
    hide, mount_back = plan_mounts([str(tmp_path / "course")], [str(secret / "python")], need_traversal=True)
    # The outermost folder an unprivileged user cannot walk through gets a tmpfs; the path is rebuilt inside it.
    assert any(str(secret).startswith(hidden + "/") for hidden in hide), (hide, mount_back)
    assert mount_back == [str(secret / "python")], (hide, mount_back)
    with pytest.raises(ValueError, match="refusing to hide"):
        plan_mounts(["/usr"], [], need_traversal=False)


def test_attack_and_fixture_folders_are_complete():
    for attack in discover_attacks(SUBMISSIONS):
        assert {"threat", "description", "expect"} <= set(attack.spec), f"{attack.name}/attack.json is incomplete"
        assert "status" in attack.spec["expect"], f"{attack.name}: expect.status is required"
    for assignment in discover_assignments(REPOSITORY / "solutions"):
        for fixture in discover_fixtures(SUBMISSIONS, assignment.id):
            assert "auto_score" in fixture.expected, f"{assignment.id}/{fixture.name}/expected.json needs auto_score"
            assert fixture.answers(assignment), (
                f"{assignment.id}/{fixture.name}: no answer at all"
            )  # and its base resolves


def test_csv_round_trip(tmp_path):
    from course_grader.autograde import GradeRecord

    records = [
        GradeRecord("ada", "ex1", "graded", score=16, max_score=18, auto_score=16, auto_max=16, manual_pending=2),
        GradeRecord("bob", "ex1", "error", needs_review=True, reasons=["not valid JSON"]),
    ]
    rows = read_csv(write_csv(records, tmp_path / "grades.csv"))
    assert [row["student"] for row in rows] == ["ada", "bob"]
    assert rows[0]["score"] == "16" and rows[1]["status"] == "error" and rows[1]["reasons"] == "not valid JSON"


class _RecordingStream:
    """Stands in for ipykernel's OutStream: a name, the current parent message and a write method."""

    def __init__(self, name):
        self.name, self.parent_header, self.received = name, {"header": {"msg_id": "cell-1"}}, []

    def write(self, text):
        self.received.append(text)
        return len(text)


def test_kernel_guard_drops_text_past_the_cell_limit_before_it_is_buffered():
    limiter = kernel_guard._OutputLimiter(message_chars=40, cell_chars=100)
    stdout, stderr = _RecordingStream("stdout"), _RecordingStream("stderr")
    limiter.wrap_stream(stdout)
    limiter.wrap_stream(stderr)
    assert all(stdout.write("x" * 30) == 30 for _ in range(10)), "write must report every character as taken"
    assert sum(map(len, stdout.received)) == 101, "one character past the limit reaches the buffer, no more"
    stderr.write("e" * 10)
    assert stderr.received == ["e" * 10], "each stream of a cell has its own budget"
    stdout.parent_header = {"header": {"msg_id": "cell-2"}}
    stdout.write("y" * 5)
    assert stdout.received[-1] == "y" * 5, "the next cell starts with a fresh budget"


def test_load_test_checks_exact_scores_and_attack_bounds():
    from grading_support.grade_load import unexpected

    expected = {
        "a-model": ("graded", 16.0, True),
        "b-attack-x": ("graded", 4.0, False),
        "c-broken": ("error", 0.0, True),
    }
    rows = {
        "a-model": {"status": "graded", "auto_score": "16"},
        "b-attack-x": {"status": "graded", "auto_score": "2"},
        "c-broken": {"status": "error", "auto_score": "0"},
    }
    assert unexpected(expected, rows) == [], "scores as expected (an attack below its bound) must pass"
    rows["b-attack-x"]["auto_score"] = "5"
    rows["a-model"]["auto_score"] = "15"
    rows["c-broken"]["status"] = "graded"
    problems = unexpected(expected, rows)
    assert len(problems) == 3 and "<= 4" in problems[1], f"each broken promise must be reported: {problems}"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="sandbox uids are used only when grading runs as root"
)
def test_sweep_returns_only_when_no_process_of_the_uid_is_left():
    from course_grader.sandbox import namespaces

    uid = 1_659_999  # above the uids the grader allocates from
    assert namespaces.count_processes(uid) == 0, f"uid {uid} is in use on this machine"
    starter = os.fork()
    if starter == 0:  # becomes the uid, leaves 30 orphans behind (like a fork bomb's survivors), exits
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            for _ in range(30):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
        finally:
            os._exit(0)
    os.waitpid(starter, 0)
    deadline = time.monotonic() + 10
    while namespaces.count_processes(uid) < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert namespaces.count_processes(uid) == 30, "the orphans did not start"
    assert namespaces.sweep_uid(uid), "the sweep gave up"
    assert namespaces.count_processes(uid) == 0, (
        "processes of the uid are still there (even as zombies they count against the next kernel's limit)"
    )


def test_attack_table_goes_to_the_graders_doc_only_from_a_complete_run_that_kept_every_promise(tmp_path):
    from course_grader import attack_table

    attacks = discover_attacks(SUBMISSIONS)
    outcomes = [
        {
            "name": attack.name,
            "threat": attack.threat,
            "description": attack.spec["description"],
            "status": "graded",
            "score": "0/16",
            "runtime": [],
            "found": ["x"],
            "verdict": "defended",
            "problems": [],
        }
        for attack in attacks
    ]
    table = attack_table.render(outcomes, workers=2, cell_timeout_s=10, sandbox="test")
    assert attack_table.check_build_table(table) == []
    outcomes[0] = dict(outcomes[0], problems=["auto score 16"], verdict="NOT DEFENDED")
    broken = attack_table.check_build_table(attack_table.render(outcomes, workers=2, cell_timeout_s=10, sandbox="t"))
    assert broken and attacks[0].name in broken[0], broken
    partial = attack_table.check_build_table(
        attack_table.render(outcomes[1:], workers=2, cell_timeout_s=10, sandbox="t")
    )
    assert partial and "missing" in partial[-1], partial
    doc = tmp_path / "grader.md"
    doc.write_text(f"intro\n\n{attack_table.START}\n| old |\n{attack_table.END}\n\nrest\n")
    build = tmp_path / "attack_table.md"
    build.write_text(table)
    assert attack_table.main(["--table", str(build), "--doc", str(doc)]) == 1, "a stale table is reported"
    assert attack_table.main(["--table", str(build), "--doc", str(doc), "--write-doc"]) == 0
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("\nrest\n") and "| old |" not in text
    assert attack_table.table_rows(text) == attack_table.table_rows(table)
    assert attack_table.main(["--table", str(build), "--doc", str(doc)]) == 0


def test_the_graders_doc_lists_every_attack():
    from course_grader import attack_table

    doc = (REPOSITORY / "docs" / "grader.md").read_text(encoding="utf-8")
    rows = [row.split("|")[1].strip() for row in attack_table.table_rows(doc)[2:]]
    threats = [attack.threat.replace("|", "/") for attack in discover_attacks(SUBMISSIONS)]
    assert sorted(rows) == sorted(threats), (
        "the attack table of docs/grader.md is not the attack test's: run tests/test_grading_attacks.py, then "
        f"`course attack-table --write-doc` (missing: {sorted(set(threats) - set(rows))}, "
        f"gone: {sorted(set(rows) - set(threats))})"
    )


def test_the_warm_kernel_imports_what_the_tests_reach():
    from course_grader.judging.static_checks import modules_the_tests_reach

    reached = modules_the_tests_reach(
        [
            "import numpy as np\nimport torch.nn.functional as F\nfrom course_utils.attention import copy_from_torch_mha",
            "def check():\n    rng = np.random.default_rng(0)\n    return F.softmax(torch.ones(2), 0)",
            "from course_grader import kernel_guard\nfrom __future__ import annotations",
        ]
    )
    for required in ("numpy", "torch", "torch.nn", "torch.nn.functional", "course_utils.attention"):
        assert required in reached, f"{required} is imported by the tests and must be imported ahead: {reached}"
    for optional in ("numpy.random?", "numpy.random.default_rng?", "course_utils.attention.copy_from_torch_mha?"):
        assert optional in reached, f"{optional[:-1]} is reached by the tests (imported ahead if a module): {reached}"
    assert not any(name.startswith(("course_grader", "__future__")) for name in reached), reached


WORKER_IMPORTS_SCRIPT = r"""
import sys
from pathlib import Path
from course_grader.stages import run
from course_grader.ground.layout import discover_assignments

assignments = [a for a in discover_assignments(Path(sys.argv[1])) if a.id == "ex2_transformer"]
run._import_for_workers(assignments)
before = set(sys.modules)
import torch
import torch.nn.functional as F
# What ex2's and ex5's hidden tests do in every worker: the reference model computes, the loss's gradient goes
# back through autograd, Adam steps and the weights are loaded back (judge.py's side of a training).
model = torch.nn.Sequential(torch.nn.Embedding(11, 8), torch.nn.Linear(8, 11))
parameters = {name: value.detach().clone().requires_grad_(True) for name, value in model.named_parameters()}
optimizer = torch.optim.Adam(parameters.values(), lr=3e-3)
tokens = torch.randint(0, 11, (3, 5), generator=torch.Generator().manual_seed(0))
logits = torch.func.functional_call(model, parameters, (tokens,))
loss = F.cross_entropy(logits.flatten(0, 1), tokens.flatten(), ignore_index=0)
grads = torch.autograd.grad(loss, list(parameters.values()))
for parameter, grad in zip(parameters.values(), grads, strict=True):
    parameter.grad = grad
optimizer.step()
model.load_state_dict({name: value.detach() for name, value in parameters.items()})
torch._check(logits.shape[-1] == 11)
print(sorted(set(sys.modules) - before))
"""


def test_a_worker_imports_nothing_when_its_hidden_test_trains():
    """PyTorch imports torch._dynamo (with SymPy, some 900 modules) on an optimizer's first step: imported once
    before the workers fork, or every worker whose hidden test trains spends about a second of CPU on it."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", WORKER_IMPORTS_SCRIPT, str(REPOSITORY / "solutions")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported = result.stdout.strip()
    assert imported == "[]", f"a worker imported these after the fork: {imported[:500]}"


GUARD_SCRIPT = r"""
import json, sys, types
import numpy as np, numpy.random, numpy.testing   # what the tests reach is imported ahead (warmkernel.preload)
import torch
from IPython.core.interactiveshell import InteractiveShell
from course_grader.sandbox import warmkernel

guard = warmkernel.load_guard(sys.argv[1])
guard.prepare()
shell = InteractiveShell.instance()
kernel = types.SimpleNamespace(session=types.SimpleNamespace(send=lambda *args, **kwargs: None),
                               shell_handlers={"execute_request": lambda *args: None})
tripwire = guard._Tripwire(shell, kernel)
tripwire._start()
found = {}
def cell(code):
    shell.run_cell(code, store_history=False)
cell("import builtins, sys, numpy as np\n"
     "np.random.default_rng = len\nnp.ndarray_like = 1\nbuiltins.float = int\nsys.modules['json'] = np\n"
     "class Fake:\n    pass\nholder = [np.testing]\nholder[0].assert_allclose = print")
found['restore'] = tripwire.restore()
found['after restore'] = [np.random.default_rng is len, float is int, sys.modules['json'] is np]
cell("def called_by_a_test():\n    builtins.abs = lambda value: 0\ncalled_by_a_test()")
found['verify'] = tripwire.verify()
cell("builtins.abs = lambda value: 0\nimport xml.dom.minidom  # a library imported for the first time")
found['undone by an import'] = tripwire.verify()
cell("import functools\nnp.allclose = functools.wraps(np.allclose)(lambda *a, **k: True)")
found['fake wrapper'] = tripwire.verify()
original = np.isclose
def library_wrapper(*args, **kwargs):   # what a library's decorator makes: its own code around the original
    return original(*args, **kwargs)
library_wrapper.__wrapped__ = original
library_wrapper.__code__ = library_wrapper.__code__.replace(co_filename=np.__file__)
np.isclose = library_wrapper
found['library wrapper'] = tripwire.verify()
cell("import torch\nfrom torch.utils._python_dispatch import TorchDispatchMode\n"
     "class Spy(TorchDispatchMode):\n"
     "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
     "        return func(*args, **(kwargs or {}))\n"
     "Spy().__enter__()\ntorch.overrides.TorchFunctionMode().__enter__()")
found['modes undone'] = [label for label in tripwire.restore()['undone'] if 'torch' in label and 'mode' in label]
found['modes left'] = [torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()]
cell("import threading\ntry:\n    threading.Thread(target=print).start()\n    started = True\n"
     "except RuntimeError:\n    started = False")
cell("import sys\ntry:\n    sys.settrace(lambda *a: None)\n    traced = True\nexcept RuntimeError:\n    traced = False")
found['notebook thread started'] = shell.user_ns['started']
found['notebook trace set'] = shell.user_ns['traced']
found['problems'] = tripwire.problems()
print(json.dumps(found))
"""


def test_kernel_guard_restores_references_and_fails_what_changed_during_a_test(tmp_path):
    """The guard in a plain IPython shell, in its own process (its audit hook cannot be removed)."""
    import subprocess
    import sys

    script = tmp_path / "guard_check.py"
    script.write_text(GUARD_SCRIPT)
    guard_file = Path(kernel_guard.__file__)
    result = subprocess.run(
        [sys.executable, str(script), str(guard_file)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    undone = found["restore"]["undone"]
    for label in ("numpy.random.default_rng", "builtins.float", "sys.modules['json']", "numpy.testing.assert_allclose"):
        assert label in undone, f"{label} was replaced before the test and must be put back: {undone}"
    assert found["after restore"] == [False, False, False], "the originals are back in place"
    assert "builtins.abs" in found["verify"]["changed"], (
        f"a change made while a test ran must fail it: {found['verify']}"
    )
    assert "builtins.abs" in found["undone by an import"]["changed"], (
        f"a change undone when a library was imported during the test still fails the test: {found}"
    )
    assert "numpy.allclose" in found["fake wrapper"]["changed"], (
        "a notebook's function dressed as a wrapper of the original (functools.wraps) is still a replacement"
    )
    assert not found["library wrapper"]["changed"], (
        f"a library's own wrapper of its function (torch.manual_seed, optimizers' step) is not tampering: {found}"
    )
    assert sorted(found["modes undone"]) == ["torch dispatch mode", "torch function mode"], found["modes undone"]
    assert found["modes left"] == [0, 0], "the torch modes a notebook left active are popped before the next test"
    assert found["notebook thread started"] is False and found["notebook trace set"] is False, found
    assert any("thread" in problem for problem in found["problems"]) and any(
        "settrace" in problem for problem in found["problems"]
    ), found["problems"]


def test_the_gradebook_schema_head_is_what_alembic_heads_prints(tmp_path):
    """The in-process answer (pipeline.gradebook_schema_head) against nbgrader's own: `alembic heads`
    run as nbgrader runs it, on nbgrader's alembic.ini template."""
    import subprocess
    import sys

    from nbgrader.dbutil import write_alembic_ini

    from course_grader.exchange import pipeline

    ini = tmp_path / "alembic.ini"
    write_alembic_ini(str(ini), f"sqlite:///{tmp_path / 'gradebook.db'}")
    alembic = Path(sys.executable).parent / "alembic"
    printed = subprocess.run([str(alembic), "-c", str(ini), "heads"], capture_output=True, text=True, check=True)
    assert pipeline.gradebook_schema_head() == printed.stdout.split()[0], printed.stdout
    pipeline.prepare_nbgrader()
    import nbgrader.api

    assert nbgrader.api.get_alembic_version() == pipeline.gradebook_schema_head()


@pytest.mark.skipif(os.geteuid() != 0, reason="the runtime folders are a tmpfs only when grading runs as root")
def test_a_runtime_folder_bounds_what_a_kernel_writes_and_is_emptied_for_the_next(tmp_path):
    """What the session mounts on each slot's runtime folder holds at most RUNTIME_MB and RUNTIME_ENTRIES;
    the manager empties it (iteratively) and gives it back mode 0700 after a kernel shut it."""
    import errno

    from course_grader.sandbox import manager, namespaces, session

    folder = tmp_path / "rt"
    folder.mkdir()
    namespaces.mount_tmpfs(folder, session.RUNTIME_MB, inodes=session.RUNTIME_ENTRIES)
    try:
        written, fd = 0, os.open(folder / "flood.bin", os.O_WRONLY | os.O_CREAT, 0o600)
        with pytest.raises(OSError) as full:
            while written < 64 << 20:
                written += os.write(fd, b"\1" * (1 << 20))
        os.close(fd)
        assert full.value.errno == errno.ENOSPC and written <= session.RUNTIME_MB << 20, written
        levels, fd = 0, os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        with pytest.raises(OSError) as no_inode:
            while levels < 100_000:
                os.mkdir(os.fsdecode(b"\xff\n"), dir_fd=fd)
                inner = os.open(os.fsdecode(b"\xff\n"), os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd, levels = inner, levels + 1
        os.chmod(fd, 0)
        os.close(fd)
        assert no_inode.value.errno == errno.ENOSPC and levels < session.RUNTIME_ENTRIES, levels
        os.chmod(folder, 0)
        manager._clear_folder(str(folder))
        assert os.listdir(folder) == [] and stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    finally:
        namespaces.umount(folder)


def test_every_learner_is_in_the_gradebook_before_the_workers_start(tmp_path, monkeypatch):
    """Two workers grading two assignments of one new learner at once both added the learner to the
    gradebook (nbgrader's autograde adds a learner it does not know): the second row was an error
    ("UNIQUE constraint failed: student.id"). The learners are added before any worker starts."""
    from nbgrader.api import Gradebook, MissingEntry

    from course_grader import autograde
    from course_grader.exchange.formgrader import NO_ROSTER_NAME
    from course_grader.stages.records import Execution

    root = tmp_path / "course"
    assignment_ids = ["ex1_manual_attention", "ex3_positional_encoding"]
    for assignment_id in assignment_ids:
        shutil.copytree(REPOSITORY / "solutions" / assignment_id, root / "solutions" / assignment_id)
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    pipeline.generate_release(layout)
    for student in ("ada", "bob"):
        for assignment_id in assignment_ids:
            assignment = layout.assignment(assignment_id)
            release = fixtures.release_notebook(layout, assignment)
            fixtures.place_submission(layout, student, assignment, fixtures.notebook_files(assignment, release))
    (root / "roster.csv").write_text("id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.org\n")
    known_when_executed = {}

    def run(context, admission):
        with Gradebook(context.layout.db_url, context.layout.course_id) as gradebook:
            for job in admission.jobs:
                try:
                    found = gradebook.find_student(job.student)
                    known_when_executed[job.student, job.assignment.id] = (found.first_name, found.last_name)
                except MissingEntry:
                    known_when_executed[job.student, job.assignment.id] = None
        return Execution(admission, outcomes={}, sandbox="none (test)", uids=[])

    monkeypatch.setattr(autograde, "run", run)
    autograde.grade(layout, workers=2, feedback=False, log=lambda line: None)
    names = {"ada": ("Ada", "Lovelace"), "bob": (NO_ROSTER_NAME, "bob")}  # bob is not in the roster
    expected = {(student, assignment_id): names[student] for student in names for assignment_id in assignment_ids}
    assert known_when_executed == expected, (
        f"every learner should be in the gradebook, named, before execution starts: {known_when_executed}"
    )
