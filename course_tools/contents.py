"""The course's table of contents: chapters in order, their titles and sections, the exercises, links.

    chapters(root)        the chapter notebooks of notebooks/, in order, each with its title
    exercises(root)       the assignments of solutions/, each with its title and the chapters that link it
    markdown_links(text)  every link target in a Markdown cell: [text](target), ![alt](target),
                          [label]: target, <a href="target">, <img src="target">
    relative_links(nb)    (cell index, target) for every link of a notebook that points into the course
    heading_anchor(text)  the anchor JupyterLab gives a heading, so that `chapter.ipynb#anchor` can be checked

The start page (`course_tools.learner_setup`), the book (`course_tools.book`) and the link test all read the
course through this module, so that they agree on what a chapter is called and where its links go.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

CHAPTER_DIR = "notebooks"
SOURCE_DIR = "solutions"
# The chapters link each exercise as ../exercises/<id>/<id>.ipynb: the learner's own copy.
EXERCISES_DIR = "exercises"

_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*[\"'])?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
_HTML_LINK = re.compile(r"<(?:a|img|source|link)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
_FENCED_CODE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Chapter:
    name: str  # file name without .ipynb, e.g. "02_self_attention"
    path: Path
    title: str  # the first heading, e.g. "02 · Self-attention (自注意力机制)"

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0]


@dataclass(frozen=True)
class Exercise:
    id: str
    notebook: Path  # solutions/<id>/<id>.ipynb, or the learner's copy where there is no source
    title: str
    chapters: tuple[str, ...]  # names of the chapters that link it, in order

    def learner_notebook(self, root: Path) -> Path:
        return Path(root) / EXERCISES_DIR / self.id / f"{self.id}.ipynb"


def load_notebook(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not a valid notebook (JSON error: {error})") from error


def markdown_cells(notebook: dict) -> list[tuple[int, str]]:
    return [
        (index, _text(cell))
        for index, cell in enumerate(notebook.get("cells", []))
        if cell.get("cell_type") == "markdown"
    ]


def first_heading(notebook: dict, default: str) -> str:
    for _, text in markdown_cells(notebook):
        for line in text.splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return default


def headings(notebook: dict) -> list[tuple[int, str]]:
    """(level, text) of every Markdown heading, in order (headings inside code fences excluded)."""
    found = []
    for _, text in markdown_cells(notebook):
        for line in _FENCED_CODE.sub("", text).splitlines():
            match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if match:
                found.append((len(match.group(1)), match.group(2)))
    return found


def heading_anchor(text: str) -> str:
    """JupyterLab's anchor for a heading: its text with spaces turned into '-' (Markdown markup dropped)."""
    plain = re.sub(r"[*_`]", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text))
    return plain.strip().replace(" ", "-")


def chapters(root: str | Path) -> list[Chapter]:
    folder = Path(root) / CHAPTER_DIR
    found = []
    for path in sorted(folder.glob("*.ipynb")):
        found.append(Chapter(path.stem, path, first_heading(load_notebook(path), path.stem)))
    return found


def exercises(root: str | Path) -> list[Exercise]:
    """Every assignment, with the chapters whose links point at its learner copy.

    The assignments are those of solutions/ and those a learner has in exercises/ (a class's learner
    may have the chapters without solutions/, and exercises fetched from the instructor's exchange).
    """
    root = Path(root)
    linked: dict[str, list[str]] = {}
    for chapter in chapters(root):
        for _, target in relative_links(load_notebook(chapter.path)):
            parts = Path(urllib.parse.unquote(target.split("#")[0])).parts
            if len(parts) >= 3 and parts[0] == ".." and parts[1] == EXERCISES_DIR:
                names = linked.setdefault(parts[2], [])
                if chapter.name not in names:
                    names.append(chapter.name)
    notebooks: dict[str, Path] = {}
    for base in (root / EXERCISES_DIR, root / SOURCE_DIR):  # the source's title wins where both exist
        for folder in sorted(base.iterdir()) if base.is_dir() else []:
            notebook = folder / f"{folder.name}.ipynb"
            if folder.is_dir() and not folder.name.startswith((".", "_")) and notebook.is_file():
                notebooks[folder.name] = notebook
    found = []
    for exercise_id, notebook in sorted(notebooks.items()):
        try:
            title = first_heading(load_notebook(notebook), exercise_id)
        except ValueError:  # a learner's copy that no longer parses still has its id
            title = exercise_id
        found.append(Exercise(exercise_id, notebook, title, tuple(linked.get(exercise_id, ()))))
    return found


def _mask_code(text: str) -> str:
    """`text` with the inside of code (fences and `spans`) overwritten, same length: links there are not links."""

    def blank(match: re.Match) -> str:
        inner = re.sub(r"[^\n]", "x", match.group(0)[1:-1])
        return match.group(0)[0] + inner + match.group(0)[-1]

    return _INLINE_CODE.sub(blank, _FENCED_CODE.sub(blank, text))


def _link_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every link target in `text`, in the order markdown_links reports them."""
    masked = _mask_code(text)
    return [
        match.span(1) for pattern in (_INLINE_LINK, _REFERENCE_LINK, _HTML_LINK) for match in pattern.finditer(masked)
    ]


def markdown_links(text: str) -> list[str]:
    """Every link target in Markdown text (code spans and fenced code are not links)."""
    return [text[start:end].strip() for start, end in _link_spans(text)]


def rewrite_links(text: str, change) -> str:
    """`text` with every link target outside code replaced by `change(target)`."""
    for start, end in sorted(set(_link_spans(text)), reverse=True):
        text = text[:start] + change(text[start:end]) + text[end:]
    return text


def is_relative(target: str) -> bool:
    """True for a link into the course (a path, a path#anchor or #anchor), False for http:, mailto:, data: ..."""
    return bool(target) and not _SCHEME.match(target) and not target.startswith("//")


def relative_links(notebook: dict) -> list[tuple[int, str]]:
    return [
        (index, target)
        for index, text in markdown_cells(notebook)
        for target in markdown_links(text)
        if is_relative(target)
    ]


def split_target(target: str) -> tuple[str, str]:
    """(path, fragment), both URL-decoded: '05_encoder.ipynb#2.1-Why' -> ('05_encoder.ipynb', '2.1-Why')."""
    path, _, fragment = target.partition("#")
    return urllib.parse.unquote(path), urllib.parse.unquote(fragment)


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)
