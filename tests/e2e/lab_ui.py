"""What a person does in JupyterLab, as Playwright steps: menus, the file browser, notebooks, cells.

Every wait has a deadline and every failure says what the page showed instead, so that a red test
explains itself (together with the screenshot the test takes at each step).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: F401  (re-exported for the suites)
from playwright.sync_api import Locator, Page

VIEWPORT = {"width": 1400, "height": 900}
# A short chapter runs in about a minute on a loaded 2-core machine; ten times that is a hang.
CELL_RUN_TIMEOUT_S = float(os.environ.get("E2E_RUN_TIMEOUT", "600"))
UI_TIMEOUT_MS = 120_000

EXECUTED_PROMPT = re.compile(r"^\[\d+\]:$")
ERROR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]'
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
TRACEBACK_LINE = "Traceback (most recent call last)"
EXCEPTION_LINE = re.compile(r"^\w*(Error|Exception|Interrupt): ", re.M)


class Screenshots:
    """Numbered screenshots NN_step.png in one folder, printed as they are taken."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("[0-9][0-9]_*.png"):
            old.unlink()  # a rerun must not leave a previous run's pictures next to this one's
        self.count = 0
        self.taken: list[Path] = []

    def take(self, page: Page, step: str) -> Path:
        self.count += 1
        path = self.folder / f"{self.count:02d}_{step}.png"
        page.screenshot(path=str(path))
        self.taken.append(path)
        print(f"  screenshot {path}", flush=True)
        return path


def open_lab(page: Page, url: str) -> None:
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(url, timeout=UI_TIMEOUT_MS)
    page.wait_for_selector("#jp-main-dock-panel", timeout=UI_TIMEOUT_MS)
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=UI_TIMEOUT_MS)


def lab_page(browser, url: str):
    """A browser page with JupyterLab open at `url`, in a context of its own, closed afterwards (a generator,
    for a fixture to `yield from`)."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    open_lab(page, url)
    yield page
    context.close()


def menu(page: Page, top: str, item: str | re.Pattern) -> None:
    """Click a menu bar entry, then one of its items (exact labels, as a person reads them)."""
    page.locator(".lm-MenuBar-itemLabel").get_by_text(top, exact=True).click()
    labels = page.locator(".lm-Menu:visible .lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel")
    entry = labels.get_by_text(item, exact=True) if isinstance(item, str) else labels.get_by_text(item)
    entry.first.click()


def open_in_file_browser(page: Page, name: str, cell_count: int) -> Locator:
    """Double-click a file in the file browser; returns its notebook panel once loaded with a kernel."""
    page.locator(".jp-DirListing-content .jp-DirListing-itemText").get_by_text(name, exact=True).dblclick()
    return current_notebook(page, name, cell_count)


def current_notebook(page: Page, name: str, cell_count: int, timeout_s: float = 180) -> Locator:
    """The visible notebook panel whose tab is `name`, once all `cell_count` cells are shown and its
    kernel is idle (a notebook that is still loading shows one empty cell and "No Kernel")."""
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text(name, exact=True))
    tab.first.wait_for(timeout=UI_TIMEOUT_MS)
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.wait_for(timeout=UI_TIMEOUT_MS)
    deadline = time.monotonic() + timeout_s
    while True:
        shown = panel.locator(".jp-Notebook .jp-Cell").count()
        if shown == cell_count and kernel_is_idle(page, panel):
            return panel
        fail_on_dialog(page, f"opening {name}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{name} did not finish opening in {timeout_s:.0f} s: {shown} of {cell_count} "
                f"cells shown, status bar says {status_bar_kernel(page)!r}"
            )
        time.sleep(0.5)


def status_bar_kernel(page: Page) -> str:
    """The status bar's kernel item, e.g. 'Python 3 (ipykernel) | Idle' or 'No Kernel | Initializing'."""
    item = page.locator('#jp-main-statusbar .jp-StatusBar-TextItem[title^="Change kernel"]')
    return item.first.inner_text().strip() if item.count() else ""


def kernel_status(panel: Locator) -> str:
    indicator = panel.locator(".jp-Notebook-ExecutionIndicator")
    if not indicator.count():
        return "unknown"
    return indicator.first.get_attribute("data-status") or "unknown"


def kernel_is_idle(page: Page, panel: Locator) -> bool:
    return kernel_status(panel) == "idle" and status_bar_kernel(page).endswith("| Idle")


