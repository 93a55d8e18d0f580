"""The ``course`` command: every Makefile target is a thin wrapper around one of its subcommands.

course setup      the learner's exercises (your own copies in exercises/) and nbgrader's settings
course lab        open JupyterLab on the course: a start page, the chapters, your exercises
course test       run the whole test suite (library, notebooks, grading pipeline); --fast: the library alone
course release    regenerate the student notebooks from solutions/ (instructors; --publish: to the exchange)
course collect    collect submissions from the exchange into submitted/ (instructors)
course grade      autograde everything collected, write feedback and a grades CSV (instructors)
course export     nbgrader's grades CSV (instructors)
course cycle-demo the whole cycle for two learners in a temporary course
course attack-table  compare the attack table of docs/grader.md with the attack test's latest run
                  (build/grading/attack_table.md); --write-doc copies it into docs/grader.md
course bench      attention benchmarks; writes tables and plots under benchmarks/
course html       the book: every chapter executed, as HTML pages with contents and math (html/)
course robustness run the chapters for seeds 0, 1, 2 and tabulate what their checks measured
course e2e        the browser test of the learner's and instructor's path
course clean      remove generated files (never solutions/, never student submissions)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str], env: dict | None = None) -> int:
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT, env={**os.environ, **(env or {})})


def _require_checkout() -> None:
    if not (ROOT / "notebooks").is_dir():
        sys.exit(f"course: {ROOT} is not a course checkout (no notebooks/ folder); run this from a git clone")


def cmd_setup(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    if extra:
        sys.exit(f"course setup: unknown arguments {' '.join(extra)}")
    from . import learner_setup

    try:
        return learner_setup.setup(ROOT)
    except (ValueError, FileNotFoundError) as error:  # e.g. a source notebook that is not valid JSON
        sys.exit(f"course setup: {error}")


def cmd_lab(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    from . import learner_setup

    if not args.instructor:
        learner_setup.setup(ROOT, quiet=True)  # quick when nothing changed, so that `course lab` alone is enough
        learner_setup.fresh_workspace(ROOT)  # START.md alone: no notebook (and kernel) of an earlier run reopened
    config_dir = learner_setup.lab_config_dir(ROOT, instructor=args.instructor)
    # nbgrader's extensions come enabled with it (tests/test_lab.py checks both).
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        extra = ["--allow-root", *extra]  # containers and CI often run as root
    options = [f"--ServerApp.root_dir={ROOT}"]
    if args.port is not None:
        options.append(f"--ServerApp.port={args.port}")
    if args.ip:
        options.append(f"--ServerApp.ip={args.ip}")
    if args.no_browser:
        options.append("--no-browser")
    if os.name != "nt":
        # The lab's terminals run the user's shell as the lab's own environment has it, as they do when the lab
        # is started from a terminal. Started from anything else (a launcher, an editor, a service), Jupyter
        # makes them login shells, whose /etc/profile resets PATH: `course` and `nbgrader` were not found.
        import json
        import shutil

        shell = os.environ.get("SHELL") or shutil.which("sh") or "/bin/sh"
        options.append(f"--ServerApp.terminado_settings={json.dumps({'shell_command': [shell]})}")
    cmd = [sys.executable, "-m", "jupyter", "lab", *options, *extra]
    # The lab's settings, its terminals' and kernels' nbgrader settings: the course's configuration folder first.
    inherited = os.environ.get("JUPYTER_CONFIG_PATH")
    os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(config_dir), *([inherited] if inherited else [])])
    # The lab's terminals find `nbgrader` and `course` of this environment without activating it.
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    print("+", " ".join(cmd), flush=True)
    os.chdir(ROOT)
    # Become JupyterLab (no child process), so that stopping `course lab` stops the server too.
    os.execv(sys.executable, cmd)


def _pins_one_thread(notebook: Path) -> bool:
    """Whether a notebook's code asks ``env.setup(..., threads=1)`` for itself (and so leaves the other
    cores to whatever else runs)."""
    import json
    import re

    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
    return re.search(r"env\.setup\([^)]*threads\s*=\s*1\b", code) is not None


def cmd_test(args: argparse.Namespace, extra: list[str]) -> int:
    """The suite in three parts: the library and grading tests in parallel workers; then the chapters,
    each with the kernel's own defaults as in a learner's JupyterLab. The exercises' source notebooks
    run from top to bottom in the grading pipeline's test (graded as a submission, in the grader's
    kernel, where no cell may raise), and not a second time here.

    A notebook that uses every core (``env.setup()`` without ``threads``) runs alone: two such kernels
    on the same cores slow each other down many times over (PyTorch's worker threads spin while they
    wait for each other's turns), which no learner running one chapter sees. The notebooks that pin one
    thread themselves run two at a time, so each of them is checked with the other core busy, as on a
    learner's laptop that is never idle.

    Which files run in --fast, and in which order the workers take them (the longest first, from the durations
    a full run records), is the tests' own business: tests/suite_order.py, loaded in every part.
    """
    _require_checkout()
    workers = args.workers or os.environ.get("COURSE_TEST_WORKERS") or "2"
    pytest = [
        *(sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "--durations=25"),
        *("-p", "tests.suite_order"),
    ]
    parallel = ["-n", str(workers), "--dist", "loadfile"]
    # MPLBACKEND keeps figures off-screen; the library tests pin one thread each in tests/conftest.py.
    env = {"MPLBACKEND": "Agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    if args.fast:
        return _run(pytest + parallel + ["-m", "not slow", "--library-only", *(extra or ["tests"])], env)
    if extra:
        return _run(pytest + parallel + extra, env)
    env["COURSE_RECORD_DURATIONS"] = "1"  # every file of each part runs whole: its seconds order the next run
    notebooks = sorted(ROOT.glob("notebooks/*.ipynb"))
    one_thread = [str(path.relative_to(ROOT)) for path in notebooks if _pins_one_thread(path)]
    every_core = [str(path.relative_to(ROOT)) for path in notebooks if not _pins_one_thread(path)]
    parts = [
        ("the library and the grading pipeline", pytest + parallel + ["tests"]),
        ("the chapters that use every core, one at a time", pytest + every_core),
        ("the chapters that pin one thread, two at a time", pytest + parallel + one_thread),
    ]
    failed, seconds = [], {}
    for number, (what, command) in enumerate(parts, start=1):
        print(f"course test: {number}/{len(parts)}, {what}", flush=True)
        started = time.monotonic()
        if _run(command, env):
            failed.append(what)
        seconds[what] = time.monotonic() - started
    write_test_times(TEST_TIMES, seconds, failed)
    print(f"course test: {sum(seconds.values()):.0f} s in all; each part's time in {TEST_TIMES.relative_to(ROOT)}")
    if failed:
        print(f"course test: failed in {'; '.join(failed)} (see above)", flush=True)
    return 1 if failed else 0


TEST_TIMES = ROOT / "build" / "test-times.md"


def write_test_times(
    path: Path, seconds: dict[str, float], failed: list[str], durations: Path = ROOT / "build" / "test-durations.json"
) -> None:
    """How long the last full `course test` took on this machine, part by part, with its longest files: what the
    documents would otherwise keep by hand (the files' seconds are build/test-durations.json, which orders the
    next run)."""
    import json
    import platform
    from importlib import metadata

    files = json.loads(durations.read_text(encoding="utf-8")) if durations.is_file() else {}
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "not installed"
    lines = [
        "# The last full `course test` on this machine",
        "",
        f"- {time.strftime('%Y-%m-%d %H:%M %Z')}; {os.cpu_count()} cores ({platform.machine()}), "
        f"Python {platform.python_version()}, torch {torch_version}",
        "",
        "| part | seconds | result |",
        "|---|---:|---|",
        *(f"| {what} | {value:.0f} | {'failed' if what in failed else 'passed'} |" for what, value in seconds.items()),
        f"| in all | {sum(seconds.values()):.0f} | {'failed' if failed else 'passed'} |",
        "",
        "The longest files (seconds of one worker, from build/test-durations.json):",
        "",
        *(f"- {name}: {value:.0f} s" for name, value in sorted(files.items(), key=lambda item: -item[1])[:10]),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _grading(name: str):
    """A subcommand of the instructor's tools (course_grader/cli.py), under the same `course`."""

    def run(args: argparse.Namespace, extra: list[str]) -> int:
        from course_grader import cli as grading_cli

        return grading_cli.main([name, *extra])

    return run


def cmd_attack_table(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    from course_grader import attack_table

    return attack_table.main(extra)


def cmd_bench(args: argparse.Namespace, extra: list[str]) -> int:
    from course_utils import bench

    return bench.main(extra)


def cmd_html(args: argparse.Namespace, extra: list[str]) -> int:
    """The book: each chapter executed on its own; one failing chapter is written with its error and named."""
    _require_checkout()
    from . import book

    if extra:
        sys.exit(f"course html: unknown arguments {' '.join(extra)}")
    out = Path(args.out).resolve() if args.out else ROOT / "html"
    return book.main(ROOT, out, args.chapters, timeout=args.timeout)


def cmd_robustness(args: argparse.Namespace, extra: list[str]) -> int:
    _require_checkout()
    from . import robustness

    return robustness.main(extra)


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
    "setup": (cmd_setup, "your own copies of the exercises, nbgrader's learner settings, the start page"),
    "lab": (cmd_lab, "open JupyterLab on the course (a start page, the chapters, your exercises)"),
    "test": (cmd_test, "run the whole test suite"),
    "release": (_grading("release"), "regenerate the release notebooks from solutions/"),
    "collect": (_grading("collect"), "collect learners' submissions from the exchange into submitted/"),
    "grade": (_grading("grade"), "autograde collected submissions, feedback and grades CSV"),
    "export": (_grading("export"), "nbgrader's grades CSV"),
    "fetch": (_grading("fetch"), "(learner) fetch a released assignment into a folder"),
    "submit": (_grading("submit"), "(learner) submit an assignment from a folder"),
    "cycle-demo": (_grading("cycle-demo"), "the whole nbgrader cycle for two learners, in a temporary course"),
    "check": (_grading("check"), "(learner) your copy of an exercise graded with the hidden tests, as in a class"),
    "attack-table": (
        cmd_attack_table,
        "the table of attacks on the grader in docs/grader.md, from the attack test's latest run",
    ),
    "bench": (cmd_bench, "attention benchmarks (tables and plots in benchmarks/)"),
    "html": (cmd_html, "the book: execute the chapters and write them as HTML pages"),
    "robustness": (cmd_robustness, "run the chapters for several seeds; table of every check's spread"),
    "e2e": (cmd_e2e, "browser test of the learner's and instructor's path"),
    "clean": (cmd_clean, "remove generated files (never submissions)"),
}


GRADING_COMMANDS = ("release", "collect", "grade", "export", "fetch", "submit", "cycle-demo", "check")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="course",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in COMMANDS.items():
        # Subcommands with options of their own parse them (and --help) themselves.
        own_parser = name in GRADING_COMMANDS or name in ("bench", "robustness", "attack-table")
        p = sub.add_parser(name, help=help_text, add_help=not own_parser)
        if name == "test":
            p.add_argument("--workers", help="parallel test workers (default 2)")
            p.add_argument(
                "--fast",
                action="store_true",
                help="the library tests alone (no notebooks, no grading pipeline, no browser): under a minute",
            )
        if name == "lab":
            p.description = (
                "JupyterLab on the course. Options not listed here go to `jupyter lab` unchanged "
                "(e.g. --ServerApp.token=...)."
            )
            p.add_argument("--port", type=int, help="port to serve on (default 8888, or the next free one)")
            p.add_argument("--ip", help="address to listen on (default localhost)")
            p.add_argument("--no-browser", action="store_true", help="do not open a browser")
            p.add_argument(
                "--instructor",
                action="store_true",
                help="the whole repository with nbgrader's formgrader, for an instructor "
                "(default: the learner's view: start page, no solutions/)",
            )
        if name == "html":
            p.add_argument(
                "chapters",
                nargs="*",
                help="chapters to execute, e.g. 02_self_attention (default: all); "
                "the others keep their page or are written without outputs",
            )
            p.add_argument("--out", help="output folder (default html/)")
            p.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    args, extra = parser.parse_known_args(argv)
    handler = COMMANDS[args.command][0]
    return handler(args, extra)


if __name__ == "__main__":
    sys.exit(main())
