"""Submissions built from answer files, for the tests, the attack suite and the load test.

A fixture is a folder `tests/submissions/<assignment>/<name>/` with one file per solution cell the
learner filled in (`<grade id>.py` for code, `<grade id>.md` for written answers) and
`expected.json` (what grading must give). The notebook is assembled from the *current* release, so
fixtures stay valid when the statement changes. Answers start from a base, `expected.json`'s "base":
"release" (the default: cells without a file keep the release's stub), "solution" (the model
solution's code cells, so that a typical mistake holds only the cell it gets wrong; written answers
keep the stub) or another fixture's name (its answers, resolved the same way); the folder's files
override the base's.

An attack is a folder `tests/submissions/attacks/<name>/` with `attack.json` (threat, base answers as
above, expectations, and the assignment it targets when it is not the first exercise), optional
answer files that override the base, and an optional `mutate.py` whose
`mutate(notebook, context)` returns the submission's files ({relative path: bytes}) for attacks on
the notebook file itself (broken JSON, duplicated cells, extra modules...). A name that is not UTF-8
is written as `os.fsdecode(b"caf\\xe9.py")`. What git cannot store (symbolic and hard links, FIFOs) is
made by an optional `place(folder, context)` in the same `mutate.py`, called once the files are in
submitted/<learner>/<assignment>/ (`folder`); it may replace the folder itself.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from types import ModuleType

from course_grader.ground import notebooks as nbtools
from course_grader.ground.layout import Assignment, CourseLayout

ANSWER_SUFFIXES = (".py", ".md")
NOT_ANSWERS = {"mutate.py", "expected.json", "attack.json"}


def load_answers(folder: Path, substitutions: dict[str, str] | None = None) -> dict[str, str]:
    """grade id -> source for every answer file in a fixture folder."""
    answers = {}
    for path in sorted(Path(folder).iterdir()):
        if path.suffix in ANSWER_SUFFIXES and path.name not in NOT_ANSWERS:
            text = path.read_text(encoding="utf-8")
            for placeholder, value in (substitutions or {}).items():
                text = text.replace(placeholder, value)
            answers[path.stem] = text.rstrip("\n")
    return answers


def base_answers(base: str, assignment: Assignment, fixtures_root: Path, _seen: tuple[str, ...] = ()) -> dict[str, str]:
    """The answers a fixture or an attack starts from: "release", "solution" or a fixture's name."""
    if base == "release":
        return {}
    if base == "solution":
        return model_code_answers(assignment)
    folder = Path(fixtures_root) / assignment.id / base
    if not (folder / "expected.json").is_file():
        raise ValueError(f"base {base!r}: no fixture {folder} (expected 'release', 'solution' or a fixture's name)")
    if base in _seen:
        raise ValueError(f"fixture bases form a cycle: {' -> '.join((*_seen, base))}")
    spec = json.loads((folder / "expected.json").read_text())
    answers = base_answers(spec.get("base", "release"), assignment, fixtures_root, (*_seen, base))
    answers.update(load_answers(folder))
    return answers


def release_notebook(layout: CourseLayout, assignment: Assignment) -> dict:
    return nbtools.load_json(layout.release_dir / assignment.id / f"{assignment.main_notebook.stem}.ipynb")


def model_answers(assignment: Assignment) -> dict[str, str]:
    return nbtools.solution_answers(nbtools.load_json(assignment.main_notebook))


def model_code_answers(assignment: Assignment) -> dict[str, str]:
    """The model solution's code cells only: its written answers are the marking guide, not a learner's."""
    source = nbtools.load_json(assignment.main_notebook)
    cells = nbtools.graded_cells(source)
    return {
        grade_id: text
        for grade_id, text in nbtools.solution_answers(source).items()
        if cells[grade_id]["cell_type"] == "code"
    }


def place_submission(
    layout: CourseLayout,
    student: str,
    assignment: Assignment,
    files: dict[str, bytes],
    timestamp: str = "2025-01-15 12:00:00.000000 UTC",
) -> Path:
    """Write files as if `course collect` had put them in submitted/<student>/<assignment>/."""
    folder = layout.submitted_dir / student / assignment.id
    folder.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    (folder / "timestamp.txt").write_text(timestamp)
    return folder


