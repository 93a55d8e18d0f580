"""What a learner hands in is data: read it without following a link or opening anything but a file.

A submission folder, and even more the exchange's inbound folder (every learner can write there), may
hold symbolic links (relative or absolute, to files or folders, dangling), hard links to files
elsewhere (the instructor's source notebook is one `ln` away), FIFOs (opening one waits forever),
sockets, devices, and names that are not UTF-8 (a Latin-1 archive). This module is the only way the
grader looks at such a tree:

    scan_tree(root)          every entry, by lstat through folder descriptors opened with O_NOFOLLOW:
                             nothing is followed, nothing but folders is opened
    TreeScan.problem(entry)  what is wrong with an entry (link, hard link, special file), or None
    read_file(scan, entry)   the bytes of one regular file, re-opened with O_NOFOLLOW at every step
                             and checked to be the very file the scan saw
    fingerprint(scan)        a digest of the tree for idempotent re-runs (names as bytes)
    copy_tree(src, dest)     the exchange -> submitted/ copy of `course collect`: regular files and
                             folders only; everything else is refused and listed in the copy
    display(name)            a name as printable text ("caf\\xe9.py"), for reports and the CSV
    remove_tree(path)        the grader's one way to delete what a kernel or a learner wrote (runtime
                             and home folders, staged and submission copies): iterative, through
                             folder descriptors, follows no link, stays on one filesystem, never raises

A name is kept as Python keeps undecodable file names (os.fsdecode: surrogate escapes) and turned
back into its bytes (os.fsencode) wherever it is hashed or compared; it is printed only through
`display`.
"""

from __future__ import annotations

import dataclasses
import errno
import fnmatch
import functools
import hashlib
import os
import stat
from pathlib import Path

from .messages import CollectRefusals

MAX_ENTRIES = 10_000  # a submission is a notebook and a few files; the rest is not inspected
MAX_DEPTH = 32
CHUNK = 1 << 20
# Written by `course collect` into submitted/<learner>/<id>/: what it refused to copy from the exchange.
COLLECT_REFUSALS = "collect_refused.json"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: should a FIFO be swapped in after the scan, opening it does not wait (fstat then refuses it).
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "folder",
    stat.S_IFLNK: "symbolic link",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


class UnsafePath(OSError):
    """An entry the grader will not open: a link, a special file, or a file that changed under it."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def display(name: str | bytes) -> str:
    """A file name as printable text: undecodable bytes as \\xNN, control characters escaped."""
    raw = name if isinstance(name, bytes) else os.fsencode(name)
    text = raw.decode("utf-8", errors="backslashreplace")
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def is_utf8(name: str) -> bool:
    try:
        os.fsencode(name).decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry of a tree, as lstat saw it."""

    path: str  # relative, "/"-separated, undecodable bytes as surrogate escapes
    kind: str  # "file", "folder", "symbolic link", "FIFO", "socket", "... device", "unknown"
    size: int
    nlink: int
    inode: tuple[int, int]  # (st_dev, st_ino)
    uid: int
    mtime_ns: int
    target: str = ""  # where a symbolic link points (read, never followed)

    @property
    def shown(self) -> str:
        return display(self.path)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))


