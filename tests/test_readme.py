"""Every command the README and the documents in docs/ show runs as written: each `course ...` subcommand exists
and answers --help, each `make` target exists, each `nbgrader ...` subcommand exists; every link between them
leads to a file, and to a heading where it names one."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")), *sorted(ROOT.glob("deploy/*.md"))]


def _commands(program: str) -> list[tuple[str, str]]:
    """(README name, command line) for every line of a fenced code block, and every inline `...`
    span, that starts with `program` (after an optional `.venv/bin/` and environment variables)."""
    found = []
    for readme in READMES:
        text = readme.read_text(encoding="utf-8")
        blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
        lines = [line for block in blocks for line in block.splitlines()]
        lines += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for line in lines:
            line = line.split("#", 1)[0].strip()
            words = line.split()
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words = words[1:]  # VARIABLE=value before the command
            if words and words[0].removeprefix(".venv/bin/") == program and len(words) > 1:
                found.append((readme.name, " ".join([program, *words[1:]])))
    return sorted(set(found))


COURSE = _commands("course")
MAKE = _commands("make")
NBGRADER = _commands("nbgrader")


def test_the_readme_shows_commands_at_all():
    assert len(COURSE) >= 5 and MAKE, "the README should show how to run the course's commands"


@pytest.mark.parametrize("where,command", COURSE, ids=[command for _, command in COURSE])
def test_every_course_command_in_the_readme_exists_and_answers_help(where, command, capsys):
    from course_tools import cli

    subcommand = shlex.split(command)[1]
    with pytest.raises(SystemExit) as stopped:
        cli.main([subcommand, "--help"])
    printed = capsys.readouterr()
    assert stopped.value.code == 0, (
        f"{where} shows `{command}`, but `course {subcommand} --help` fails:\n{printed.err[-2000:]}"
    )
    assert "usage:" in printed.out, f"`course {subcommand} --help` printed no usage:\n{printed.out[-500:]}"


@pytest.mark.parametrize("where,command", MAKE, ids=[command for _, command in MAKE])
def test_every_make_target_in_the_readme_exists(where, command):
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, flags=re.M))
    for word in shlex.split(command)[1:]:
        if "=" in word or word.startswith("-"):
            continue
        assert word in targets, f"{where} shows `{command}`, but the Makefile has no target {word!r}"


@pytest.mark.parametrize("where,command", NBGRADER, ids=[command for _, command in NBGRADER])
def test_every_nbgrader_command_in_the_readme_exists(where, command):
    from nbgrader.apps.nbgraderapp import NbGraderApp

    subcommand = shlex.split(command)[1]
    assert subcommand in NbGraderApp.subcommands, f"{where} shows `{command}`, but nbgrader has no {subcommand!r}"


def _anchor(heading: str) -> str:
    """The anchor a Markdown heading gets on GitHub and in JupyterLab: lower case, spaces to hyphens, no punctuation."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("readme", READMES, ids=[str(path.relative_to(ROOT)) for path in READMES])
def test_every_link_of_the_documents_leads_somewhere(readme):
    text = re.sub(r"```.*?```", "", readme.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (readme.parent / path).resolve() if path else readme
        assert file.exists(), f"{readme.relative_to(ROOT)} links to {target}, which does not exist"
        if anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), flags=re.M)
            assert anchor in {_anchor(heading) for heading in headings}, (
                f"{readme.relative_to(ROOT)} links to {target}, but {file.name} has no such heading"
            )


PACKAGES = ("course_utils", "course_grader", "course_tools")


@pytest.mark.parametrize("name", PACKAGES)
def test_the_readmes_map_of_the_packages_names_every_module(name):
    """The README's map of the code (its last paragraph) names every package, and every module and sub-package of
    each in that package's sentence, so that a new one is placed in the library, the grader or the tools when it
    is added."""
    package = ROOT / name
    modules = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    modules |= {path.name for path in package.iterdir() if (path / "__init__.py").is_file()}
    text = (ROOT / "README.md").read_text(encoding="utf-8").rsplit("## More", 1)[-1]
    assert f"`{name}`" in text, f"the README's map of the code does not name {name}"
    sentence = text.split(f"`{name}`", 1)[1]
    for other in PACKAGES:  # up to the next package's name
        sentence = sentence.split(f"`{other}`", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", sentence))
    assert modules <= named, f"the README's map of {name} misses {sorted(modules - named)}"
