"""Instructor tooling around nbgrader: release, the exchange cycle, confined autograding, reports.

    layout         where everything lives; assignments discovered from solutions/
    pipeline       nbgrader's cycle step by step (generate, release, fetch, submit, collect, feedback, export)
    preflight      reading and repairing a submission before anything runs; static checks of learner code
    autograde      `course grade`: every submission in its own confined kernel, in parallel, one CSV row each
    sandbox        the confinement (namespaces, limits, an unprivileged uid) and the kernel launcher
    kernel_guard   installed in every graded kernel: output limits and a tripwire for monkeypatching
    execute        nbgrader's Execute step hardened (canaries in test cells, dead kernels, timeouts)
    report         grades CSV, Markdown report, terminal summary
    cli            `course release | collect | grade | export | cycle-demo`
    load_test      60 generated submissions graded in one run, timed

Only `layout` is imported eagerly: nbgrader and friends take seconds to import.
"""
from .layout import Assignment, CourseLayout, GradingSettings, discover_assignments

__all__ = ["Assignment", "CourseLayout", "GradingSettings", "discover_assignments", "grade", "GradeRecord"]


def __getattr__(name):
    if name in ("grade", "GradeRecord", "GradingRun"):
        from . import autograde

        return getattr(autograde, name)
    raise AttributeError(f"module 'course_utils.grading' has no attribute {name!r}")
