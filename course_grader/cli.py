"""Command line for the instructor's side of the course (`course <subcommand>` calls `main`).

release      regenerate release/<id> from solutions/<id> for every assignment (--publish: also
             put them in the exchange for learners to fetch)
collect      move learners' submissions from the exchange into submitted/
grade        autograde everything collected (confined, --workers N in parallel), write
             feedback, the grades CSV and the report, print a summary per learner
export       nbgrader's own grades CSV
fetch/submit what a learner does (for demonstrations and tests)
cycle-demo   the whole cycle for two learners in a temporary copy of the course
check        (learner) grade your own copy of an exercise with the hidden tests, as in a class
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .ground.layout import CourseLayout


def _default_course_dir() -> Path:
    here = Path.cwd()
    if (here / "nbgrader_config.py").is_file():
        return here
    repository = Path(__file__).resolve().parents[1]
    return repository if (repository / "nbgrader_config.py").is_file() else here


def _layout(args) -> CourseLayout:
    return CourseLayout.from_directory(
        args.course_dir or _default_course_dir(),
        exchange=args.exchange,
        course_id=args.course_id,
        output_dir=getattr(args, "output", None),
    )


def _assignment_ids(layout: CourseLayout, wanted: list[str] | None) -> list[str]:
    known = [assignment.id for assignment in layout.assignments()]
    if not known:
        raise SystemExit(f"no assignments found in {layout.source_dir}")
    for assignment_id in wanted or []:
        if assignment_id not in known:
            raise SystemExit(f"unknown assignment {assignment_id!r}; known: {', '.join(known)}")
    return list(wanted) if wanted else known


def command_release(args) -> int:
    from .exchange import pipeline

    layout = _layout(args)
    wanted = _assignment_ids(layout, args.assignment)
    started = time.monotonic()
    pipeline.generate_release(layout, wanted)
    for assignment_id in wanted:
        print(f"release/{assignment_id} regenerated")
        if args.publish:
            pipeline.release_assignment(layout, assignment_id)
            print(f"  published to {layout.exchange_dir / layout.course_id / 'outbound' / assignment_id}")
    print(f"done in {time.monotonic() - started:.1f} s")
    return 0


def command_collect(args) -> int:
    from .exchange import pipeline

    layout = _layout(args)
    for assignment_id in _assignment_ids(layout, args.assignment):
        learners = pipeline.collect(layout, assignment_id, log=lambda line: print(f"  {line}"))
        print(f"{assignment_id}: {len(learners)} submission(s) in submitted/")
    return 0


def command_grade(args) -> int:
    from .autograde import grade
    from .ground.report import summary_lines

    layout = _layout(args)
    run = grade(
        layout,
        workers=args.workers,
        cell_timeout=args.timeout,
        force=args.force,
        students=args.student,
        assignment_ids=args.assignment,
        feedback=not args.no_feedback,
        isolation=args.isolation,
        uid_base=args.uid_base,
    )
    print()
    print("\n".join(summary_lines(run.records)))
    print(f"\nsandbox: {run.sandbox}")
    print(f"grades:  {run.csv_path}\nreport:  {run.report_path}\nwall time: {run.wall_seconds:.1f} s")
    errors = sum(record.status != "graded" for record in run.records)
    return 1 if args.strict and errors else 0


def command_export(args) -> int:
    from .exchange.pipeline import export_nbgrader_csv

    layout = _layout(args)
    destination = Path(args.to or layout.output_dir / "nbgrader_grades.csv")
    destination.parent.mkdir(parents=True, exist_ok=True)
    print(export_nbgrader_csv(layout, destination))
    return 0


def command_fetch(args) -> int:
    from .exchange.pipeline import fetch_assignment

    print(fetch_assignment(_layout(args), args.assignment_id, args.learner_dir))
    return 0


def command_submit(args) -> int:
    from .exchange.pipeline import submit

    submit(_layout(args), args.assignment_id, args.student_id, args.learner_dir)
    print(f"submitted {args.assignment_id} as {args.student_id}")
    return 0


def command_cycle_demo(args) -> int:
    """release -> fetch -> submit (one solved, one untouched) -> collect -> grade, in a temporary course."""
    from .autograde import grade
    from .exchange import pipeline
    from .ground import notebooks
    from .ground.report import summary_lines

    source = _layout(args)
    assignment = source.assignment(args.assignment) if args.assignment else source.assignments()[0]
    workdir = Path(tempfile.mkdtemp(prefix="course-cycle-"))
    try:
        course = workdir / "course"
        course.mkdir()
        shutil.copytree(assignment.source_dir, course / "solutions" / assignment.id)
        if (source.root / "nbgrader_config.py").is_file():
            shutil.copy(source.root / "nbgrader_config.py", course)
        layout = CourseLayout.from_directory(course, exchange=workdir / "exchange", course_id=source.course_id)
        pipeline.generate_release(layout, [assignment.id])
        pipeline.release_assignment(layout, assignment.id)
        print(f"released {assignment.id} to {layout.exchange_dir}")
        model = notebooks.solution_answers(notebooks.load_json(assignment.main_notebook))
        for learner, solved in (("learner-solved", True), ("learner-blank", False)):
            folder = pipeline.fetch_assignment(layout, assignment.id, workdir / learner)
            notebook_path = folder / f"{assignment.main_notebook.stem}.ipynb"
            if solved:
                notebooks.save_json(notebooks.fill_in(notebooks.load_json(notebook_path), model), notebook_path)
            pipeline.submit(layout, assignment.id, learner, workdir / learner)
            print(f"{learner} fetched and submitted")
        print(f"collected: {', '.join(pipeline.collect(layout, assignment.id))}")
        run = grade(layout, workers=args.workers, isolation=args.isolation)
        print("\n".join(summary_lines(run.records)))
        print(f"sandbox: {run.sandbox}\nwall time: {run.wall_seconds:.1f} s")
        if args.keep:
            print(f"kept: {workdir}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def command_check(args) -> int:
    from .check import check

    source = _layout(args)
    root = source.root
    learner_copy = Path(args.path) if args.path else root / "exercises" / args.assignment_id
    return check(source, args.assignment_id, learner_copy, root / "build" / "check" / args.assignment_id, args.keep)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description="Instructor tools: release, collect, grade.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course-dir", help="course directory (default: the repository root)")
    common.add_argument("--exchange", help="exchange folder (default: $COURSE_EXCHANGE or <course>/exchange)")
    common.add_argument("--course-id", help="nbgrader course id (default: from nbgrader_config.py)")
    sub = parser.add_subparsers(dest="command", required=True)

    release = sub.add_parser("release", parents=[common], help="regenerate release/ from solutions/")
    release.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    release.add_argument("--publish", action="store_true", help="also release to the exchange")
    release.set_defaults(run=command_release)

    collect = sub.add_parser("collect", parents=[common], help="collect submissions from the exchange")
    collect.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    collect.set_defaults(run=command_collect)

    grade_parser = sub.add_parser("grade", parents=[common], help="autograde everything collected")
    grade_parser.add_argument(
        "--workers",
        type=int,
        default=max(1, min(4, (os.cpu_count() or 2) // 2)),
        help="submissions graded at once (default: half the CPUs, at most 4)",
    )
    grade_parser.add_argument("--timeout", type=int, help="seconds per cell (default: the assignment's setting)")
    grade_parser.add_argument("--force", action="store_true", help="run again even unchanged submissions")
    grade_parser.add_argument("--student", action="append", help="only this learner (repeatable)")
    grade_parser.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    grade_parser.add_argument("--no-feedback", action="store_true", help="skip the HTML feedback")
    grade_parser.add_argument(
        "--isolation",
        choices=["auto", "bwrap", "namespaces", "none"],
        default="auto",
        help="auto: bubblewrap if installed, else hand-written namespaces; "
        "'none' keeps only resource limits (for debugging the grader)",
    )
    grade_parser.add_argument(
        "--uid-base", type=int, default=1_640_000, help="first numeric uid for sandboxed kernels when run as root"
    )
    grade_parser.add_argument("--output", help="folder for grades.csv, report.md and logs (default: build/grading)")
    grade_parser.add_argument("--strict", action="store_true", help="exit with status 1 if any submission is an error")
    grade_parser.set_defaults(run=command_grade)

    export = sub.add_parser("export", parents=[common], help="nbgrader's grades CSV")
    export.add_argument("--to", help="destination CSV (default: build/grading/nbgrader_grades.csv)")
    export.set_defaults(run=command_export)

    fetch = sub.add_parser("fetch", parents=[common], help="(learner) fetch a released assignment")
    fetch.add_argument("assignment_id")
    fetch.add_argument("learner_dir")
    fetch.set_defaults(run=command_fetch)

    submit = sub.add_parser("submit", parents=[common], help="(learner) submit an assignment")
    submit.add_argument("assignment_id")
    submit.add_argument("student_id")
    submit.add_argument("learner_dir")
    submit.set_defaults(run=command_submit)

    demo = sub.add_parser(
        "cycle-demo", parents=[common], help="the whole cycle for two learners, in a temporary course"
    )
    demo.add_argument("--assignment", help="assignment to use (default: the first)")
    demo.add_argument("--workers", type=int, default=2)
    demo.add_argument("--isolation", choices=["auto", "bwrap", "namespaces", "none"], default="auto")
    demo.add_argument("--keep", action="store_true", help="keep the temporary course for inspection")
    demo.set_defaults(run=command_cycle_demo)

    check_parser = sub.add_parser(
        "check", parents=[common], help="(learner) your own copy graded with the hidden tests, as in a class"
    )
    check_parser.add_argument("assignment_id")
    check_parser.add_argument("--path", help="the folder of your copy (default: exercises/<assignment_id>)")
    check_parser.add_argument("--keep", action="store_true", help="keep the temporary course for inspection")
    check_parser.set_defaults(run=command_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (FileNotFoundError, KeyError, ValueError, RuntimeError) as error:
        print(f"course {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
