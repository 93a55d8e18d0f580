"""Where the course's grading files live, and the nbgrader configuration that goes with them.

The repository root is nbgrader's course directory:

    solutions/<id>/<id>.ipynb   source of each assignment (solutions and hidden tests inside)
    release/<id>/               what learners receive (generated)
    submitted/<student>/<id>/   collected submissions (generated)
    autograded/ feedback/       nbgrader's outputs (generated)
    gradebook.db                nbgrader's database (generated)
    build/grading/              this package's own work area: reports, logs, staged copies

Every setting that nbgrader also needs comes from the course's `nbgrader_config.py`, so that the
`nbgrader` command and this package always agree; only paths are overridden here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

DEFAULT_COURSE_ID = "transformers-ground-up"
SOURCE_DIRNAME = "solutions"
EXCHANGE_ENV = "COURSE_EXCHANGE"
# Learner ids become directory names and parts of nbgrader's exchange file names ("id+assignment+time").
STUDENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
IGNORED_NAMES = (".ipynb_checkpoints", "__pycache__", ".DS_Store")


@dataclasses.dataclass(frozen=True)
class GradingSettings:
    """Per-assignment grading limits, read from the source notebook's metadata["course_grading"]."""

    cell_timeout_s: int = 60
    total_timeout_s: int = 300
    memory_mb: int = 3072
    cpu_s: int = 0  # 0: same as total_timeout_s
    max_processes: int = 64  # threads count too
    preload: tuple[str, ...] = ("numpy", "torch")
    forbidden_calls: tuple[str, ...] = ()
    allowed_imports: tuple[str, ...] = ()  # modules the static checks accept here (e.g. "time", "gc")
    judge: str = "outside"  # the hidden tests run in the grader (judge.py), never in the learner's kernel

    @classmethod
    def from_metadata(cls, metadata: dict, where: str) -> "GradingSettings":
        raw = metadata.get("course_grading", {})
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: metadata['course_grading'] must be a mapping, got {type(raw).__name__}")
        known = {field.name for field in dataclasses.fields(cls)}
        values = {}
        for key, value in raw.items():
            if key in ("assignment", "title"):
                continue
            if key not in known:
                raise ValueError(
                    f"{where}: unknown key metadata['course_grading'][{key!r}]; known keys: {sorted(known)}"
                )
            if key == "judge":
                if value != "outside":
                    raise ValueError(
                        f"{where}: metadata['course_grading']['judge'] is {value!r}: the hidden tests always run in "
                        "the grader, outside the learner's kernel ('outside', the default; judge.py)"
                    )
            elif key in ("preload", "forbidden_calls", "allowed_imports"):
                if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
                    raise ValueError(f"{where}: metadata['course_grading'][{key!r}] must be a list of strings")
                value = tuple(value)
            elif not (isinstance(value, int) and value > 0):
                raise ValueError(
                    f"{where}: metadata['course_grading'][{key!r}] must be a positive integer, got {value!r}"
                )
            values[key] = value
        return cls(**values)

    @property
    def effective_cpu_s(self) -> int:
        return self.cpu_s or self.total_timeout_s


