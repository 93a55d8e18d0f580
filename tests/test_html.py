"""`course html`: the book. Chapters executed and written as pages with a table of contents,
previous/next links between the pages, styles, and math typeset offline; a failing chapter is written
with its error and fails the build. The built book is opened in Chromium with the network blocked.

To stay fast the tests execute two short chapters (02 and 13); the others are written without
running (as `course html <chapter>` does for chapters it is not asked for). `make html` runs them all.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from chromium import browser  # noqa: F401  (the module-scoped Chromium fixture)

from course_tools import book, cli, contents

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
EXECUTED = ["02_self_attention", "13_exercises_and_self_check"]
MATHJAX_TIMEOUT_MS = 90_000  # MathJax typesets a chapter in about a second; a busy 2-core machine is slower


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    status = cli.main(["html", "--out", str(out), *EXECUTED])
    return out, status


def test_the_book_has_every_chapter_a_contents_page_and_its_figures(built):
    out, status = built
    assert status == 0, f"course html {' '.join(EXECUTED)} failed with status {status}"
    chapters = contents.chapters(ROOT)
    for chapter in chapters:
        assert (out / f"{chapter.name}.html").is_file(), f"{chapter.name}.html missing: every chapter gets a page"
    index = (out / "index.html").read_text(encoding="utf-8")
    for chapter in chapters:
        assert f'href="{chapter.name}.html"' in index, f"the contents page does not link {chapter.name}"
    assert re.search(r'href="02_self_attention\.html#[^"]+"', index), "the contents should list each chapter's sections"
    page = (out / "02_self_attention.html").read_text(encoding="utf-8")
    assert re.findall(r'<img [^>]*src="data:image/png;base64,', page), "the executed page should carry its figures"
    assert "Traceback" not in page, "the executed chapter shows an error"
    assert 'class="book-sidebar"' in page and 'class="book-nav"' in page, "the page lacks its contents or navigation"
    assert 'href="03_multi_head_attention.html">Next:' in page, "chapter 02 should link chapter 03's page as next"
    assert re.search(r'href="01_rnn_to_transformer\.html">(&larr;|\u2190) Previous', page), "no previous link to 01"
    assert not re.search(r'href="[^"]*\.ipynb', page), "links between chapters must lead to their pages, not notebooks"
    assert 'href="exercises.html#ex1_manual_attention"' in page, "the exercise link should lead to the exercises page"
    assert "cdnjs" not in page and "https://" not in "".join(re.findall(r'<script[^>]*src="[^"]*"', page)), (
        "the page loads a script from the network"
    )
    unexecuted = (out / "05_encoder.html").read_text(encoding="utf-8")
    assert "Not run in this build" in unexecuted, "a chapter that was not run should say so"


def test_book_link_targets():
    names = {"02_self_attention", "05_encoder"}
    notebooks, out = ROOT / "notebooks", ROOT / "html"
    assert book.book_link("05_encoder.ipynb", names, notebooks, out) == "05_encoder.html"
    assert book.book_link("05_encoder.ipynb#2.1-Why", names, notebooks, out) == "05_encoder.html#2.1-Why"
    assert (
        book.book_link("../exercises/ex4_causal_mask/ex4_causal_mask.ipynb", names, notebooks, out)
        == "exercises.html#ex4_causal_mask"
    )
    assert book.book_link("../README.md", names, notebooks, out) == "../README.md"
    text = '[Chapter 05](05_encoder.ipynb) and `[code](05_encoder.ipynb)` and <a href="02_self_attention.ipynb">x</a>'
    rewritten = contents.rewrite_links(text, lambda t: book.book_link(t, names, notebooks, out))
    assert (
        rewritten == "[Chapter 05](05_encoder.html) and `[code](05_encoder.ipynb)` and "
        '<a href="02_self_attention.html">x</a>'
    )


_PAGE_FACTS = """() => {
  const skipped = new Set(["SCRIPT", "STYLE", "CODE", "PRE", "TEXTAREA"]);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) {
    let visible = true;
    for (let element = walker.currentNode.parentElement; element; element = element.parentElement) {
      if (skipped.has(element.tagName) || element.classList.contains("MJX_Assistive_MathML")) { visible = false; break; }
    }
    if (visible) texts.push(walker.currentNode.textContent);
  }
  return {
    text: texts.join(" "),
    math: document.querySelectorAll(".MathJax, .MathJax_Display").length,
    errors: document.querySelectorAll(".MathJax_Error, merror").length,
    links: Array.from(document.querySelectorAll("a[href]")).map(a => a.href),
    ids: Array.from(document.querySelectorAll("[id]")).map(e => e.id),
  };
}"""


def _open_offline(chromium, page: Path) -> tuple[dict, list[str], list[str]]:
    """(what the page shows, requests that left the machine, file requests that failed)."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    outside, failed = [], []

    def route(request_route):
        url = request_route.request.url
        if url.startswith("file://"):
            request_route.continue_()
        else:
            outside.append(url)
            request_route.abort()

    context.route("**/*", route)
    try:
        tab = context.new_page()
        tab.on(
            "requestfailed",
            lambda request: (
                failed.append(f"{request.url} ({request.failure})") if request.url.startswith("file:") else None
            ),
        )
        tab.goto(page.as_uri())
        tab.wait_for_function(
            "() => window.MathJax && MathJax.isReady && MathJax.Hub.queue.pending === 0"
            " && MathJax.Hub.queue.running === 0",
            timeout=MATHJAX_TIMEOUT_MS,
        )
        return tab.evaluate(_PAGE_FACTS), outside, failed
    finally:
        context.close()


