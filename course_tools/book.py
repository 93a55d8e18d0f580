"""The course as a book: `course html` executes the chapters and writes them as linked HTML pages.

    html/index.html           the table of contents: every chapter with its sections, the exercises
    html/<chapter>.html       one page per chapter, executed, with its outputs and figures; the book's
                              contents and the chapter's sections on the side, previous/next links
    html/exercises.html       the exercises, where the chapters' exercise links lead in the book
    html/_static/             the style sheets and MathJax, so that the math is typeset without a network
                              (and widgets, a training loop's progress bar, are shown as their text)

Every chapter runs on its own (nbclient, the kernel's default settings, as in a learner's JupyterLab).
A chapter that stops with an error is still written: its page opens with what stopped it, the cell
shows the error, and the build names it at the end and exits with status 1. Chapters not asked for
keep the page an earlier build wrote, or get one written without running them, so that every link of
the book leads somewhere.

Links between chapters point at their pages (05_encoder.ipynb -> 05_encoder.html); a link to an
exercise (../exercises/<id>/<id>.ipynb, the learner's copy) leads to its entry in exercises.html.

The pages are nbconvert's JupyterLab template with a small layer on top (templates in
`book_theme`). Why not a book tool: Jupyter Book 1 would bring Sphinx, a theme and myst-nb's own
execution cache (some 30 packages) and reports a failed notebook only as a warning, not in its exit
status; Jupyter Book 2 (mystmd) is a Node application whose site needs a web server, while these
pages open from the folder. MathJax 2.7 comes from `jupyter-server-mathjax`, the Jupyter project's
package of MathJax's files, in the version whose configuration nbconvert's template speaks.
"""

from __future__ import annotations

import datetime
import html
import importlib.metadata
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import book_theme, contents

STATIC = "_static"
EXERCISES_PAGE = "exercises.html"
STATUS_META = "course-book-status"  # executed | failed | unexecuted, in each chapter page's <head>


@dataclass
class PageResult:
    chapter: contents.Chapter
    page_status: str  # what the page shows: "executed", "failed" or "unexecuted"
    kept: bool = False  # True: not asked for; the page of an earlier build was kept
    seconds: float = 0.0
    error: str = ""  # for "failed": what stopped it
    sections: list[tuple[str, str]] = field(default_factory=list)  # (anchor id, heading text) of its h2s


def page_name(chapter: contents.Chapter) -> str:
    return f"{chapter.name}.html"


def book_link(target: str, chapter_names: set[str], notebooks_dir: Path, out: Path) -> str:
    """Where a chapter's link goes in the book (the link test checks that each one resolves)."""
    path, fragment = contents.split_target(target)
    suffix = f"#{fragment}" if fragment else ""
    if not path:
        return target
    parts = Path(path).parts
    if Path(path).suffix == ".ipynb" and len(parts) == 1 and Path(path).stem in chapter_names:
        return f"{Path(path).stem}.html{suffix}"
    if len(parts) >= 3 and parts[0] == ".." and parts[1] == contents.EXERCISES_DIR:
        return f"{EXERCISES_PAGE}#{parts[2]}"
    # Anything else in the repository: relative to the book's folder.
    return Path(os.path.relpath((notebooks_dir / path).resolve(), out)).as_posix() + suffix


def rewrite_links(notebook, chapter_names: set[str], notebooks_dir: Path, out: Path) -> None:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = contents.rewrite_links(
                cell.source,
                lambda target: (
                    book_link(target, chapter_names, notebooks_dir, out) if contents.is_relative(target) else target
                ),
            )