def notebook_files(assignment: Assignment, notebook: dict) -> dict[str, bytes]:
    return {f"{assignment.main_notebook.stem}.ipynb": json.dumps(notebook, indent=1).encode()}


@dataclasses.dataclass
class Fixture:
    name: str
    folder: Path
    expected: dict

    def answers(self, assignment: Assignment) -> dict[str, str]:
        return base_answers(self.name, assignment, self.folder.parents[1])

    def files(self, layout: CourseLayout, assignment: Assignment) -> dict[str, bytes]:
        release = release_notebook(layout, assignment)
        return notebook_files(assignment, nbtools.fill_in(release, self.answers(assignment)))


def discover_fixtures(root: Path, assignment_id: str) -> list[Fixture]:
    folder = Path(root) / assignment_id
    if not folder.is_dir():
        return []
    return [
        Fixture(path.name, path, json.loads((path / "expected.json").read_text()))
        for path in sorted(folder.iterdir())
        if (path / "expected.json").is_file()
    ]


@dataclasses.dataclass
class Attack:
    name: str
    folder: Path
    spec: dict

    @property
    def threat(self) -> str:
        return self.spec["threat"]

    def assignment_id(self, default: str) -> str:
        """The assignment the attack is written against (attack.json's "assignment"; else `default`)."""
        return self.spec.get("assignment", default)

    def _context(self, layout: CourseLayout, assignment: Assignment) -> dict:
        substitutions = {
            "{{COURSE_DIR}}": str(layout.root),
            "{{EXCHANGE_DIR}}": str(layout.exchange_dir),
            "{{SOURCE_DIR}}": str(layout.source_dir),
        }
        return {
            "assignment": assignment,
            "layout": layout,
            "notebook_name": assignment.main_notebook.stem,
            "substitutions": substitutions,
        }

    def _mutate_module(self) -> ModuleType | None:
        mutate_file = self.folder / "mutate.py"
        if not mutate_file.is_file():
            return None
        spec = importlib.util.spec_from_file_location(f"attack_{self.name}", mutate_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def files(self, layout: CourseLayout, assignment: Assignment, fixtures_root: Path) -> dict[str, bytes]:
        context = self._context(layout, assignment)
        answers = base_answers(self.spec.get("base", "release"), assignment, fixtures_root)
        answers.update(load_answers(self.folder, context["substitutions"]))
        notebook = nbtools.fill_in(release_notebook(layout, assignment), answers)
        module = self._mutate_module()
        if module is None or not hasattr(module, "mutate"):
            return notebook_files(assignment, notebook)
        return module.mutate(notebook, context)

    def place(
        self,
        layout: CourseLayout,
        assignment: Assignment,
        fixtures_root: Path,
        student: str,
        files: dict[str, bytes] | None = None,
    ) -> Path:
        """Put the attack in submitted/<student>/<assignment>/: its files, then what `place` makes."""
        folder = place_submission(
            layout, student, assignment, self.files(layout, assignment, fixtures_root) if files is None else files
        )
        module = self._mutate_module()
        if module is not None and hasattr(module, "place"):
            module.place(folder, self._context(layout, assignment))
        return folder


def discover_attacks(root: Path) -> list[Attack]:
    folder = Path(root) / "attacks"
    if not folder.is_dir():
        return []
    return [
        Attack(path.name, path, json.loads((path / "attack.json").read_text()))
        for path in sorted(folder.iterdir())
        if (path / "attack.json").is_file()
    ]


def hidden_lines(source_notebook: dict) -> set[str]:
    """Lines that appear only inside hidden-test regions of the source (long enough to be telling)."""
    hidden, public = set(), set()
    for cell in source_notebook["cells"]:
        text = nbtools.source_text(cell)
        lines = text.splitlines()
        for first, last in nbtools.marked_regions(text, nbtools.BEGIN_HIDDEN, nbtools.END_HIDDEN):
            hidden |= {line.strip() for line in lines[first + 1 : last]}
        public |= {line.strip() for line in nbtools.split_secret(text)[1]}
    return {line for line in hidden - public if len(line) > 12}
