"""The ``course`` command: every Makefile target is a thin wrapper around one of its subcommands.

    course lab        open JupyterLab on the course (chapters + nbgrader's Assignments panel)
    course test       run the whole test suite (library, notebooks, grading pipeline)
    course release    regenerate the student notebooks from solutions/ (instructors)
    course grade      autograde everything collected, write feedback and a grades CSV (instructors)
    course bench      attention benchmarks; writes tables and plots under benchmarks/
    course html       execute every chapter and write static HTML with outputs
    course e2e        the browser test of the learner's and instructor's path
    course clean      remove generated files (never solutions/, never student submissions)
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str], env: dict | None = None) -> int:
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT, env={**os.environ, **(env or {})})


def _require_checkout() -> None:
    if not (ROOT / "notebooks").is_dir():
        sys.exit(f"course: {ROOT} is not a course checkout (no notebooks/ folder); run this from a git clone")


def cmd_lab(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    # nbgrader installs its lab and server extensions enabled (tests/test_lab.py checks both).
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        extra = ["--allow-root", *extra]  # containers and CI often run as root
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={ROOT}", *extra]
    print("+", " ".join(cmd), flush=True)
    os.chdir(ROOT)
    # Become JupyterLab (no child process), so that stopping `course lab` stops the server too.
    os.execv(sys.executable, cmd)


def cmd_test(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    workers = args.workers or os.environ.get("COURSE_TEST_WORKERS") or "2"
    cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider",
           "-n", str(workers), "--dist", "loadfile", "--durations=25"]
    targets = extra or ["tests", "notebooks", "solutions"]
    # One thread per test worker: two workers on two cores, no oversubscription. MPLBACKEND keeps
    # figures off-screen.
    env = {"COURSE_THREADS": os.environ.get("COURSE_THREADS", "1"), "MPLBACKEND": "Agg",
           "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    return _run(cmd + targets, env)


def cmd_release(args: argparse.Namespace, extra: list[str]) -> int:
    from .grading import cli as grading_cli
    return grading_cli.main(["release", *extra])


def cmd_grade(args: argparse.Namespace, extra: list[str]) -> int:
    from .grading import cli as grading_cli
    return grading_cli.main(["grade", *extra])


def cmd_bench(args: argparse.Namespace, extra: list[str]) -> int:
    from . import bench
    return bench.main(extra)


def cmd_html(args: argparse.Namespace, extra: list[str]) -> int:
    """Execute each chapter on its own; one failing chapter does not stop the others."""
    _require_checkout()
    out = (ROOT / args.out) if args.out else ROOT / "html"
    chapters = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if extra:
        wanted = {Path(name).stem for name in extra}
        unknown = wanted - {chapter.stem for chapter in chapters}
        if unknown:
            sys.exit(f"course html: no chapter named {', '.join(sorted(unknown))} in notebooks/")
        chapters = [chapter for chapter in chapters if chapter.stem in wanted]
    if not chapters:
        sys.exit("course html: no notebooks found in notebooks/")
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for chapter in chapters:
        cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute",
               "--ExecutePreprocessor.timeout=900", f"--output-dir={out}", str(chapter)]
        if _run(cmd, {"COURSE_THREADS": os.environ.get("COURSE_THREADS", "1"), "MPLBACKEND": "Agg"}) != 0:
            failed.append(chapter.name)
    index = _write_html_index(out)
    print(f"course html: {len(chapters) - len(failed)} of {len(chapters)} chapters written to {out}/ (open {index})")
    if failed:
        print("course html: these chapters stopped with an error (the message is above): " + ", ".join(failed))
        return 1
    return 0


def _write_html_index(out: Path) -> Path:
    """index.html with one link per page in `out`, titled by each chapter's first heading."""
    import html
    import json

    links = []
    for page in sorted(out.glob("*.html")):
        if page.name == "index.html":
            continue
        title = page.stem
        source = ROOT / "notebooks" / f"{page.stem}.ipynb"
        if source.exists():
            for cell in json.loads(source.read_text(encoding="utf-8"))["cells"]:
                text = "".join(cell["source"]).strip()
                if cell["cell_type"] == "markdown" and text.startswith("#"):
                    title = text.splitlines()[0].lstrip("# ").strip()
                    break
        links.append(f'<li><a href="{html.escape(page.name)}">{html.escape(title)}</a></li>')
    index = out / "index.html"
    index.write_text("<!doctype html>\n<meta charset=\"utf-8\">\n<title>Transformers from the Ground Up</title>\n"
                     "<h1>Transformers from the Ground Up</h1>\n<ol>\n" + "\n".join(links) + "\n</ol>\n",
                     encoding="utf-8")
    return index


def cmd_e2e(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    return _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "e2e", "tests/e2e", "-s", *extra])


def cmd_clean(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    # submitted/ holds students' work: it is never removed here.
    for name in ("release", "autograded", "feedback", "html", ".pytest_cache"):
        path = ROOT / name
        if path.exists():
            shutil.rmtree(path)
            print(f"removed {path}")
    for path in ROOT.rglob("__pycache__"):
        if ".venv" not in path.parts:
            shutil.rmtree(path, ignore_errors=True)
    return 0


COMMANDS = {
    "lab": (cmd_lab, "open JupyterLab on the course"),
    "test": (cmd_test, "run the whole test suite"),
    "release": (cmd_release, "regenerate the release notebooks from solutions/"),
    "grade": (cmd_grade, "autograde collected submissions, feedback and grades CSV"),
    "bench": (cmd_bench, "attention benchmarks (tables and plots in benchmarks/)"),
    "html": (cmd_html, "execute the chapters and write static HTML"),
    "e2e": (cmd_e2e, "browser test of the learner's and instructor's path"),
    "clean": (cmd_clean, "remove generated files (never submissions)"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, add_help=name not in ("release", "grade", "bench"))
        if name == "test":
            p.add_argument("--workers", help="parallel test workers (default 2)")
        if name == "html":
            p.add_argument("--out", help="output folder (default html/); chapters may be named after it")
    args, extra = parser.parse_known_args(argv)
    handler = COMMANDS[args.command][0]
    return handler(args, extra)


if __name__ == "__main__":
    sys.exit(main())
