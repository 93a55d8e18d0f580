"""Learners' HTML made safe to show, in the feedback pages and in the formgrader's grading pages.

Everything a learner hands in is data. nbconvert writes Markdown (and any raw HTML in it) and rich
outputs (text/html, text/markdown, SVG, JavaScript) into the page as they are: a `<script>`, an
`onerror=` handler or a `javascript:` link in a written answer would run in the instructor's
formgrader, with the instructor's Jupyter session, and in the learner's feedback page.

The course's nbgrader_config.py turns on nbconvert's own switch, `HTMLExporter.sanitize_html` (no
JavaScript or widget outputs at all; Markdown cells, text/html and text/markdown outputs through the
`clean_html` filter), and puts the two filters of this module in place of nbconvert's:

    markdown2html   nbconvert's Markdown renderer (math, attachments, heading anchors), then clean_html,
                    in a worker process with a size and time budget (render.py); nbgrader's formgrade
                    and feedback templates call it without clean_html
    clean_html      ammonia, the Rust sanitiser (through nh3), with an allow-list for notebook content
                    (nbconvert's default uses bleach, deprecated, and escapes every heading and paragraph)

The allow-list is ammonia's (text, headings, lists, tables, images, links) with `class` on the elements
that carry syntax highlighting, `text-align` as the only style property (Markdown tables), URLs that are
relative, http(s) or mailto, and data: URLs for images only. Ids are prefixed (`user-content-`, as
GitHub does), so that a learner's heading can never stand in for an element of the grading page (the
formgrader finds its score boxes by the cell's grade id), and in-page links follow them.
"""

from __future__ import annotations

import copy
import re

import jinja2
import nh3

ID_PREFIX = "user-content-"
URL_SCHEMES = {"http", "https", "mailto", "data"}  # data: only for images, see _attribute_filter
IMAGE_DATA_URL = re.compile(r"^data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.IGNORECASE)
HIGHLIGHTED = ("div", "span", "pre", "code")  # pygments' <div class="highlight"><pre><span class="k">


def _allowed_attributes() -> dict[str, set[str]]:
    attributes = copy.deepcopy(nh3.ALLOWED_ATTRIBUTES)
    for tag in HIGHLIGHTED:
        attributes.setdefault(tag, set()).add("class")
    for level in range(1, 7):
        attributes.setdefault(f"h{level}", set()).add("id")
    attributes["a"] |= {"class", "title"}  # nbconvert's heading anchors: <a class="anchor-link">
    attributes["img"] |= {"title"}
    for tag in ("th", "td"):
        attributes[tag] |= {"style"}  # mistune's column alignment
    return attributes


ALLOWED_ATTRIBUTES = _allowed_attributes()


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "id":
        return value if value.startswith(ID_PREFIX) else ID_PREFIX + value
    if attribute == "href" and value.startswith("#") and len(value) > 1 and not value[1:].startswith(ID_PREFIX):
        return "#" + ID_PREFIX + value[1:]
    if attribute in ("href", "src") and value.strip().lower().startswith("data:"):
        # An image may be inline data (Markdown attachments); a link to data: could open a page of HTML.
        return value if tag == "img" and attribute == "src" and IMAGE_DATA_URL.match(value.strip()) else None
    return value


def clean_html(element) -> str:
    """`element` (str, or bytes as nbconvert passes SVG) with only the allowed tags, attributes and URLs."""
    text = element.decode("utf-8", errors="replace") if isinstance(element, bytes) else str(element)
    return nh3.clean(
        text,
        attributes=ALLOWED_ATTRIBUTES,
        attribute_filter=_attribute_filter,
        url_schemes=URL_SCHEMES,
        filter_style_properties={"text-align"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def markdown_to_safe_html(source: str, attachments: dict | None = None, path: str = "") -> str:
    """Markdown rendered as nbconvert's HTMLExporter does (with its defaults), then `clean_html`."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(
        escape=False,
        attachments=attachments or {},
        embed_images=False,
        path=path,
        anchor_link_text="\u00b6",
        exclude_anchor_links=False,
    )
    return clean_html(MarkdownWithMath(renderer=renderer).render(source))


@jinja2.pass_context
def markdown2html(context, source: str) -> str:
    """The `markdown2html` template filter: a cell's attachments and the notebook's folder from the context.

    The rendering itself runs in render.py's worker process, within a size and a time budget per cell and
    per notebook (the budget of a page lives in its ``resources``)."""
    from .render import RenderBudget, render_markdown

    cell = context.get("cell") or {}
    attachments = cell.get("attachments") if isinstance(cell, dict) else None
    resources = context.get("resources")
    resources = resources if isinstance(resources, dict) else {}
    path = resources.get("metadata", {}).get("path", "")
    budget = resources.setdefault("course_render_budget", RenderBudget())
    return render_markdown(str(source), attachments if isinstance(attachments, dict) else None, path, budget)