@dataclasses.dataclass
class TreeScan:
    root: Path
    entries: list[Entry]
    unreadable: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (folder, why)
    truncated: str = ""  # why the scan stopped early; "" when every entry was seen

    def __post_init__(self):
        self._by_path = {entry.path: entry for entry in self.entries}
        self._names_inside: dict[tuple[int, int], int] = {}
        for entry in self.entries:
            if entry.kind == "file":
                self._names_inside[entry.inode] = self._names_inside.get(entry.inode, 0) + 1

    def get(self, path: str) -> Entry | None:
        return self._by_path.get(path)

    def problem(self, entry: Entry) -> tuple[str, str] | None:
        """(finding code, message) for an entry the grader must not follow or open, else None."""
        if entry.kind == "symbolic link":
            return "symlink", f"{entry.shown} is a symbolic link to {display(entry.target)}; it was not followed"
        if entry.kind not in ("file", "folder"):
            return "special-file", f"{entry.shown} is a {entry.kind}, not a file; it was not opened"
        if entry.kind == "file" and entry.nlink > self._names_inside.get(entry.inode, 0):
            inside = self._names_inside.get(entry.inode, 0)
            return "hard-link", (
                f"{entry.shown} is a hard link to a file outside the submission ({entry.nlink} names, "
                f"{inside} inside; owner uid {entry.uid}); it was not read"
            )
        return None

    def files(self) -> list[Entry]:
        """The regular files that may be read."""
        return [entry for entry in self.entries if entry.kind == "file" and self.problem(entry) is None]

    def problems(self) -> list[tuple[Entry, str, str]]:
        return [(entry, *found) for entry in self.entries if (found := self.problem(entry)) is not None]


def kind_of(mode: int) -> str:
    """The kind of entry a mode describes: "file", "folder", "symbolic link", "FIFO", "socket", "... device"."""
    return _KINDS.get(stat.S_IFMT(mode), "unknown")


def open_folder(path: str | os.PathLike) -> int:
    """A descriptor of a real folder (never through a link at the last step); UnsafePath otherwise."""
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                info = os.lstat(path)
            except OSError:
                raise UnsafePath(error.errno, f"{display(os.fspath(path))} is not a folder") from None
            if stat.S_ISLNK(info.st_mode):
                target = display(os.readlink(path))
                raise UnsafePath(
                    error.errno, f"{display(os.fspath(path))} is a symbolic link to {target}; it was not followed"
                ) from None
            raise UnsafePath(
                error.errno, f"{display(os.fspath(path))} is a {kind_of(info.st_mode)}, not a folder"
            ) from None
        raise


def scan_tree(root: str | os.PathLike, *, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH) -> TreeScan:
    """Every entry under `root`, sorted by name (as bytes), by lstat; no link is followed.

    Folders are opened with O_NOFOLLOW and walked through their descriptors, so that a folder swapped
    for a link while the scan runs is refused rather than followed. Raises UnsafePath if `root`
    itself is a link or not a folder.
    """
    entries: list[Entry] = []
    unreadable: list[tuple[str, str]] = []
    truncated: list[str] = []
    top = open_folder(root)

    def walk(folder_fd: int, prefix: str, depth: int) -> None:
        with os.scandir(folder_fd) as listing:
            children = sorted(listing, key=lambda child: os.fsencode(child.name))
        for child in children:
            if len(entries) >= max_entries:
                truncated.append(f"more than {max_entries} entries; the rest was not inspected")
                return
            relative = prefix + child.name
            info = child.stat(follow_symlinks=False)
            kind = kind_of(info.st_mode)
            target = ""
            if kind == "symbolic link":
                try:
                    target = os.fsdecode(os.readlink(child.name, dir_fd=folder_fd))
                except OSError as error:
                    target = f"(unreadable: {error.strerror})"
            entries.append(
                Entry(
                    relative,
                    kind,
                    info.st_size,
                    info.st_nlink,
                    (info.st_dev, info.st_ino),
                    info.st_uid,
                    info.st_mtime_ns,
                    target,
                )
            )
            if kind != "folder":
                continue
            if depth + 1 >= max_depth:
                truncated.append(f"folders nested more than {max_depth} deep; the deeper ones were not inspected")
                continue
            try:
                inner = os.open(child.name, _DIR_FLAGS, dir_fd=folder_fd)
            except OSError as error:
                unreadable.append((relative, error.strerror or str(error)))
                continue
            try:
                walk(inner, relative + "/", depth + 1)
            except OSError as error:
                unreadable.append((relative, error.strerror or str(error)))
            finally:
                os.close(inner)

    try:
        walk(top, "", 0)
    finally:
        os.close(top)
    return TreeScan(Path(root), entries, unreadable, truncated[0] if truncated else "")


