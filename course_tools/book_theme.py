"""How the book looks: the chapter template (on top of nbconvert's JupyterLab template), the style
sheet, and the pieces of HTML that `course_tools.book` puts around each page (contents, navigation).

Kept in Python strings rather than template files so that the package needs no data files.
"""

from __future__ import annotations

import html
from pathlib import Path

CHAPTER_TEMPLATE = "course_book_chapter.html.j2"
PAGE_CONTENTS_MARK = "<!-- course-book: this chapter's sections -->"
BOOK_TITLE = "Transformers from the Ground Up"

# MathJax 2 reads this before it starts: $...$ and \(...\) inline, $$...$$ and \[...\] displayed, as in
# JupyterLab; STIX-Web fonts, the ones jupyter-server-mathjax ships (its TeX fonts are left out).
MATHJAX_CONFIG = r"""<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  tex2jax: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
            processEscapes: true, processEnvironments: true},
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               linebreaks: {automatic: true}},
  displayAlign: "center",
  messageStyle: "none"
});
</script>"""

_CHAPTER = (
    r"""{%- extends 'lab/index.html.j2' -%}

{%- block html_head_js_requirejs -%}
<meta name="generator" content="course html (course_tools.book)">
<meta name="{{ resources.book.status_meta }}" content="{{ resources.book.status }}">
{%- endblock html_head_js_requirejs -%}

{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}

{% block notebook_css %}
<link rel="stylesheet" href="{{ resources.book.static }}/jupyterlab.css">
<link rel="stylesheet" href="{{ resources.book.static }}/book.css">
{% endblock notebook_css %}

{%- block html_head_js_mathjax -%}
"""
    + MATHJAX_CONFIG
    + r"""
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}

{%- block body_header -%}
<body class="course-book" data-jp-theme-light="true" data-jp-theme-name="JupyterLab Light">
{{ resources.book.sidebar }}
<main class="jp-Notebook book-main">
{{ resources.book.nav }}
{{ resources.book.banner }}
{%- endblock body_header -%}

{% block body_footer %}
{{ resources.book.nav }}
</main>
</body>
{% endblock body_footer %}
"""
)

BOOK_CSS = """\
/* The book's layout around nbconvert's JupyterLab page (course_tools/book_theme.py). */
body.course-book { margin: 0; background: #fff; color: #1f2328;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC", sans-serif; }
.book-sidebar { position: fixed; top: 0; bottom: 0; left: 0; width: 18rem; overflow-y: auto; box-sizing: border-box;
  padding: 1.2rem 1rem 2rem; background: #f6f8fa; border-right: 1px solid #d0d7de; font-size: 14px; line-height: 1.45; }
.book-sidebar .book-title { display: block; font-weight: 700; font-size: 16px; color: #1f2328; text-decoration: none;
  margin-bottom: 0.8rem; }
.book-sidebar ol, .book-sidebar ul { margin: 0; padding-left: 1.2rem; }
.book-sidebar li { margin: 0.15rem 0; }
.book-sidebar a { color: #0b57a4; text-decoration: none; }
.book-sidebar a:hover { text-decoration: underline; }
.book-sidebar li.current > a { font-weight: 700; color: #1f2328; }
.book-sidebar .page-contents { margin: 0.3rem 0 0.5rem; font-size: 13px; }
.book-status { color: #b42318; font-size: 13px; }
.book-main { margin-left: 18rem; padding: 1rem 2.5rem 3rem; max-width: 70rem; box-sizing: border-box; }
/* Long code lines scroll instead of being cut off. */
.book-main .jp-InputArea, .book-main .jp-InputArea-editor { overflow-x: auto; }
main.book-main.jp-Notebook { padding: 1rem 2.5rem 3rem; }
.book-nav { display: flex; justify-content: space-between; gap: 1rem; margin: 0.6rem 0 1.2rem; font-size: 14px; }
.book-nav a { color: #0b57a4; text-decoration: none; border: 1px solid #d0d7de; border-radius: 6px;
  padding: 0.35rem 0.7rem; background: #f6f8fa; }
.book-nav a:hover { background: #eaeef2; }
.book-nav .next { margin-left: auto; }
.book-banner { border-radius: 6px; padding: 0.7rem 1rem; margin: 0 0 1.2rem; font-size: 14px; }
.book-banner.failed { background: #fdecea; border: 1px solid #f4b4ae; }
.book-banner.unexecuted { background: #fff8e1; border: 1px solid #f0d48a; }
.book-banner code { font-size: 13px; }
.book-page h1 { font-size: 2rem; margin-top: 0.5rem; }
.book-page table { border-collapse: collapse; margin: 1rem 0; }
.book-page th, .book-page td { border: 1px solid #d0d7de; padding: 0.4rem 0.7rem; text-align: left; vertical-align: top; }
.book-page ol.book-contents > li { margin: 0.6rem 0; font-size: 16px; }
.book-page ol.book-contents ul { font-size: 14px; margin-top: 0.2rem; }
.book-page .book-facts { color: #59636e; font-size: 13px; }
/* MathJax's hidden MathML for screen readers asks for TeX web fonts that the bundled MathJax leaves out;
   it is never seen, so it keeps a plain font and nothing is requested. */
.MJX_Assistive_MathML, .MJX_Assistive_MathML * { font-family: serif !important; }
@media (max-width: 60rem) {
  .book-sidebar { position: static; width: auto; border-right: none; border-bottom: 1px solid #d0d7de; }
  .book-main { margin-left: 0; padding: 1rem; }
  main.book-main.jp-Notebook { padding: 1rem; }
}
@media print { .book-sidebar, .book-nav { display: none; } .book-main { margin-left: 0; } }
"""