def fail_on_dialog(page: Page, doing: str) -> None:
    """A dialog nobody expected (kernel died, kernel choice, file changed on disk) stops the test."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and dialog.first.is_visible():
        raise AssertionError(f"while {doing}, JupyterLab showed a dialog:\n{dialog.first.inner_text()}")


def wait_until_every_cell_ran(
    panel: Locator, timeout_s: float = CELL_RUN_TIMEOUT_S, stalled_after_s: float = 15
) -> float:
    """Wait until every code cell shows an execution count and the kernel is idle; returns seconds.

    Run All stops at the first cell that raises: the kernel goes idle with later cells never run.
    That is reported at once, with the error, instead of waiting for the deadline.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    stalled_since = None
    while True:
        prompts = [text.strip() for text in panel.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()]
        finished = bool(prompts) and all(EXECUTED_PROMPT.match(p) for p in prompts)
        idle = kernel_is_idle(panel.page, panel)
        if finished and idle:
            return time.monotonic() - started
        fail_on_dialog(panel.page, "running cells")
        errors = error_outputs_text(panel)
        if errors:
            raise AssertionError(f"a cell raised an error while running:\n{errors}")
        waiting = [i for i, p in enumerate(prompts) if not EXECUTED_PROMPT.match(p)]
        if idle and "[*]:" not in prompts:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > stalled_after_s:
                raise AssertionError(
                    f"the run stopped with code cells {waiting} not run (the kernel is idle); "
                    f"errors shown:\n{error_outputs_text(panel) or '(none)'}"
                )
        else:
            stalled_since = None
        if time.monotonic() > deadline:
            raise AssertionError(
                f"after {timeout_s:.0f} s, code cells {waiting} have not run "
                f"(prompts {prompts}); kernel is {kernel_status(panel)!r}"
            )
        time.sleep(1)


def error_outputs_text(panel: Locator) -> str:
    """Every error a cell showed. JupyterLab draws an error as a stderr block holding the traceback
    (a SyntaxError has no "Traceback" line, only "SyntaxError: ...")."""
    errors = panel.locator(ERROR_OUTPUT).all_inner_texts()
    errors += [
        text
        for text in panel.locator(STDERR_OUTPUT).all_inner_texts()
        if TRACEBACK_LINE in text or EXCEPTION_LINE.search(text)
    ]
    return "\n---\n".join(errors)


def stderr_texts(panel: Locator) -> list[str]:
    return panel.locator(STDERR_OUTPUT).all_inner_texts()


def rendered_images(panel: Locator) -> list[dict]:
    """Size of every image in the outputs, as the browser decoded it (0 x 0 = not rendered)."""
    return panel.locator(".jp-OutputArea-output img").evaluate_all(
        "images => images.map(img => ({width: img.naturalWidth, height: img.naturalHeight, complete: img.complete}))"
    )


def cell(panel: Locator, index: int) -> Locator:
    return panel.locator(".jp-Notebook .jp-Cell").nth(index)


def replace_cell_text(page: Page, panel: Locator, index: int, text: str) -> None:
    """Select cell `index`, enter its editor, select everything, and type `text` in its place.

    The text arrives as one input event (keyboard.insert_text), as a paste would: CodeMirror's
    auto-indent and bracket closing react to single keystrokes, so they leave it unchanged.
    """
    target = cell(panel, index)
    target.scroll_into_view_if_needed()
    if "jp-MarkdownCell" in (target.get_attribute("class") or ""):
        # A rendered Markdown cell shows HTML; a double-click opens its source.
        target.locator(".jp-MarkdownOutput, .jp-RenderedMarkdown").first.dblclick()
    else:
        target.locator(".jp-InputArea-editor").click()
    editor = target.locator(".cm-content")
    editor.wait_for()
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def dismiss_dialog(page: Page, button: str = "Ok") -> None:
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_role("button", name=re.compile(f"^{button}$", re.I)).click()
    dialog.wait_for(state="detached")


def wait_until_saved(page: Page, name: str, timeout_s: float = 60) -> None:
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").filter(has=page.get_by_text(name, exact=True)).first
    deadline = time.monotonic() + timeout_s
    while "jp-mod-dirty" in (tab.get_attribute("class") or ""):
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} still has unsaved changes after {timeout_s:.0f} s")
        time.sleep(0.5)
