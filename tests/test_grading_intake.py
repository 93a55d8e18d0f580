"""What a learner hands in is data: links, hard links, FIFOs, sockets, devices and names that are not
UTF-8 in a submission or in the exchange are never followed or opened, and each is reported.

Fast checks of untrusted.py, the preflight and the collect copy on hand-made trees, then one `grade`
run (no kernel starts: every submission here is refused before anything executes) showing that a
batch of such submissions ends with one row each, a CSV and a report.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import stat
from pathlib import Path

import pytest

from course_grader.autograde import grade
from course_grader.exchange import pipeline
from course_grader.ground import notebooks, untrusted
from course_grader.ground.layout import CourseLayout
from course_grader.ground.report import read_csv
from course_grader.judging.preflight import inspect_submission

REPOSITORY = Path(__file__).resolve().parents[1]
ASSIGNMENT = "ex1_manual_attention"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
LATIN1 = os.fsdecode("café.py".encode("latin-1"))  # b"caf\xe9.py": not UTF-8


@pytest.fixture(autouse=True)
def _never_hang():
    """Opening a FIFO for reading waits for a writer: a grader that opens one fails here instead of hanging."""

    def stop(signum, frame):
        raise TimeoutError("the grader waited on something it should never have opened")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _unix_socket(folder: Path, name: str) -> None:
    """A socket file (bound by a short relative name: socket paths are limited to about 100 bytes)."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        server = socket.socket(socket.AF_UNIX)
        server.bind(name)
        server.close()
    finally:
        os.chdir(here)


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside every submission, standing for the instructor's source notebook."""
    path = tmp_path / "instructor" / "source.ipynb"
    path.parent.mkdir()
    path.write_text('{"secret": "model solution"}')
    return path


def _every_kind(folder: Path, outside: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "plain.txt").write_text("mine")
    (folder / "sub").mkdir()
    (folder / "sub" / "inner.txt").write_text("mine too")
    os.link(folder / "plain.txt", folder / "sub" / "same_file_twice.txt")  # both names inside: fine
    (folder / "absolute").symlink_to(outside)
    (folder / "relative").symlink_to("../instructor/source.ipynb")
    (folder / "to_folder").symlink_to(outside.parent, target_is_directory=True)
    (folder / "dangling").symlink_to("nowhere")
    (folder / "sub" / "loop").symlink_to("..")
    os.link(outside, folder / "hard")
    os.mkfifo(folder / "fifo")
    _unix_socket(folder, "sock")
    (folder / LATIN1).write_text("print('hello')")


