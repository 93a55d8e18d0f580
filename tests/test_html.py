"""`course html`: chapters executed and written as static pages with their figures, plus an index."""
from __future__ import annotations

import re

import pytest

from course_utils import cli

pytestmark = pytest.mark.slow


def test_course_html_writes_a_page_with_figures_and_an_index(tmp_path):
    chapter = "13_exercises_and_self_check"
    status = cli.main(["html", "--out", str(tmp_path), chapter])
    assert status == 0, f"course html {chapter} failed with status {status}"
    page = (tmp_path / f"{chapter}.html").read_text(encoding="utf-8")
    figures = re.findall(r'<img [^>]*src="data:image/png;base64,', page)
    assert figures, "the executed page should carry its figures as embedded PNG images"
    assert "Traceback" not in page, "the executed page shows an error"
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert f'href="{chapter}.html"' in index, "index.html should link the page it built"


def test_course_html_names_an_unknown_chapter(tmp_path):
    with pytest.raises(SystemExit, match="no chapter named 99_missing"):
        cli.main(["html", "--out", str(tmp_path), "99_missing"])