@dataclasses.dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment: solutions/<id>/ with its notebooks and grading settings."""

    id: str
    source_dir: Path
    notebooks: tuple[str, ...]  # notebook names without ".ipynb"
    settings: GradingSettings

    @property
    def main_notebook(self) -> Path:
        name = self.id if self.id in self.notebooks else self.notebooks[0]
        return self.source_dir / f"{name}.ipynb"


def discover_assignments(source_dir: Path) -> list[Assignment]:
    """Every folder of `source_dir` that holds at least one notebook, sorted by name."""
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        raise FileNotFoundError(f"assignment source directory not found: {source_dir}")
    assignments = []
    for folder in sorted(source_dir.iterdir()):
        if not folder.is_dir() or folder.name.startswith((".", "_")) or folder.name in IGNORED_NAMES:
            continue
        notebooks = tuple(sorted(path.stem for path in folder.glob("*.ipynb")))
        if not notebooks:
            continue
        main = folder / (f"{folder.name}.ipynb" if folder.name in notebooks else f"{notebooks[0]}.ipynb")
        try:
            metadata = json.loads(main.read_text(encoding="utf-8")).get("metadata", {})
        except json.JSONDecodeError as error:
            raise ValueError(f"source notebook {main} is not valid JSON: {error}") from error
        settings = GradingSettings.from_metadata(metadata, str(main))
        assignments.append(Assignment(folder.name, folder, notebooks, settings))
    return assignments


@dataclasses.dataclass(frozen=True)
class CourseLayout:
    """Paths of one course directory and the exchange it uses."""

    root: Path
    course_id: str
    source_dir: Path
    exchange_dir: Path
    output_dir: Path

    @classmethod
    def from_directory(
        cls,
        course_dir: str | os.PathLike | None = None,
        *,
        exchange: str | os.PathLike | None = None,
        course_id: str | None = None,
        output_dir: str | os.PathLike | None = None,
    ) -> "CourseLayout":
        root = Path(course_dir or os.getcwd()).resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"course directory not found: {root}")
        settings = _read_nbgrader_settings(root)
        source = Path(settings.get("source_directory", SOURCE_DIRNAME))
        exchange_dir = exchange or os.environ.get(EXCHANGE_ENV) or settings.get("exchange_root") or root / "exchange"
        return cls(
            root=root,
            course_id=course_id or settings.get("course_id") or DEFAULT_COURSE_ID,
            source_dir=source if source.is_absolute() else root / source,
            exchange_dir=Path(exchange_dir).resolve(),
            output_dir=Path(output_dir).resolve() if output_dir else root / "build" / "grading",
        )

    release_dir = property(lambda self: self.root / "release")
    submitted_dir = property(lambda self: self.root / "submitted")
    autograded_dir = property(lambda self: self.root / "autograded")
    feedback_dir = property(lambda self: self.root / "feedback")
    gradebook_path = property(lambda self: self.root / "gradebook.db")

    @property
    def db_url(self) -> str:
        # Several grading processes write to the gradebook at once: wait for SQLite's lock instead of failing.
        return f"sqlite:///{self.gradebook_path}?timeout=120"

    def assignments(self) -> list[Assignment]:
        return discover_assignments(self.source_dir)

    def assignment(self, assignment_id: str) -> Assignment:
        for assignment in self.assignments():
            if assignment.id == assignment_id:
                return assignment
        known = ", ".join(a.id for a in self.assignments()) or "none"
        raise KeyError(f"no assignment {assignment_id!r} in {self.source_dir} (found: {known})")

    def nbgrader_config(self, **extra_sections):
        """nbgrader's configuration: the course's nbgrader_config.py with this layout's paths on top.

        `extra_sections` maps a configurable class name to a dict of traits, e.g.
        `Execute={"timeout": 10}`.
        """
        from traitlets.config import Config

        config = Config()
        config_file = self.root / "nbgrader_config.py"
        if config_file.is_file():
            from traitlets.config.loader import PyFileConfigLoader

            config.merge(PyFileConfigLoader(config_file.name, path=str(self.root)).load_config())
        config.CourseDirectory.root = str(self.root)
        config.CourseDirectory.course_id = self.course_id
        config.CourseDirectory.source_directory = str(self.source_dir)
        config.CourseDirectory.db_url = self.db_url
        config.Exchange.root = str(self.exchange_dir)
        config.Exchange.path_includes_course = False
        for section, traits in extra_sections.items():
            for name, value in traits.items():
                setattr(config[section], name, value)
        return config


def _read_nbgrader_settings(root: Path) -> dict:
    """course_id, source directory and exchange root from the course's nbgrader_config.py, if any."""
    config_file = root / "nbgrader_config.py"
    if not config_file.is_file():
        return {}
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(config_file.name, path=str(root)).load_config()
    settings = {}
    if "course_id" in config.CourseDirectory:
        settings["course_id"] = config.CourseDirectory.course_id
    if "source_directory" in config.CourseDirectory:
        settings["source_directory"] = config.CourseDirectory.source_directory
    if "root" in config.Exchange:
        settings["exchange_root"] = config.Exchange.root
    return settings


def check_student_id(student_id: str) -> None:
    if not STUDENT_ID_PATTERN.match(student_id):
        raise ValueError(
            f"learner id {student_id!r} is not allowed: use letters, digits and . _ @ - "
            "(at most 64 characters, starting with a letter or digit)"
        )