# What nbconvert's own lab page adds in a <style> block (anchors hidden, code areas), kept as it is.
_LAB_EXTRAS = """
* { -webkit-print-color-adjust: exact; }
a.anchor-link { display: none; }
.jp-InputArea { overflow: hidden; }
.jp-InputArea-editor { overflow: hidden; }
.cm-editor.cm-s-jupyter .highlight pre { padding: var(--jp-code-padding) 4px; margin: 0;
  font-family: inherit; font-size: inherit; line-height: inherit; color: inherit; }
.jp-OutputArea-output pre { line-height: inherit; font-family: inherit; }
.jp-RenderedText pre { color: var(--jp-content-font-color1); font-size: var(--jp-code-font-size); }
.jp-Collapser { display: none; }
"""


def loader():
    from jinja2 import DictLoader

    return DictLoader({CHAPTER_TEMPLATE: _CHAPTER})


def jupyterlab_css() -> str:
    """nbconvert's JupyterLab styles (index.css and the light theme), shared by every page."""
    from jupyter_core.paths import jupyter_path

    for base in jupyter_path("nbconvert", "templates", "lab", "static"):
        folder = Path(base)
        if (folder / "index.css").is_file() and (folder / "theme-light.css").is_file():
            return "\n".join(
                [
                    (folder / "index.css").read_text(encoding="utf-8"),
                    (folder / "theme-light.css").read_text(encoding="utf-8"),
                    _LAB_EXTRAS,
                ]
            )
    raise FileNotFoundError("nbconvert's lab template (static/index.css) was not found: reinstall nbconvert")


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def sidebar(book, current: str | None, exercises_page: str) -> str:
    """The book's contents; the current chapter gets a mark where its own sections will go."""
    items = []
    for chapter in book:
        here = chapter.name == current
        inner = PAGE_CONTENTS_MARK if here else ""
        items.append(
            f'<li class="{"current" if here else ""}"><a href="{_e(chapter.name)}.html">{_e(chapter.title)}</a>'
            f"{inner}</li>"
        )
    exercises_class = "current" if current == "exercises" else ""
    return (
        f'<nav class="book-sidebar" aria-label="Contents"><a class="book-title" href="index.html">{_e(BOOK_TITLE)}</a>'
        f'<ol>{"".join(items)}</ol><ul><li class="{exercises_class}"><a href="{_e(exercises_page)}">Exercises</a></li>'
        f"</ul></nav>"
    )


def page_contents(sections: list[tuple[str, str]]) -> str:
    if not sections:
        return ""
    items = "".join(f'<li><a href="#{_e(anchor)}">{_e(text)}</a></li>' for anchor, text in sections)
    return f'<ul class="page-contents">{items}</ul>'


def prev_next(previous, following) -> str:
    links = []
    if previous is not None:
        links.append(f'<a class="previous" href="{_e(previous.name)}.html">&larr; Previous: {_e(previous.title)}</a>')
    if following is not None:
        links.append(f'<a class="next" href="{_e(following.name)}.html">Next: {_e(following.title)} &rarr;</a>')
    return f'<nav class="book-nav" aria-label="Previous and next chapter">{"".join(links)}</nav>'


