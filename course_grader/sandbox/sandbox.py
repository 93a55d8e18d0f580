"""Confinement of learners' kernels during grading (Linux; standard library only).

Three kinds of process take part, so that no learner code runs with the grader's rights and a
kernel still starts in well under a second with NumPy and PyTorch already imported:

manager     one per grading run (`python -I sandbox.py serve CONFIG`), with the grader's rights. It
            chooses the strongest profile this machine allows (below), creates each kernel's cgroup,
            keeps kernels *warm*, and serves them on a unix socket that only the grader's user can
            open. It enforces the wall-clock limit, records how each kernel ended (its memory kill
            included), and makes sure that nothing of a kernel is left before its slot is reused.
warm kernel a process already inside its confinement (sandbox, cgroup, uid, limits) that has imported
            IPython, NumPy and PyTorch, every module the assignments' tests import or reach, and
            the kernel guard, and has let the guard take its snapshot of the tests' references
            (kernel_guard.py). It waits for one assignment (a connection file, limits, support
            files, a log), then becomes an IPython kernel. With bubblewrap one warm kernel per
            worker slot is started ahead, while the previous submission is graded; with the
            fallback it is forked from the manager (which imported and took the snapshot once) on
            demand.
launcher    what jupyter_client starts for each kernel (the kernelspec's argv is
            `python -I -S sandbox.py launch {connection_file}`). It asks the manager for a kernel
            and mirrors that kernel's life: terminate goes in, the exit code comes out. Interrupts
            travel as Jupyter messages (the kernelspec's interrupt_mode is "message").

Profiles, strongest first (the probe tries each and the report names the one in force):

bwrap-root       bubblewrap (see bwrap.py) run by root; the kernel becomes a numeric uid of its own
bwrap-user       bubblewrap without root, in a user namespace with no capabilities
namespaces-*     where bubblewrap is missing: the hand-written namespaces of namespaces.py (also a
                 private /tmp and /dev/shm and an own PID namespace per kernel)
limits only      resource limits and nothing else (reported loudly)

Memory is limited by a cgroup where the grader may create one, else by RLIMIT_DATA (limits.py).
The CPU-time budget is the whole kernel's where its cgroup counts CPU time (every process and
thread, forked children included; the manager stops the kernel when it is spent), else RLIMIT_CPU's
per process, which a forked child escapes (the report says which).

A kernel answers in about half a second once warm (measured on a busy 2-core machine: bwrap-root
0.56-0.67 s, bwrap-user 0.55-0.57 s, namespaces-root 0.61-0.75 s, namespaces-user 0.66-0.71 s):
the zygote's preloading is kept, since importing PyTorch alone takes seconds.
"""

from __future__ import annotations

import os
import sys

if not __package__:  # run as a script (`python -I sandbox.py ...`, also inside a sandbox): find the package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    __package__ = "course_grader.sandbox"  # noqa: A001  (so that the imports below are the package's own)

from .launcher import REQUEST_ENV, SOCKET_ENV, is_warm, release  # noqa: E402,F401  (the grader's side)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "serve":
        from ..ground.messages import ManagerConfig
        from .manager import Manager

        Manager(ManagerConfig.read(argv[1])).serve()
        return 0
    if len(argv) == 2 and argv[0] == "warm":
        from .warmkernel import warm

        warm(int(argv[1]))
        return 1
    if len(argv) == 2 and argv[0] == "probe":
        from .probes import probe

        probe(argv[1])
        return 0
    if len(argv) == 2 and argv[0] == "launch":
        from .launcher import launch

        return launch(argv[1])
    print("usage: sandbox.py serve CONFIG | warm FD | probe JSON | launch CONNECTION_FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
