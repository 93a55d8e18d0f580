"""The instructor's grader: nbgrader's cycle, confined autograding with the hidden tests judged outside the
learner's kernel, feedback and reports. Its parts are layers, each importing only those below it (checked in
`make test`; docs/architecture.md):

    cli | attack_table   `course release | collect | grade | export | cycle-demo ...`; the attack test's table
    check                `course check <id>`: a learner who works alone gets the full verdict on their own copy
    autograde            `course grade`: every submission in its own confined kernel, in parallel, one CSV row
                         each, through the stages in a row
    stages/              select, admit, run, publish; records: what the stages hand each other and keep
    exchange/            nbgrader's cycle (pipeline, collect, export), feedback, the formgrader, Validate
    judging/             preflight and static checks before code runs; nbgrader's Execute hardened; the judge
    sandbox/             the confinement of learners' kernels: the manager, warm kernels, bwrap, namespaces
    guard/               loaded into every learner's kernel (standard library only): output limits, the tests'
                         references, the judge's narrow channel
    ground/              messages between processes, layout, notebooks, untrusted files, reports, rendering

Each sub-package's own docstring lists its modules. The tests' submissions and the load test
(`make grade-load`) live in tests/grading_support/. Only `layout` is imported eagerly: nbgrader and friends take
seconds to import.
"""

from .ground.layout import Assignment, CourseLayout, GradingSettings, discover_assignments

__all__ = ["Assignment", "CourseLayout", "GradingSettings", "discover_assignments", "grade", "GradeRecord"]


def __getattr__(name):
    if name in ("grade", "GradeRecord", "GradingRun"):
        from . import autograde

        return getattr(autograde, name)
    raise AttributeError(f"module 'course_grader' has no attribute {name!r}")