def test_scan_reports_every_kind_and_follows_nothing(tmp_path, outside):
    folder = tmp_path / "submission"
    _every_kind(folder, outside)
    scan = untrusted.scan_tree(folder)
    problems = {entry.path: code for entry, code, _ in scan.problems()}
    assert problems == {
        "absolute": "symlink",
        "relative": "symlink",
        "to_folder": "symlink",
        "dangling": "symlink",
        "sub/loop": "symlink",
        "hard": "hard-link",
        "fifo": "special-file",
        "sock": "special-file",
    }, problems
    assert not any(entry.path.startswith(("to_folder/", "sub/loop/")) for entry in scan.entries), (
        "a linked folder was walked into"
    )
    readable = {entry.path for entry in scan.files()}
    assert readable == {"plain.txt", "sub/inner.txt", "sub/same_file_twice.txt", LATIN1}, readable
    assert untrusted.display(LATIN1) == "caf\\xe9.py" and untrusted.display("a\nb") == "a\\nb"
    with pytest.raises(untrusted.UnsafePath, match="hard link"):
        untrusted.read_file(scan, scan.get("hard"))
    with pytest.raises(untrusted.UnsafePath, match="symbolic link"):
        untrusted.scan_tree(folder / "to_folder")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_scan_reports_a_device_without_opening_it(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    os.mknod(folder / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: reading it never ends
    scan = untrusted.scan_tree(folder)
    assert [(entry.path, code) for entry, code, _ in scan.problems()] == [("zero", "special-file")]
    assert "character device" in scan.problem(scan.get("zero"))[1]


def test_a_file_swapped_for_a_link_after_the_scan_is_not_read(tmp_path, outside):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / NOTEBOOK).write_text("{}")
    scan = untrusted.scan_tree(folder)
    (folder / NOTEBOOK).unlink()
    (folder / NOTEBOOK).symlink_to(outside)
    with pytest.raises(untrusted.UnsafePath):
        untrusted.read_file(scan, scan.get(NOTEBOOK))


def test_fingerprint_of_plain_files_is_unchanged_and_covers_links_by_name(tmp_path, outside):
    folder = tmp_path / "submission"
    (folder / "sub").mkdir(parents=True)
    (folder / NOTEBOOK).write_text("{}")
    (folder / "sub" / "a.txt").write_text("a")
    (folder / "sub.txt").write_text("b")
    earlier = hashlib.sha256()
    pipeline.hash_tree(folder, earlier)  # the grader's earlier fingerprint: existing grades stay valid
    assert untrusted.fingerprint(untrusted.scan_tree(folder)).hexdigest() == earlier.hexdigest()
    (folder / "link").symlink_to(outside)
    with_link = untrusted.fingerprint(untrusted.scan_tree(folder)).hexdigest()
    outside.write_text("changed")
    assert untrusted.fingerprint(untrusted.scan_tree(folder)).hexdigest() == with_link, "a link's target was read"
    (folder / LATIN1).write_text("x")
    untrusted.fingerprint(untrusted.scan_tree(folder))  # names that are not UTF-8 are hashed as bytes


def _assignment(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(REPOSITORY / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    assignment = CourseLayout.from_directory(root).assignment(ASSIGNMENT)
    release_dir = tmp_path / "release"
    release_dir.mkdir()
    release = notebooks.load_json(assignment.main_notebook)
    notebooks.save_json(release, release_dir / NOTEBOOK)
    return assignment, release_dir, release


def test_preflight_scores_a_linked_notebook_zero_and_lets_no_other_file_stand_in(tmp_path):
    assignment, release_dir, release = _assignment(tmp_path)
    for kind in ("symlink", "hard-link", "special-file"):
        folder = tmp_path / kind
        folder.mkdir()
        notebooks.save_json(release, folder / f"Copy of {NOTEBOOK}")  # a real file that would be a renamed copy
        if kind == "symlink":
            (folder / NOTEBOOK).symlink_to(assignment.main_notebook)
        elif kind == "hard-link":
            os.link(assignment.main_notebook, folder / NOTEBOOK)
        else:
            os.mkfifo(folder / NOTEBOOK)
        result = inspect_submission(folder, assignment, release_dir)
        assert result.unreadable == [ASSIGNMENT] and not result.notebooks, (kind, result.findings)
        errors = [finding for finding in result.findings if finding.severity == "error"]
        assert [finding.code for finding in errors] == [kind], (kind, result.findings)
        assert "scores 0" in errors[0].message, errors[0].message
    hard = inspect_submission(tmp_path / "hard-link", assignment, release_dir)
    assert f"instructor's solutions/{ASSIGNMENT}/{NOTEBOOK}" in hard.findings[0].message, hard.findings[0].message


def test_preflight_grades_a_notebook_with_a_latin1_name_and_reports_the_name(tmp_path):
    assignment, release_dir, release = _assignment(tmp_path)
    folder = tmp_path / "latin1"
    folder.mkdir()
    notebooks.save_json(release, folder / os.fsdecode("Copie de été.ipynb".encode("latin-1")))
    (folder / LATIN1).write_text("x = 1")
    result = inspect_submission(folder, assignment, release_dir)
    assert ASSIGNMENT in result.notebooks
    codes = {finding.code: finding.message for finding in result.findings}
    assert "renamed-notebook" in codes and "undecodable-name" in codes, result.findings
    assert "caf\\xe9.py" in codes["undecodable-name"]
    for finding in result.findings:
        finding.describe().encode("utf-8")  # printable: no surrogate reaches a report


def test_collect_copy_takes_files_and_folders_only(tmp_path, outside):
    source = tmp_path / "inbound" / "ada+ex1+2025-01-15 12:00:00.000000 UTC"
    _every_kind(source, outside)
    (source / untrusted.COLLECT_REFUSALS).write_text('{"refused": []}')  # a learner's forged list
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "x.pyc").write_bytes(b"\0")
    copied = untrusted.copy_tree(source, tmp_path / "dest", exclude=["__pycache__"])
    assert set(copied.copied) == {"plain.txt", "sub/inner.txt", "sub/same_file_twice.txt", LATIN1}
    refused = {item["path"] for item in copied.refused}
    assert refused == {
        "absolute",
        "relative",
        "to_folder",
        "dangling",
        "sub/loop",
        "hard",
        "fifo",
        "sock",
        untrusted.COLLECT_REFUSALS,
    }, refused
    kinds = {path.relative_to(tmp_path / "dest"): path.lstat().st_mode for path in (tmp_path / "dest").rglob("*")}
    assert all(stat.S_ISREG(mode) or stat.S_ISDIR(mode) for mode in kinds.values()), kinds
    linked = tmp_path / "inbound" / "eve+ex1+2025-01-15 12:00:00.000000 UTC"
    linked.symlink_to(outside.parent, target_is_directory=True)
    whole = untrusted.copy_tree(linked, tmp_path / "dest-eve")
    assert not whole.copied and "symbolic link" in whole.refused[0]["reason"], whole
    assert not any((tmp_path / "dest-eve").iterdir())


@pytest.mark.slow
def test_collect_copy_is_whole_when_the_system_writes_a_little_at_a_time(tmp_path, monkeypatch):
    """os.write may write fewer bytes than it is given: the copy goes on until every byte is written."""
    source = tmp_path / "learner"
    source.mkdir()
    content = bytes(range(256)) * 300  # 76,800 bytes: several of the copy's chunks
    (source / "answer.ipynb").write_bytes(content)
    write = os.write
    monkeypatch.setattr(untrusted.os, "write", lambda fd, data: write(fd, bytes(data[:1000])))
    copied = untrusted.copy_tree(source, tmp_path / "dest")
    assert copied.copied == ["answer.ipynb"] and not copied.refused, copied
    assert (tmp_path / "dest" / "answer.ipynb").read_bytes() == content, "a partial write must not cut the copy short"


def test_a_batch_of_unreadable_submissions_ends_with_one_row_each(tmp_path):
    """No kernel runs here: every submission is refused before execution, and the batch still writes its CSV."""
    root = tmp_path / "course"
    shutil.copytree(REPOSITORY / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    pipeline.generate_release(layout)
    source = layout.assignment(ASSIGNMENT).main_notebook
    submitted = layout.submitted_dir

    def folder(student: str) -> Path:
        path = submitted / student / ASSIGNMENT
        path.mkdir(parents=True)
        return path

    (folder("linked") / NOTEBOOK).symlink_to(source)
    os.link(source, folder("hardlinked") / NOTEBOOK)
    os.mkfifo(folder("fifo") / NOTEBOOK)
    (folder(os.fsdecode(b"caf\xe9")) / NOTEBOOK).write_text("{}")  # a learner folder that is not UTF-8
    (folder("cafe") / LATIN1).write_text("x")  # and a file (no notebook: an error)
    (submitted / "folderlink").mkdir()
    (submitted / "folderlink" / ASSIGNMENT).symlink_to(source.parent, target_is_directory=True)
    (submitted / "learnerlink").symlink_to(source.parent.parent, target_is_directory=True)
    (submitted / "pipe").mkdir()
    os.mkfifo(submitted / "pipe" / ASSIGNMENT)
    run = grade(layout, workers=1, feedback=False, log=print)
    rows = {(record.student, record.assignment): record for record in run.records}
    assert set(rows) == {
        ("linked", ASSIGNMENT),
        ("hardlinked", ASSIGNMENT),
        ("fifo", ASSIGNMENT),
        ("caf\\xe9", ASSIGNMENT),
        ("cafe", ASSIGNMENT),
        ("folderlink", ASSIGNMENT),
        ("learnerlink", "*"),
        ("pipe", ASSIGNMENT),
    }, sorted(rows)
    assert all(record.status == "error" and record.auto_score == 0 and record.reasons for record in run.records)
    assert rows[("linked", ASSIGNMENT)].auto_max == 16, "an error row still says what the assignment is worth"
    codes = {key: {finding["code"] for finding in record.findings} for key, record in rows.items()}
    assert "symlink" in codes[("linked", ASSIGNMENT)] and "hard-link" in codes[("hardlinked", ASSIGNMENT)]
    assert "special-file" in codes[("fifo", ASSIGNMENT)] and "symlink" in codes[("folderlink", ASSIGNMENT)]
    assert "undecodable-name" in codes[("cafe", ASSIGNMENT)]
    csv_rows = read_csv(run.csv_path)
    assert len(csv_rows) == len(rows), csv_rows
    assert "caf\\xe9" in run.report_path.read_text(encoding="utf-8")
    assert not (layout.autograded_dir / "linked").exists(), "nothing of a refused submission reaches nbgrader"
    json.loads((layout.output_dir / "state.json").read_text())


# ------------------------------------------------------------------------------------------------
# untrusted.remove_tree: the grader's one way to delete what a kernel or a learner wrote.
# ------------------------------------------------------------------------------------------------
def _scratch(tmp_path: Path) -> Path:
    """A folder for a large tree: on /dev/shm where it is a writable tmpfs (a disk's rmdir of 100,000
    folders costs 10-30 s of the disk's time, not the walk's), else the test's own folder."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        import tempfile

        return Path(tempfile.mkdtemp(prefix="remove-tree-", dir="/dev/shm"))
    return tmp_path


def _chain(root: Path, depth: int, names=("d",)) -> None:
    """`depth` nested folders under `root`, made through descriptors (their path is far past PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            name = names[level % len(names)]
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("last.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def test_remove_tree_takes_a_chain_100000_folders_deep(tmp_path):
    import time

    scratch = _scratch(tmp_path)
    root = scratch / "deep"
    root.mkdir()
    try:
        _chain(root, 100_000)
        began = time.perf_counter()
        problems = untrusted.remove_tree(root)
        seconds = time.perf_counter() - began
    finally:
        if scratch != tmp_path:
            untrusted.remove_tree(scratch)
    print(f"100,000-deep chain removed in {seconds:.2f} s")
    assert problems == [] and not root.exists(), problems


def test_remove_tree_follows_no_link_and_leaves_everything_outside(tmp_path, outside):
    folder = tmp_path / "kernel-wrote"
    _every_kind(folder, outside)  # links to the outside file and folder, a hard link, a FIFO, a socket
    (folder / "sub" / "to_root").symlink_to("/", target_is_directory=True)
    before = sorted(p.name for p in outside.parent.iterdir())
    problems = untrusted.remove_tree(folder)
    assert problems == [] and not folder.exists(), problems
    assert sorted(p.name for p in outside.parent.iterdir()) == before
    assert outside.read_text() == '{"secret": "model solution"}' and os.stat(outside).st_nlink == 1
    link = tmp_path / "a-link-given-as-the-root"
    link.symlink_to(outside.parent, target_is_directory=True)
    assert untrusted.remove_tree(link) == [] and not os.path.lexists(link) and outside.exists()
    assert untrusted.remove_tree(tmp_path / "never-there") == []


def test_remove_tree_takes_names_that_are_not_utf8_or_hold_newlines_and_sheer_count(tmp_path):
    folder = tmp_path / "names"
    folder.mkdir()
    for raw in (b"caf\xe9", b"line\nbreak", b"\xff\xfe", b"-rf", b" ", b"..."):
        name = os.fsdecode(raw)
        (folder / name).mkdir()
        (folder / name / os.fsdecode(raw + b".txt")).write_text("x")
    _chain(folder / os.fsdecode(b"caf\xe9"), 50, names=(os.fsdecode(b"\xe9\n"), "x"))
    many = folder / "many"
    many.mkdir()
    for index in range(5_000):
        (many / f"f{index}").touch()
        if index % 10 == 0:
            (many / f"d{index}").mkdir()
    assert untrusted.remove_tree(folder, keep_root=True) == []
    assert folder.is_dir() and os.listdir(folder) == []


def test_remove_tree_opens_folders_with_mode_000_without_root_rights(tmp_path):
    """As the folders' owner without root: mode 000 and 500 folders are given 0700, then emptied."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="remove-tree-perm-"))  # traversable by another uid, unlike tmp_path
    os.chmod(base, 0o755)
    folder = base / "tree"
    (folder / "shut" / "inner").mkdir(parents=True)
    (folder / "shut" / "inner" / "f.txt").write_text("x")
    (folder / "readonly").mkdir()
    (folder / "readonly" / "g.txt").write_text("y")
    _chain(folder / "shut" / "inner", 30)
    os.chmod(folder / "shut" / "inner", 0)
    os.chmod(folder / "shut", 0)
    os.chmod(folder / "readonly", 0o500)
    try:
        if os.geteuid() != 0:
            assert untrusted.remove_tree(folder, keep_root=True) == []
        else:  # as root, permissions never stop the walk: run it as the tree's owner, an unprivileged uid
            uid = 1_639_990
            for path, folders, files in os.walk(folder):
                for name in [path, *(os.path.join(path, entry) for entry in folders + files)]:
                    os.lchown(name, uid, uid)
            os.chown(folder, uid, uid)
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    os.setresgid(uid, uid, uid)
                    os.setresuid(uid, uid, uid)
                    code = 0 if untrusted.remove_tree(folder, keep_root=True) == [] else 1
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged owner could not empty the tree"
        assert os.listdir(folder) == []
    finally:
        assert untrusted.remove_tree(base) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a filesystem needs root")
def test_remove_tree_stays_on_one_filesystem(tmp_path, outside):
    from course_grader.sandbox import namespaces

    folder = tmp_path / "with-mount"
    mounted = folder / "a" / "mounted"
    mounted.mkdir(parents=True)
    namespaces.mount_tmpfs(mounted, 1)
    try:
        (mounted / "not-mine.txt").write_text("on another filesystem")
        (folder / "a" / "mine.txt").write_text("x")
        problems = untrusted.remove_tree(folder)
        assert "another filesystem" in problems[0] and "a: could not be removed" in problems[1], problems
        assert (mounted / "not-mine.txt").exists() and not (folder / "a" / "mine.txt").exists()
    finally:
        namespaces.umount(mounted)
    assert untrusted.remove_tree(folder) == [] and not folder.exists()