def test_the_book_reads_offline_in_chromium(built, browser):  # noqa: F811
    out, status = built
    assert status == 0
    pages = sorted(out.glob("*.html"))
    facts, problems = {}, []
    for page in pages:
        seen, outside, failed = _open_offline(browser, page)
        facts[page.name] = seen
        if outside:
            problems.append(f"{page.name}: requests outside the book: {outside[:5]}")
        if failed:
            problems.append(f"{page.name}: files not found: {failed[:5]}")
        raw = re.findall(r"\$[^$\s][^$]*\$", seen["text"])
        if raw:
            problems.append(f"{page.name}: math left as LaTeX source: {raw[:3]}")
        if seen["errors"]:
            problems.append(f"{page.name}: {seen['errors']} MathJax errors")
    for name in ("02_self_attention.html", "13_exercises_and_self_check.html", "04_positional_encoding.html"):
        if facts[name]["math"] < 5:
            problems.append(f"{name}: only {facts[name]['math']} typeset formulas")
    followed = 0
    for page_name, seen in facts.items():
        for href in seen["links"]:
            link = urllib.parse.urlsplit(href)
            if link.scheme != "file":
                continue
            followed += 1
            target = Path(urllib.parse.unquote(link.path))
            if not target.is_file():
                problems.append(f"{page_name}: link to {href}: no such file")
                continue
            if target.suffix != ".html" or not target.is_relative_to(out):
                problems.append(f"{page_name}: link to {href} leaves the book")
                continue
            fragment = urllib.parse.unquote(link.fragment)
            if (
                fragment
                and fragment not in facts[target.name]["ids"]
                and link.fragment not in facts[target.name]["ids"]
            ):
                problems.append(f"{page_name}: link to {href}: no element with id {fragment!r} in {target.name}")
    assert followed > 200, f"only {followed} links followed: is the book's navigation missing?"
    assert not problems, "the book, opened offline in Chromium:\n" + "\n".join(problems)


def _notebook(path: Path, *cells: tuple[str, str]) -> None:
    made = nbformat.v4.new_notebook()
    made.cells = [
        nbformat.v4.new_markdown_cell(text) if kind == "md" else nbformat.v4.new_code_cell(text) for kind, text in cells
    ]
    made.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(made, path)


def test_a_failing_chapter_is_written_with_its_error_and_fails_the_build(tmp_path, capsys):
    course = tmp_path / "course"
    (course / "notebooks").mkdir(parents=True)
    _notebook(
        course / "notebooks" / "01_first.ipynb",
        ("md", "# 01 · First\n\n## A section\n\nSee [the next](02_broken.ipynb)."),
        ("code", "print(6 * 7)"),
    )
    _notebook(
        course / "notebooks" / "02_broken.ipynb",
        ("md", "# 02 · Broken\n\nMath: $x^2$."),
        ("code", "value = 1 + 1"),
        ("code", "assert value == 3, 'one and one make two, not three'"),
        ("code", "print('never reached')"),
    )
    _notebook(course / "notebooks" / "03_after.ipynb", ("md", "# 03 · After"), ("code", "print('still built')"))
    out = tmp_path / "html"
    status = book.main(course, out)
    printed = capsys.readouterr().out
    assert status == 1, "a chapter that stops with an error must fail the build"
    assert "02_broken: cell 2: AssertionError: one and one make two, not three" in printed, printed
    broken = (out / "02_broken.html").read_text(encoding="utf-8")
    assert "This chapter stopped with an error" in broken and "one and one make two, not three" in broken
    assert 'content="failed"' in broken, "the page should record that the chapter failed"
    assert "never reached" in broken and broken.count("never reached") == 1, "the later cell is shown, without output"
    assert "still built" in (out / "03_after.html").read_text(encoding="utf-8").split("</main>")[0]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert 'href="02_broken.html"' in index and "stopped with an error" in index
    assert 'href="02_broken.html"' in (out / "01_first.html").read_text(encoding="utf-8")


def test_a_progress_bar_is_written_as_its_text_and_needs_nothing_from_a_cdn(tmp_path):
    course = tmp_path / "course"
    (course / "notebooks").mkdir(parents=True)
    _notebook(
        course / "notebooks" / "01_training.ipynb",
        ("md", "# 01 · Training"),
        ("code", "from tqdm.auto import tqdm\nfor step in tqdm(range(3), desc='training steps'):\n    pass"),
    )
    assert book.main(course, tmp_path / "html") == 0
    page = (tmp_path / "html" / "01_training.html").read_text(encoding="utf-8")
    assert "training steps" in page, "the progress bar should show as its text"
    assert "widget" not in page.lower() and "cdn." not in page, (
        "an offline page must not ask a CDN for a widget manager"
    )


def test_course_html_names_an_unknown_chapter(tmp_path):
    with pytest.raises(SystemExit, match="no chapter named 99_missing"):
        cli.main(["html", "--out", str(tmp_path), "99_missing"])
