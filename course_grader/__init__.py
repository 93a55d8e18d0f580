"""Instructor tooling around nbgrader: release, the exchange cycle, confined autograding, reports.

    layout         where everything lives; assignments discovered from solutions/
    pipeline       nbgrader's cycle step by step (generate, release, fetch, submit, collect, feedback, export)
    intake         learners' folders and the exchange read as data (no link followed, only regular files opened)
    collect        nbgrader's collect with that copy (links, FIFOs... stay in the exchange and are listed)
    preflight      reading and repairing a submission before anything runs; static checks of learner code
    autograde      `course grade`: every submission in its own confined kernel, in parallel, one CSV row each,
                   as four stages:
      grade_select     which submissions run, which rows are kept from the last run, and why
      grade_intake     each selected submission's preflight: a job to execute, or an error row
      grade_execute    the jobs in forked workers (nbgrader's Autograde), in one sandbox session
      grade_collect    the rows: scores, manual grades, names, messages, feedback, state, CSV and report
    grade_records  the rows (GradeRecord), the state between runs, each assignment's points table
    session        one run's sandbox: the manager, the kernelspec, the kernels' uids, slot and kernel folders
    sandbox        the confinement (namespaces, limits, an unprivileged uid) and its processes: manager.py,
                   warmkernel.py, launcher.py, probes.py, bwrap.py, namespaces.py, limits.py
    messages       every file and JSON line those processes hand each other, with its fields
    kernel_guard   installed in every graded kernel: output limits (guard_output); the tests' references
                   restored before and checked after each test (guard_references); threads and trace
                   functions refused to notebook code
    execute        nbgrader's Execute step hardened (canaries in test cells, the guard's verdicts, dead
                   kernels, timeouts)
    report         grades CSV, Markdown report, terminal summary
    feedback       what a failing test shows a learner (never a hidden test's code); feedback kept current
    safe_html      learners' Markdown and HTML sanitised (nh3) in the feedback and the formgrader
    formgrader     learners' names, manual-grading flags kept, no unconfined autograde
    server_extension  the formgrader's Autograde button runs `course grade`
    cli            `course release | collect | grade | export | cycle-demo`
    attack_table   the attack test's table (build/grading/) and `course attack-table --write-doc`

The tests' submissions and the load test (`make grade-load`) live in tests/grading_support/.
Only `layout` is imported eagerly: nbgrader and friends take seconds to import.
"""

from .ground.layout import Assignment, CourseLayout, GradingSettings, discover_assignments

__all__ = ["Assignment", "CourseLayout", "GradingSettings", "discover_assignments", "grade", "GradeRecord"]


def __getattr__(name):
    if name in ("grade", "GradeRecord", "GradingRun"):
        from . import autograde

        return getattr(autograde, name)
    raise AttributeError(f"module 'course_grader' has no attribute {name!r}")
