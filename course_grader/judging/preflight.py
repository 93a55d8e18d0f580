"""Before any code runs: find, read, repair and inspect one submission.

nbgrader trusts the structure of a submitted notebook more than a whole class can afford: a copied
test cell (duplicate id) or stray nbgrader metadata aborts a batch, a notebook saved under another
name is skipped, invalid JSON stops everything. `inspect_submission` turns whatever was submitted
into a clean notebook nbgrader can always process, rebuilt around the release notebook:

- every cell nbgrader tracks appears exactly once, with the release's metadata, type and points;
  locked cells get the release's source back (nbgrader then restores the hidden tests);
- deleted tracked cells are put back where they belong (solution cells with their stub);
- everything else the learner wrote is kept as plain cells, without outputs or foreign metadata;
- old nbformat versions are converted; unreadable files become an explicit error;
- the folder is read as data (untrusted.py): links, hard links to outside files, FIFOs, sockets and
  devices are never followed or opened, each is a finding, and a notebook that is one scores 0;
  names that are not UTF-8 are shown escaped.

Each repair is a `Finding`; so is every construct the static checks flag in the learner's code.
The submitted files themselves are never modified.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from ..ground import untrusted
from ..ground.layout import Assignment
from ..ground.messages import CollectRefusals
from ..ground.notebooks import grade_id, is_locked, is_solution, nbgrader_meta, source_text
from ..ground.untrusted import Entry, TreeScan, display
from .static_checks import scan_cells

MAX_NOTEBOOK_BYTES = 50 * (1 << 20)
MAX_ATTACHMENT_CHARS = 5 * (1 << 20)
CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")
SUBMISSION_BOOKKEEPING = {"timestamp.txt", "submission_secret.txt", untrusted.COLLECT_REFUSALS}
MAX_BOOKKEEPING_BYTES = 1 << 20
SUBMISSION_SECRET = re.compile(r"^[0-9a-f]{16,256}$")


@dataclasses.dataclass(frozen=True)
class Finding:
    """Something the preflight found in a submission (a row's findings; the report lists them)."""

    code: str
    severity: str  # "info", "repaired", "review" (on the review list) or "error" (a notebook not read)
    message: str
    notebook: str = ""
    cell: str = ""
    source: str = ""  # the entry it concerns, as handed in (a renamed notebook: the learner's own name)

    def describe(self) -> str:
        where = "/".join(part for part in (self.notebook, self.cell) if part)
        return f"[{self.severity}] {self.code}" + (f" ({where})" if where else "") + f": {self.message}"


@dataclasses.dataclass
class Preflight:
    notebooks: dict[str, dict]  # expected notebook name -> clean notebook
    findings: list[Finding]
    unreadable: list[str]  # expected notebooks with no usable file
    tree: TreeScan | None = None  # the submission folder as scanned (nothing followed)

    @property
    def needs_review(self) -> bool:
        return any(finding.severity in ("review", "error") for finding in self.findings)


def _read_notebook(scan: TreeScan, entry: Entry, name: str, findings: list[Finding]) -> dict | None:
    """The notebook as nbformat 4 JSON, or None (with an error finding) if it cannot be read."""

    def error(message: str) -> None:
        findings.append(Finding("unreadable-notebook", "error", f"{entry.shown}: {message}", name))

    if entry.size > MAX_NOTEBOOK_BYTES:
        error(f"{entry.size} bytes, more than the {MAX_NOTEBOOK_BYTES} allowed")
        return None
    try:
        raw = untrusted.read_file(scan, entry, MAX_NOTEBOOK_BYTES)
    except untrusted.UnsafePath as problem:
        error(str(problem))
        return None
    if len(raw) > MAX_NOTEBOOK_BYTES:
        error(f"more than the {MAX_NOTEBOOK_BYTES} bytes allowed")
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as problem:
        error(f"not UTF-8 text ({problem.reason} at byte {problem.start})")
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as problem:
        error(f"not valid JSON (line {problem.lineno}, column {problem.colno}: {problem.msg})")
        return None
    if not isinstance(data, dict):
        error(f"a notebook is a JSON object, this file holds a {type(data).__name__}")
        return None
    version = data.get("nbformat")
    if version != 4:
        try:
            import nbformat

            converted = nbformat.reads(text, as_version=4)
            data = json.loads(nbformat.writes(converted, version=4))
        except Exception as problem:
            error(f"nbformat {version!r} could not be converted to version 4 ({problem})")
            return None
        findings.append(Finding("converted-nbformat", "info", f"converted from nbformat {version} to 4", name))
    if not isinstance(data.get("cells"), list):
        error("it has no list of cells")
        return None
    return data


def _overlap(scan: TreeScan, entry: Entry, release_ids: set[str]) -> int:
    if entry.size > MAX_NOTEBOOK_BYTES:
        return 0
    try:
        data = json.loads(untrusted.read_file(scan, entry, MAX_NOTEBOOK_BYTES).decode("utf-8"))
        return len({grade_id(cell) for cell in data.get("cells", []) if isinstance(cell, dict)} & release_ids)
    except (OSError, ValueError, AttributeError):
        return 0


def _locate(
    scan: TreeScan, assignment: Assignment, releases: dict[str, dict], findings: list[Finding]
) -> tuple[dict[str, Entry], dict[str, Entry]]:
    """(expected notebook name -> submitted file, expected name -> refused entry), renamed copies accepted.

    A notebook's own name taken by a link, a hard link or a special file is refused: that notebook
    scores 0, and no other file stands in for it.
    """
    candidates = [
        entry for entry in scan.files() if entry.path.endswith(".ipynb") and ".ipynb_checkpoints" not in entry.parts
    ]
    located: dict[str, Entry] = {}
    refused: dict[str, Entry] = {}
    for name in assignment.notebooks:
        exact = scan.get(f"{name}.ipynb")
        if exact is None or exact.kind == "folder":
            continue
        if scan.problem(exact) is None:
            located[name] = exact
        else:
            refused[name] = exact
    unused = [entry for entry in candidates if entry not in located.values()]
    for name in assignment.notebooks:
        if name in located or name in refused:
            continue
        release_ids = {grade_id(cell) for cell in releases[name]["cells"]} - {None}
        scored = sorted(((_overlap(scan, entry, release_ids), entry) for entry in unused), key=lambda item: -item[0])
        if scored and scored[0][0] > 0:
            chosen = scored[0][1]
        elif len(unused) == 1 and len(assignment.notebooks) == 1:
            chosen = unused[0]
        else:
            findings.append(Finding("missing-notebook", "error", f"no {name}.ipynb in the submission", name))
            continue
        unused.remove(chosen)
        located[name] = chosen
        findings.append(
            Finding("renamed-notebook", "repaired", f"graded {chosen.shown} as {name}.ipynb", name, source=chosen.path)
        )
    return located, refused


def _instructor_files(assignment: Assignment) -> dict[tuple[int, int], str]:
    """(device, inode) -> name of every file of the assignment's source folder (to name a hard link's other end)."""
    files = {}
    for path in assignment.source_dir.rglob("*"):
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            files[(info.st_dev, info.st_ino)] = (
                f"{assignment.source_dir.parent.name}/{path.relative_to(assignment.source_dir.parent)}"
            )
    return files


def _path_findings(scan: TreeScan, refused: dict[str, Entry], assignment: Assignment, findings: list[Finding]) -> None:
    """A finding for every entry that was not followed or opened, and for names that are not UTF-8."""
    notebook_of = {entry.path: name for name, entry in refused.items()}
    problems = scan.problems()
    instructor = _instructor_files(assignment) if any(code == "hard-link" for _, code, _ in problems) else {}
    for entry, code, message in problems:
        if entry.inode in instructor:
            message += f"; it is the instructor's {display(instructor[entry.inode])}"
        if entry.path in notebook_of:
            name = notebook_of[entry.path]
            findings.append(Finding(code, "error", f"{message}; {name}.ipynb scores 0", name))
        else:
            findings.append(Finding(code, "review", message))
    for folder, why in scan.unreadable:
        findings.append(Finding("unreadable-folder", "review", f"{display(folder)} could not be read ({why})"))
    if scan.truncated:
        findings.append(Finding("too-many-files", "review", f"the submission holds {scan.truncated}"))
    odd = [entry.shown for entry in scan.entries if not untrusted.is_utf8(entry.parts[-1])]
    if odd:
        shown = ", ".join(odd[:5]) + (f" and {len(odd) - 5} more" if len(odd) > 5 else "")
        findings.append(Finding("undecodable-name", "info", f"names that are not UTF-8 (shown escaped): {shown}"))


def _collect_refusals(scan: TreeScan, assignment: Assignment, findings: list[Finding]) -> None:
    """What `course collect` left in the exchange (its list, written next to the copy)."""
    entry = scan.get(untrusted.COLLECT_REFUSALS)
    if entry is None or scan.problem(entry) is not None:
        return
    try:
        refused = CollectRefusals.from_json(
            untrusted.read_file(scan, entry, MAX_BOOKKEEPING_BYTES).decode("utf-8"), untrusted.COLLECT_REFUSALS
        ).refused
    except Exception:
        findings.append(
            Finding(
                "refused-at-collect",
                "review",
                f"{untrusted.COLLECT_REFUSALS} is unreadable: what collect refused is unknown",
            )
        )
        return
    notebooks = {f"{name}.ipynb" for name in assignment.notebooks}
    for item in refused:
        path = display(str(item.get("path", "?")))
        severity = "error" if path in notebooks or path == "." else "review"
        findings.append(
            Finding(
                "refused-at-collect",
                severity,
                f"not collected from the exchange: {display(str(item.get('reason', path)))}",
            )
        )


def _plain_cell(cell_type: str, source: str, attachments=None) -> dict:
    cell = {"cell_type": cell_type, "metadata": {}, "source": source}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    elif attachments:
        cell["attachments"] = attachments
    return cell


def _tracked_cell(reference: dict, source: str, attachments=None) -> dict:
    cell = _plain_cell(reference["cell_type"], source, attachments if reference["cell_type"] != "code" else None)
    cell["metadata"] = {
        key: copy.deepcopy(value)
        for key, value in reference.get("metadata", {}).items()
        if key in ("nbgrader", "editable", "deletable")
    }
    return cell


def rebuild(data: dict, release: dict, name: str, findings: list[Finding]) -> dict:
    """A clean nbformat-4.5 notebook: the learner's cells, nbgrader's cells as released."""
    release_cells = {grade_id(cell): cell for cell in release["cells"] if grade_id(cell)}
    release_order = [grade_id(cell) for cell in release["cells"] if grade_id(cell)]

    def note(code: str, severity: str, message: str, cell: str = "") -> None:
        findings.append(Finding(code, severity, message, name, cell))

    cells, seen = [], set()
    for index, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            note("invalid-cell", "repaired", f"cell {index} is not a valid cell and was dropped")
            continue
        source = source_text(cell)
        attachments = _kept_attachments(cell, index, note)
        identifier = _graded_id(cell, index, release_cells, seen, note)
        if identifier is None:
            cells.append(_plain_cell(cell["cell_type"], source, attachments))
            continue
        seen.add(identifier)
        reference = release_cells[identifier]
        _note_changed_metadata(cell, reference, identifier, note)
        source = _graded_source(reference, source, identifier, note)
        cells.append(_tracked_cell(reference, source, attachments))
    _put_back_missing(cells, seen, release_cells, release_order, note)
    _give_ids(cells)
    return {"cells": cells, "metadata": copy.deepcopy(release.get("metadata", {})), "nbformat": 4, "nbformat_minor": 5}


# The steps of rebuild, in its order. `note(code, severity, message, cell="")` records a finding on the notebook.
def _kept_attachments(cell: dict, index: int, note: Callable[..., None]) -> dict | None:
    """The cell's attachments (a dict of them), unless they are too large to keep."""
    attachments = cell.get("attachments") if isinstance(cell.get("attachments"), dict) else None
    if attachments and len(json.dumps(attachments)) > MAX_ATTACHMENT_CHARS:
        note(
            "attachment-dropped",
            "repaired",
            f"cell {index}: attachments over {MAX_ATTACHMENT_CHARS} characters dropped",
        )
        attachments = None
    return attachments


def _graded_id(cell: dict, index: int, release_cells: dict, seen: set, note: Callable[..., None]) -> str | None:
    """The release cell this cell is graded as, or None: no id, an id the release does not have, or one that
    an earlier cell took (stray nbgrader metadata is noted either way)."""
    has_metadata = nbgrader_meta(cell) is not None or "nbgrader" in (cell.get("metadata") or {})
    identifier = grade_id(cell)
    if has_metadata and identifier is None:
        note("stray-metadata", "repaired", f"cell {index}: nbgrader metadata without a valid id removed")
    elif identifier is not None and identifier not in release_cells:
        note(
            "unknown-cell-id",
            "repaired",
            f"cell {index}: id {identifier!r} is not part of the assignment; its nbgrader metadata was removed",
            identifier,
        )
        identifier = None
    elif identifier in seen:
        note(
            "duplicate-cell-id",
            "repaired",
            f"cell {index} repeats the id {identifier!r}; only the first copy "
            "is graded, the copy runs as an ordinary cell",
            identifier,
        )
        identifier = None
    return identifier


def _note_changed_metadata(cell: dict, reference: dict, identifier: str, note: Callable[..., None]) -> None:
    """What the learner changed of a tracked cell's type and nbgrader metadata (the release's are graded)."""
    expected, submitted = nbgrader_meta(reference), nbgrader_meta(cell)
    if cell["cell_type"] != reference["cell_type"]:
        note(
            "cell-type-changed",
            "repaired",
            f"was changed to {cell['cell_type']}; graded as {reference['cell_type']}",
            identifier,
        )
    if "points" in expected and submitted.get("points") != expected.get("points"):
        note(
            "points-changed",
            "review",
            f"points changed from {expected.get('points')} to {submitted.get('points')!r}; restored",
            identifier,
        )
    for flag in ("grade", "solution", "locked"):
        if bool(submitted.get(flag)) != bool(expected.get(flag)):
            note("metadata-changed", "review", f"nbgrader flag {flag!r} was changed; restored", identifier)


def _graded_source(reference: dict, source: str, identifier: str, note: Callable[..., None]) -> str:
    """The learner's source, except in a locked cell: the release's source is graded there."""
    if is_locked(reference) and not is_solution(reference):
        if source.strip() != source_text(reference).strip():
            note("locked-cell-edited", "repaired", "a locked cell was edited; the original is graded", identifier)
        source = source_text(reference)
    return source


def _put_back_missing(
    cells: list[dict], seen: set, release_cells: dict, release_order: list, note: Callable[..., None]
) -> None:
    """Each tracked cell the learner deleted, from the release, after the tracked cell it follows there."""
    for position, identifier in enumerate(release_order):
        if identifier in seen:
            continue
        anchor = next(
            (
                cells.index(cell)
                for previous in reversed(release_order[:position])
                for cell in cells
                if grade_id(cell) == previous
            ),
            -1,
        )
        reference = release_cells[identifier]
        cells.insert(anchor + 1, _tracked_cell(reference, source_text(reference), reference.get("attachments")))
        seen.add(identifier)
        note("cell-restored", "repaired", "this cell was missing and was put back from the release", identifier)


def _give_ids(cells: list[dict]) -> None:
    """Every cell a unique, valid id: its grade id where it has one, else one made from its position."""
    used_ids: set[str] = set()
    for index, cell in enumerate(cells):
        candidate = grade_id(cell) or f"cell-{index + 1}"
        candidate = (
            candidate if CELL_ID.match(candidate) and candidate not in used_ids else f"cell-{index + 1}-{len(used_ids)}"
        )
        cell["id"] = candidate
        used_ids.add(candidate)


def _scan(notebook: dict, release: dict, name: str, assignment: Assignment, findings: list[Finding]) -> None:
    """Static checks on the code the learner wrote (cells identical to a release cell are the instructor's)."""
    released = {source_text(cell).strip() for cell in release["cells"] if cell.get("cell_type") == "code"}
    learner, fixed = {}, []
    for index, cell in enumerate(notebook["cells"], start=1):
        if cell["cell_type"] != "code":
            continue
        if is_locked(cell) and not is_solution(cell):
            fixed.append(source_text(cell))
        elif source_text(cell).strip() in released:
            fixed.append(source_text(cell))
        else:
            learner[grade_id(cell) or f"cell {index}"] = source_text(cell)
    results = scan_cells(
        learner,
        fixed_sources=fixed,
        forbidden=assignment.settings.forbidden_calls,
        allowed_imports=assignment.settings.allowed_imports,
    )
    for label, found in results.items():
        for item in found:
            severity = "info" if item.code == "syntax-error" else "review"
            findings.append(Finding(f"static:{item.code}", severity, f"line {item.line}: {item.message}", name, label))


def _shadowing(name: str) -> bool:
    if name in sys.stdlib_module_names:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _extra_files(scan: TreeScan, used: set[str], findings: list[Finding]) -> None:
    for entry in scan.files():
        if entry.path in used or ".ipynb_checkpoints" in entry.parts or entry.path in SUBMISSION_BOOKKEEPING:
            continue
        suffix = Path(entry.parts[-1]).suffix
        module = entry.parts[0].removesuffix(".py") if suffix in (".py", ".pyc", ".so", ".pth") else None
        if module and untrusted.is_utf8(module) and _shadowing(module.split(".")[0]):
            findings.append(
                Finding(
                    "shadow-module",
                    "review",
                    f"{entry.shown} would hide the installed module {module!r}; it was not given to the kernel",
                )
            )
        else:
            findings.append(
                Finding("extra-file", "info", f"{entry.shown} is not part of the assignment and was not used")
            )


def inspect_submission(
    submission_dir: Path, assignment: Assignment, release_dir: Path, tree: TreeScan | None = None
) -> Preflight:
    """Read and repair one submission (submitted/<learner>/<assignment>) against the release.

    `tree` is the folder's scan when the caller has one already (untrusted.scan_tree); nothing in the
    folder is followed or opened except regular files of its own.
    """
    submission_dir, release_dir = Path(submission_dir), Path(release_dir)
    releases = {}
    for name in assignment.notebooks:
        release_file = release_dir / f"{name}.ipynb"
        if not release_file.is_file():
            raise FileNotFoundError(f"release notebook missing: {release_file} (run `course release` first)")
        releases[name] = json.loads(release_file.read_text(encoding="utf-8"))
    scan = tree if tree is not None else untrusted.scan_tree(submission_dir)
    findings: list[Finding] = []
    located, refused = _locate(scan, assignment, releases, findings)
    _path_findings(scan, refused, assignment, findings)
    _collect_refusals(scan, assignment, findings)
    notebooks, unreadable = {}, [name for name in assignment.notebooks if name not in located]
    for name, entry in located.items():
        data = _read_notebook(scan, entry, name, findings)
        if data is None:
            unreadable.append(name)
            continue
        notebooks[name] = rebuild(data, releases[name], name, findings)
        _scan(notebooks[name], releases[name], name, assignment, findings)
    _extra_files(scan, {entry.path for entry in located.values()}, findings)
    return Preflight(notebooks, findings, unreadable, scan)


def _bookkeeping(preflight: Preflight, submission_dir: Path, name: str) -> bytes | None:
    """A bookkeeping file's first bytes, if it is a plain file of the submission."""
    scan = preflight.tree if preflight.tree is not None else untrusted.scan_tree(submission_dir)
    entry = scan.get(name)
    if entry is None or entry.kind != "file" or scan.problem(entry) is not None:
        return None
    try:
        return untrusted.read_file(scan, entry, MAX_BOOKKEEPING_BYTES)
    except untrusted.UnsafePath:
        return None


def stage(preflight: Preflight, submission_dir: Path, staged_dir: Path) -> None:
    """Write the clean notebooks (and a valid timestamp and submission secret) where nbgrader's autograde reads them."""
    problems = untrusted.remove_tree(staged_dir)  # an earlier run's copy; a folder left there is refused below
    if problems:
        raise OSError(f"the staged copy {staged_dir} could not be removed: " + "; ".join(problems))
    staged_dir.mkdir(parents=True)
    for name, notebook in preflight.notebooks.items():
        (staged_dir / f"{name}.ipynb").write_text(json.dumps(notebook, indent=1, ensure_ascii=False), encoding="utf-8")
    timestamp = _bookkeeping(preflight, submission_dir, "timestamp.txt")
    if timestamp is not None:
        from nbgrader.utils import parse_utc

        try:
            text = timestamp.decode("utf-8").strip()
            parse_utc(text)
            (staged_dir / "timestamp.txt").write_text(text, encoding="utf-8")
        except Exception:
            preflight.findings.append(
                Finding("bad-timestamp", "info", "timestamp.txt is unreadable; lateness not computed")
            )
    # nbgrader's release_feedback names each learner's feedback file after this secret (written by
    # `nbgrader submit`: 128 hex digits); without it in autograded/ and feedback/, release_feedback fails.
    secret = _bookkeeping(preflight, submission_dir, "submission_secret.txt")
    if secret is not None:
        text = secret[:1024].decode("ascii", errors="replace").strip()
        if SUBMISSION_SECRET.match(text):
            (staged_dir / "submission_secret.txt").write_text(text, encoding="ascii")
        else:
            preflight.findings.append(
                Finding(
                    "bad-submission-secret",
                    "info",
                    "submission_secret.txt is not nbgrader's hex token; feedback cannot be released",
                )
            )