def _kernel_env() -> dict:
    # As in a learner's JupyterLab: the kernel's defaults. Figures are drawn by the inline backend.
    env = dict(os.environ)
    env.update({"MPLBACKEND": "Agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
    return env


def execute(chapter: contents.Chapter, timeout: int):
    """(notebook with outputs, error text or ""): the notebook keeps every output up to the failure."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.read(chapter.path, as_version=4)
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(chapter.path.parent)}}
    )
    try:
        client.execute(env=_kernel_env())
    except CellExecutionError as error:
        return notebook, _failure(notebook, f"{error.ename}: {error.evalue}")
    except (CellTimeoutError, DeadKernelError, RuntimeError, OSError) as error:
        return notebook, _failure(
            notebook, f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        )
    return notebook, ""


def _failure(notebook, message: str) -> str:
    """The failing cell (the first with an error output, else the last that ran) and the message."""
    ran = [
        index for index, cell in enumerate(notebook.cells) if cell.cell_type == "code" and cell.get("execution_count")
    ]
    failed = next(
        (
            index
            for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code"
            and any(output.get("output_type") == "error" for output in cell.get("outputs", []))
        ),
        ran[-1] if ran else 0,
    )
    notebook.metadata["course_book_failure"] = {
        "cell": failed,
        "cell_id": notebook.cells[failed].get("id", ""),
        "message": message,
    }
    return f"cell {failed}: {message}"


def sections_of(page_html: str) -> list[tuple[str, str]]:
    """(id, text) of every h2 of a written page, in order."""
    found = []
    for match in re.finditer(r'<h2 id="([^"]+)"[^>]*>(.*?)</h2>', page_html, re.DOTALL):
        text = re.sub(r"<a class=\"anchor-link\".*?</a>", "", match.group(2), flags=re.DOTALL)
        found.append((match.group(1), html.unescape(re.sub(r"<[^>]+>", "", text)).strip()))
    return found


def _kept_status(page: Path) -> str | None:
    """The status an earlier build wrote into a page of this book, or None if it is not one of ours."""
    try:
        head = page.read_text(encoding="utf-8")[:4000]
    except OSError:
        return None
    match = re.search(rf'<meta name="{STATUS_META}" content="([a-z]+)"', head)
    return match.group(1) if match else None


def chapter_exporter():
    """nbconvert's HTML exporter with the book's chapter template (made once: it takes seconds)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab", extra_loaders=[book_theme.loader()], template_file=book_theme.CHAPTER_TEMPLATE
    )
    exporter.mathjax_url = f"{STATIC}/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
    return exporter


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def without_widgets(notebook) -> None:
    """Widgets (a training loop's progress bar) as their text: with widget state in its metadata, nbconvert's
    page loads the widget manager from a CDN, which an offline book cannot reach (and a blank bar is no use)."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data and WIDGET_VIEW in data:
                del data[WIDGET_VIEW]


def write_chapter(
    exporter, notebook, chapter: contents.Chapter, book: list[contents.Chapter], out: Path, status: str
) -> str:
    """Write one chapter page; returns its HTML."""
    index = [c.name for c in book].index(chapter.name)
    neighbours = {
        "previous": book[index - 1] if index > 0 else None,
        "next": book[index + 1] if index + 1 < len(book) else None,
    }
    rewrite_links(notebook, {c.name for c in book}, chapter.path.parent, out)
    without_widgets(notebook)
    failure = notebook.metadata.get("course_book_failure")
    resources = {
        "metadata": {"name": chapter.title, "path": str(chapter.path.parent)},
        "book": {
            "status": status,
            "status_meta": STATUS_META,
            "static": STATIC,
            "sidebar": book_theme.sidebar(book, current=chapter.name, exercises_page=EXERCISES_PAGE),
            "nav": book_theme.prev_next(neighbours["previous"], neighbours["next"]),
            "banner": book_theme.banner(status, chapter, failure),
        },
    }
    body, _ = exporter.from_notebook_node(notebook, resources=resources)
    body = body.replace(book_theme.PAGE_CONTENTS_MARK, book_theme.page_contents(sections_of(body)))
    (out / page_name(chapter)).write_text(body, encoding="utf-8")
    return body


def write_static(out: Path) -> None:
    """The style sheets and MathJax, copied into the book so that it needs nothing from outside."""
    try:
        import jupyter_server_mathjax
    except ImportError as error:
        raise FileNotFoundError(
            "the book's MathJax comes from the jupyter-server-mathjax package, which is not "
            "installed: run `make setup` (or pip install jupyter-server-mathjax)"
        ) from error
    static = out / STATIC
    static.mkdir(parents=True, exist_ok=True)
    (static / "book.css").write_text(book_theme.BOOK_CSS, encoding="utf-8")
    (static / "jupyterlab.css").write_text(book_theme.jupyterlab_css(), encoding="utf-8")
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (mathjax / "MathJax.js").is_file():
        raise FileNotFoundError(f"MathJax.js not found in {mathjax}: reinstall jupyter-server-mathjax")
    target = static / "mathjax"
    if (
        not (target / "MathJax.js").is_file()
        or (target / "MathJax.js").stat().st_size != (mathjax / "MathJax.js").stat().st_size
    ):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(mathjax, target)


def write_index(out: Path, book: list[contents.Chapter], results: dict[str, PageResult]) -> Path:
    entries = [(chapter, results[chapter.name]) for chapter in book]
    body = book_theme.index_body(entries, page_name, _build_facts(), EXERCISES_PAGE)
    page = out / "index.html"
    page.write_text(
        book_theme.plain_page("Transformers from the Ground Up", body, book, None, STATIC, EXERCISES_PAGE),
        encoding="utf-8",
    )
    return page


def write_exercises(out: Path, root: Path, book: list[contents.Chapter]) -> Path:
    body = book_theme.exercises_body(contents.exercises(root), {c.name: c for c in book}, page_name)
    page = out / EXERCISES_PAGE
    page.write_text(
        book_theme.plain_page("Exercises", body, book, "exercises", STATIC, EXERCISES_PAGE), encoding="utf-8"
    )
    return page


def _build_facts() -> str:
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "not installed"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return f"built {stamp} with Python {sys.version.split()[0]} and PyTorch {torch_version}"


def build(root: Path, out: Path, wanted: list[str] | None = None, timeout: int = 900) -> dict[str, PageResult]:
    """Build the book in `out`; executes the chapters named in `wanted` (all when None)."""
    import nbformat

    root, out = Path(root), Path(out)
    book = contents.chapters(root)
    if not book:
        raise FileNotFoundError(f"no chapter notebooks in {root / contents.CHAPTER_DIR}")
    names = [c.name for c in book]
    wanted_set = set(names) if not wanted else {Path(name).stem for name in wanted}
    unknown = sorted(wanted_set - set(names))
    if unknown:
        raise ValueError(f"no chapter named {', '.join(unknown)} in {root / contents.CHAPTER_DIR}")
    out.mkdir(parents=True, exist_ok=True)
    write_static(out)
    results: dict[str, PageResult] = {}
    exporter = chapter_exporter()
    for chapter in book:
        page = out / page_name(chapter)
        if chapter.name in wanted_set:
            print(f"course html: running {chapter.name} ...", flush=True)
            started = time.monotonic()
            notebook, error = execute(chapter, timeout)
            status = "failed" if error else "executed"
            result = PageResult(chapter, status, seconds=time.monotonic() - started, error=error)
            print(
                f"course html: {chapter.name} {status} in {result.seconds:.0f} s" + (f" ({error})" if error else ""),
                flush=True,
            )
        elif _kept_status(page) is not None:
            results[chapter.name] = PageResult(chapter, _kept_status(page), kept=True)
            continue
        else:
            notebook, status = nbformat.read(chapter.path, as_version=4), "unexecuted"
            result = PageResult(chapter, status)
        written = write_chapter(exporter, notebook, chapter, book, out, status)
        result.sections = sections_of(written)
        results[chapter.name] = result
    for result in results.values():
        if result.kept:
            result.sections = sections_of((out / page_name(result.chapter)).read_text(encoding="utf-8"))
    write_exercises(out, root, book)
    write_index(out, book, results)
    return results


def main(root: Path, out: Path, wanted: list[str] | None = None, timeout: int = 900) -> int:
    """`course html`: build, then say what was written and which chapters stopped with an error."""
    try:
        results = build(root, out, wanted, timeout)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"course html: {error}")
    counts: dict[str, int] = {}
    for result in results.values():
        key = "kept" if result.kept else result.page_status
        counts[key] = counts.get(key, 0) + 1
    described = {
        "executed": "executed",
        "failed": "stopped with an error",
        "unexecuted": "written without running",
        "kept": "kept from an earlier build",
    }
    summary = ", ".join(f"{counts[key]} {text}" for key, text in described.items() if counts.get(key))
    print(f"course html: {len(results)} chapters in {out}/ ({summary}); open {out / 'index.html'}")
    failed = [result for result in results.values() if result.page_status == "failed" and not result.kept]
    if failed:
        print("course html: these chapters stopped with an error (their pages show it):")
        for result in failed:
            print(f"  {result.chapter.name}: {result.error}")
        return 1
    return 0