def open_file(scan: TreeScan, entry: Entry) -> int:
    """A read descriptor of `entry`, reached from the scan's root with O_NOFOLLOW at every step.

    Refuses (UnsafePath) anything the scan did not see as a plain file of this tree, and a file that
    is no longer the one the scan saw (replaced by a link, a FIFO or another file since).
    """
    found = scan.problem(entry)
    if entry.kind != "file" or found is not None:
        raise UnsafePath(errno.EPERM, found[1] if found else f"{entry.shown} is a {entry.kind}, not a file")
    *folders, name = entry.parts
    fd = open_folder(scan.root)
    try:
        for folder in folders:
            inner = os.open(folder, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        file_fd = os.open(name, _FILE_FLAGS, dir_fd=fd)
    except OSError as error:
        raise UnsafePath(error.errno, f"{entry.shown} could not be opened safely ({error.strerror})") from None
    finally:
        os.close(fd)
    info = os.fstat(file_fd)
    if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != entry.inode or info.st_nlink != entry.nlink:
        os.close(file_fd)
        raise UnsafePath(errno.EPERM, f"{entry.shown} changed while it was being read; it was not read")
    return file_fd


def read_file(scan: TreeScan, entry: Entry, limit: int | None = None) -> bytes:
    """The bytes of one regular file of the tree (at most `limit` + 1, so that a caller can tell it is over)."""
    fd = open_file(scan, entry)
    try:
        chunks, total = [], 0
        while limit is None or total <= limit:
            chunk = os.read(fd, CHUNK if limit is None else min(CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fingerprint(scan: TreeScan, digest=None):
    """A sha256 of the tree: every readable file's name and content, every other entry's name and kind.

    For a tree of plain files it equals the grader's earlier fingerprint (name, NUL, content hash in
    path order), so that existing grades are not invalidated; links and special files enter by their
    description, never by what they point to.
    """
    digest = digest or hashlib.sha256()
    for entry in scan.entries:
        name = os.fsencode(entry.path)
        if entry.kind == "folder":
            continue
        if entry.kind == "file" and scan.problem(entry) is None:
            content = hashlib.sha256()
            fd = open_file(scan, entry)
            try:
                while chunk := os.read(fd, CHUNK):
                    content.update(chunk)
            finally:
                os.close(fd)
            digest.update(name + b"\0")
            digest.update(content.digest())
        else:
            digest.update(
                b"\0"
                + entry.kind.encode()
                + b"\0"
                + name
                + b"\0"
                + os.fsencode(entry.target)
                + f"\0{entry.size}\0{entry.nlink}\0{entry.mtime_ns}".encode()
            )
    for folder, why in scan.unreadable:
        digest.update(b"\0unreadable\0" + os.fsencode(folder) + why.encode())
    if scan.truncated:
        digest.update(b"\0truncated\0" + scan.truncated.encode())
    return digest


# ------------------------------------------------------------------------------------------------
# The copy from the exchange (course collect).
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class CopyResult:
    copied: list[str]  # relative paths of the files copied
    refused: list[dict]  # {"path", "kind", "reason"}: what was left in the exchange


def _ignored(name: str, kind: str, exclude, include) -> bool:
    """nbgrader's CourseDirectory.ignore / include globs, applied as its own collect does."""
    if exclude and any(fnmatch.fnmatch(name, pattern) for pattern in exclude):
        return True
    return kind == "file" and bool(include) and not any(fnmatch.fnmatch(name, pattern) for pattern in include)


def copy_tree(
    src: str | os.PathLike,
    dest: str | os.PathLike,
    *,
    exclude=(),
    include=("*",),
    max_file_bytes: int | None = None,
    max_total_bytes: int | None = None,
) -> CopyResult:
    """Copy a learner's folder from the exchange: folders and regular files only, never through a link.

    Symbolic links, hard links to files outside the folder, FIFOs, sockets and devices are refused
    (listed in the result, not copied); so is the whole folder when `src` is itself a link or larger
    than `max_total_bytes`. A name `COLLECT_REFUSALS` at the top is reserved for the list, which the
    caller writes. `dest` must not exist.
    """
    dest = Path(dest)
    try:
        scan = _scan_submission(src)
    except UnsafePath as error:
        dest.mkdir(parents=True)
        return CopyResult([], [{"path": ".", "kind": "submission", "reason": f"{error}; nothing was collected"}])
    refused = _scan_refusals(scan)
    plan, refused_entries = _plan_copy(scan, exclude, include, max_file_bytes)
    refused += refused_entries
    total = sum(entry.size for entry in plan if entry.kind == "file")
    dest.mkdir(parents=True)
    if max_total_bytes is not None and total > max_total_bytes:
        return CopyResult(
            [],
            refused
            + [
                {
                    "path": ".",
                    "kind": "submission",
                    "reason": f"the submission has {total} bytes, more than the {max_total_bytes} "
                    "allowed; nothing was collected",
                }
            ],
        )
    copied = []
    for entry in plan:
        target = dest / entry.path
        if entry.kind == "folder":
            target.mkdir()
            continue
        try:
            _copy_file(scan, entry, target, max_file_bytes)
        except UnsafePath as error:
            refused.append({"path": entry.shown, "kind": entry.kind, "reason": error.strerror})
            continue
        copied.append(entry.path)
    return CopyResult(copied, refused)


def _scan_submission(src: str | os.PathLike) -> TreeScan:
    """The scan of the submission folder; UnsafePath when `src` itself is a link or not a folder."""
    info = os.lstat(src)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePath(errno.ELOOP, f"the submission folder is a symbolic link to {display(os.readlink(src))}")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(errno.ENOTDIR, f"the submission is a {kind_of(info.st_mode)}, not a folder")
    return scan_tree(src)


def _scan_refusals(scan: TreeScan) -> list[dict]:
    """What the scan itself could not look at: unreadable folders, and whatever lay past its limits."""
    refused = [
        {"path": display(folder), "kind": "folder", "reason": f"{display(folder)} could not be read ({why})"}
        for folder, why in scan.unreadable
    ]
    if scan.truncated:
        refused.append({"path": ".", "kind": "submission", "reason": f"the submission holds {scan.truncated}"})
    return refused


def _plan_copy(scan: TreeScan, exclude, include, max_file_bytes: int | None) -> tuple[list[Entry], list[dict]]:
    """What to copy and what is refused, in the scan's order; nothing under a folder ignored or refused before it."""
    skipped_under: list[str] = []
    plan: list[Entry] = []
    refused: list[dict] = []
    for entry in scan.entries:
        if any(entry.path.startswith(prefix + "/") for prefix in skipped_under):
            continue
        if _ignored(entry.parts[-1], entry.kind, exclude, include):
            if entry.kind == "folder":
                skipped_under.append(entry.path)
            continue
        found = _copy_problem(scan, entry, max_file_bytes)
        if found is not None:
            refused.append({"path": entry.shown, "kind": entry.kind, "reason": found[1]})
            if entry.kind == "folder":
                skipped_under.append(entry.path)
            continue
        plan.append(entry)
    return plan, refused


def _copy_problem(scan: TreeScan, entry: Entry, max_file_bytes: int | None) -> tuple[str, str] | None:
    """(code, message) for an entry not to copy, else None: the scan's problem, the reserved name, the size limit."""
    found = scan.problem(entry)
    if entry.path == COLLECT_REFUSALS:
        return "reserved-name", f"{entry.shown} is a name the collect keeps for its own list; not copied"
    if found is None and entry.kind == "file" and max_file_bytes is not None and entry.size > max_file_bytes:
        return "too-large", f"{entry.shown} has {entry.size} bytes, more than the {max_file_bytes} allowed; not copied"
    return found


def _copy_file(scan: TreeScan, entry: Entry, target: Path, max_file_bytes: int | None) -> None:
    """Copy one file to a new `target`; UnsafePath, and no `target`, if it is not the file scanned or grows too big."""
    source_fd = open_file(scan, entry)
    try:
        out_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            written = 0
            while chunk := os.read(source_fd, CHUNK):
                written += len(chunk)
                if max_file_bytes is not None and written > max_file_bytes:
                    raise UnsafePath(errno.EFBIG, f"{entry.shown} grew past {max_file_bytes} bytes while it was copied")
                _write_all(out_fd, chunk)
        finally:
            os.close(out_fd)
        os.utime(target, ns=(entry.mtime_ns, entry.mtime_ns))
    except UnsafePath:
        target.unlink(missing_ok=True)
        raise
    finally:
        os.close(source_fd)


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``: os.write may write less than it was given (a signal, a nearly full disk)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_refusals(dest: str | os.PathLike, source_name: str, refused: list[dict]) -> Path:
    """The list of what `course collect` left in the exchange, next to what it copied."""
    path = Path(dest) / COLLECT_REFUSALS
    CollectRefusals(refused=refused, collected_from=display(source_name)).write(path, indent=1)
    return path


# ------------------------------------------------------------------------------------------------
# Removal of a tree a kernel or a learner wrote.
# ------------------------------------------------------------------------------------------------
MAX_REMOVAL_PROBLEMS = 20  # listed one by one; the rest are counted
_PATH_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclasses.dataclass
class _Level:
    """One folder on the way down: its name in its parent, its identity, what is left to enter."""

    name: str | None
    ident: tuple[int, int]
    pending: list[str] | None = None
    skip: set[str] = dataclasses.field(default_factory=set)


def _writable(fd: int) -> None:
    """Give a folder of the tree (by descriptor) its owner's rights back, so that it can be emptied."""
    os.chmod(fd, 0o700)


def _open_walk_folder(name: str | os.PathLike, dir_fd: int | None) -> int:
    """A descriptor of the folder `name` (never through a link); a folder with mode 000 gets 0700 first,
    changed through an O_PATH descriptor of the folder itself, so that no link is followed either."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        handle = os.open(name, _PATH_FLAGS, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
        finally:
            os.close(handle)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _retry_writable(operation, fd: int) -> None:
    """`operation()`, once more after making folder `fd` writable if it was refused for permissions."""
    try:
        operation()
    except PermissionError:
        _writable(fd)
        operation()


def remove_tree(path: str | os.PathLike, *, keep_root: bool = False) -> list[str]:
    """Delete `path` and everything under it, or only what is under it (`keep_root`); what could not be
    deleted, as printable lines ([] when everything is gone). Never raises for what it finds.

    Everything a kernel or a learner wrote is hostile data: a chain of folders 100,000 deep (a
    recursive walk, such as Python's shutil.rmtree before 3.13, raises RecursionError, and a path that
    long cannot even be named), names that are not UTF-8 or hold newlines, folders with mode 000,
    links to anywhere. The walk is a loop with one open folder at a time: it goes down by name with
    O_NOFOLLOW and up through "..", checked to be the folder it came from (a tree moved under it stops
    the walk). Links and other non-folders are unlinked, never followed; folders the grader owns but
    may not enter or change get mode 0700 first; a folder of another filesystem (a mount point) is
    left and reported.
    """
    problems: list[str] = []
    count = [0]

    def report(where: str, why: str) -> None:
        count[0] += 1
        if len(problems) < MAX_REMOVAL_PROBLEMS:
            problems.append(f"{display(where) or '.'}: {why}")

    root = os.fspath(path)
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return []
    except OSError as error:
        return [f"{display(root)}: {error.strerror or error}"]
    if not stat.S_ISDIR(info.st_mode):
        if keep_root:
            return [f"{display(root)} is a {kind_of(info.st_mode)}, not a folder; it was left"]
        try:
            os.unlink(root)
            return []
        except OSError as error:
            return [f"{display(root)}: {error.strerror or error}"]
    try:
        fd = _open_walk_folder(root, None)
    except OSError as error:
        return [f"{display(root)}: could not be opened ({error.strerror or error})"]
    _remove_under(fd, report)
    # Only when nothing was reported: a walk that stopped or left anything has reported it.
    if not keep_root and not count[0]:
        try:
            os.rmdir(root)
        except OSError as error:
            report(root, f"could not be removed ({error.strerror or error})")
    return _with_count(problems, count[0])


def _remove_under(fd: int, report) -> None:
    """remove_tree's walk: everything under folder `fd` (closed at the end); a walk that stops has reported why."""
    device = os.fstat(fd).st_dev
    stack = [_Level(None, (device, os.fstat(fd).st_ino))]
    shown: list[str] = []  # the names from the root down to the current folder, for messages
    try:
        while stack:
            level = stack[-1]
            if not level.pending:
                # (Again) unlink every non-folder here; entries may be missed while a folder is
                # changed under a listing, so a folder is done only when a listing finds nothing.
                folders, changed = _unlink_non_folders(fd, level, shown, report)
                if folders or changed:
                    level.pending = folders
                    continue
                done = stack.pop()
                if not stack:
                    break
                parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                ident = os.fstat(parent)
                os.close(fd)
                fd = parent
                shown.pop()
                if (ident.st_dev, ident.st_ino) != stack[-1].ident:
                    report("/".join(shown), "the tree was moved while it was being removed; the removal stopped")
                    return
                try:
                    _retry_writable(functools.partial(os.rmdir, done.name, dir_fd=fd), fd)
                except OSError as error:
                    stack[-1].skip.add(done.name)
                    report("/".join([*shown, done.name]), f"could not be removed ({error.strerror or error})")
                continue
            name = level.pending.pop()
            entered = _enter_pending(fd, name, level, device, shown, report)
            if entered is None:
                continue
            child, info = entered
            os.close(fd)
            fd = child
            stack.append(_Level(name, (info.st_dev, info.st_ino)))
            shown.append(name)
    except OSError as error:
        report("/".join(shown), f"the removal stopped ({error.strerror or error})")
    finally:
        os.close(fd)


def _enter_pending(
    fd: int, name: str, level: _Level, device: int, shown: list[str], report
) -> tuple[int, os.stat_result] | None:
    """Descriptor and fstat of folder `name`; None if gone, no longer a folder (unlinked) or not entered (reported)."""
    try:
        child = _open_walk_folder(name, fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):  # no longer a folder: unlink what it is now
            try:
                os.unlink(name, dir_fd=fd)
                return None
            except OSError as inner:
                error = inner
        level.skip.add(name)
        report("/".join([*shown, name]), f"could not be entered ({error.strerror or error})")
        return None
    info = os.fstat(child)
    if info.st_dev != device:
        os.close(child)
        level.skip.add(name)
        report("/".join([*shown, name]), "another filesystem is mounted there; it was left")
        return None
    return child, info


def _unlink_non_folders(fd: int, level: _Level, shown: list[str], report) -> tuple[list[str], bool]:
    """Unlink every entry of folder `fd` that is not a folder (a link is unlinked, never followed);
    (the folders in it, whether anything was unlinked)."""
    folders, changed = [], False
    entries = []
    with os.scandir(fd) as listing:
        for entry in listing:
            try:
                entries.append((entry.name, entry.is_dir(follow_symlinks=False)))
            except OSError:  # gone, or not statable: unlinking says which
                entries.append((entry.name, False))
    for name, is_folder in entries:
        if name in level.skip:
            continue
        if is_folder:
            folders.append(name)
            continue
        try:
            _retry_writable(functools.partial(os.unlink, name, dir_fd=fd), fd)
            changed = True
        except FileNotFoundError:
            changed = True
        except OSError as error:
            level.skip.add(name)
            report("/".join([*shown, name]), f"could not be removed ({error.strerror or error})")
    return folders, changed


def _with_count(problems: list[str], count: int) -> list[str]:
    if count > len(problems):
        return [*problems, f"... and {count - len(problems)} more"]
    return problems