def banner(status: str, chapter, failure: dict | None) -> str:
    if status == "failed" and failure:
        anchor = f"#cell-id={_e(failure.get('cell_id', ''))}" if failure.get("cell_id") else ""
        where = f'<a href="{anchor}">cell {failure["cell"]}</a>' if anchor else f"cell {failure['cell']}"
        return (
            f'<div class="book-banner failed" role="alert"><strong>This chapter stopped with an error</strong> in '
            f"{where} when the book was built: <code>{_e(failure['message'])}</code>. The cell shows the error; "
            "the cells after it were not run, so they have no output.</div>"
        )
    if status == "unexecuted":
        return (
            f'<div class="book-banner unexecuted"><strong>Not run in this build:</strong> this page shows the '
            f"chapter without its outputs. <code>course html {_e(chapter.name)}</code> runs it.</div>"
        )
    return ""


def plain_page(title: str, body: str, book, current: str | None, static: str, exercises_page: str) -> str:
    """A page of the book that is not a chapter (the contents, the exercises), in the same frame."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<meta name="generator" content="course html (course_tools.book)">
<title>{_e(title)}</title>
<link rel="stylesheet" href="{static}/jupyterlab.css">
<link rel="stylesheet" href="{static}/book.css">
{MATHJAX_CONFIG}
<script src="{static}/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"></script>
</head>
<body class="course-book" data-jp-theme-light="true" data-jp-theme-name="JupyterLab Light">
{sidebar(book, current, exercises_page)}
<main class="book-main book-page jp-RenderedHTMLCommon">
{body}
</main>
</body>
</html>
"""


def index_body(entries, page_name, facts: str, exercises_page: str) -> str:
    notes = {
        "failed": "stopped with an error when the book was built",
        "unexecuted": "not run in this build: no outputs",
    }
    items = []
    for chapter, result in entries:
        status = result.page_status
        note = f' <span class="book-status">({notes[status]})</span>' if status in notes else ""
        sections = "".join(
            f'<li><a href="{_e(page_name(chapter))}#{_e(anchor)}">{_e(text)}</a></li>'
            for anchor, text in result.sections
        )
        items.append(
            f'<li><a href="{_e(page_name(chapter))}">{_e(chapter.title)}</a>{note}'
            + (f"<ul>{sections}</ul>" if sections else "")
            + "</li>"
        )
    return (
        f"<h1>{_e(BOOK_TITLE)}</h1>"
        "<p>Thirteen chapters that build the Transformer from its pieces and check every claim with code, "
        "followed by seven exercises. Each page shows the chapter as it ran when this book was built: its "
        "outputs, its figures and its checks. To run the chapters yourself and do the exercises, clone the "
        "course and run <code>make lab</code>.</p>"
        f'<p class="book-facts">{_e(facts)}</p>'
        f'<h2>Contents</h2><ol class="book-contents">{"".join(items)}</ol>'
        f'<p><a href="{_e(exercises_page)}">The exercises</a>: what each one asks, and how to get it.</p>'
    )


def exercises_body(exercises, chapters_by_name: dict, page_name) -> str:
    rows = []
    for exercise in exercises:
        chapter_links = (
            ", ".join(
                f'<a href="{_e(page_name(chapters_by_name[name]))}">{_e(chapters_by_name[name].title)}</a>'
                for name in exercise.chapters
                if name in chapters_by_name
            )
            or "&ndash;"
        )
        rows.append(
            f'<tr id="{_e(exercise.id)}"><td><code>{_e(exercise.id)}</code></td><td>{_e(exercise.title)}</td>'
            f"<td>{chapter_links}</td><td><code>exercises/{_e(exercise.id)}/{_e(exercise.id)}.ipynb</code></td></tr>"
        )
    return (
        "<h1>Exercises</h1>"
        "<p>Each exercise is a notebook with a statement, a skeleton to complete, and tests you can run "
        "(nbgrader's <em>visible</em> tests); when it is graded, hidden tests check more. They are done in "
        "JupyterLab, not in this book: clone the course and run <code>make lab</code>; your own copy of every "
        "exercise is then in <code>exercises/&lt;id&gt;/</code>, and nothing of the course writes over it. Check "
        "it with <strong>Validate</strong> (or <code>nbgrader validate exercises/&lt;id&gt;/&lt;id&gt;.ipynb</code>). "
        "In a class, your instructor releases the exercises and you fetch them in <em>Nbgrader &rarr; Assignment "
        "List</em>.</p>"
        "<table><thead><tr><th>id</th><th>exercise</th><th>chapters</th><th>your copy after <code>make lab</code></th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
