"""Load test: a class's worth of generated submissions graded in one run, timed, checked (`make grade-load`).

    PYTHONPATH=tests .venv/bin/python -m grading_support.grade_load     # 60 submissions, 1 then 2 workers
    PYTHONPATH=tests .venv/bin/python -m grading_support.grade_load --submissions 20 --workers 1 2 4

The submissions are a fixed mix built from the assignment's model solution, its untouched release,
every fixture in tests/submissions/<assignment>/ (correct alternatives and typical mistakes), the
attacks of tests/submissions/attacks/ (for ex1, the assignment they are written against; the endless
loops are left out, since each only waits out its cell time limit) and a notebook that is not valid
JSON, in the proportions of a class: mostly honest work, a few broken files, attacks in at most a
third of the slots. Each has a known expected score: exact, or for an attack the most that its honest
part may earn. For every worker count the whole batch is graded from scratch in a temporary course;
the run fails (exit status 1) unless the CSV has exactly one row per submission with the expected
score and status.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from course_grader.autograde import grade
from course_grader.exchange import pipeline
from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout
from course_grader.ground.report import read_csv

from . import fixtures

REPOSITORY = Path(__file__).resolve().parents[2]


ATTACKS_FOR = "ex1_manual_attention"
SLOW_ATTACKS = {"infinite_loop", "ignore_interrupt_loop"}


def build_mix(
    layout: CourseLayout, assignment_id: str, count: int, fixtures_root: Path
) -> dict[str, tuple[str, float, bool]]:
    """Place `count` submissions; returns learner -> (status, autograded score, whether the score is exact).

    A score that is not exact is an upper bound (an attack may earn at most its honest part).
    """
    assignment = layout.assignment(assignment_id)
    release = fixtures.release_notebook(layout, assignment)
    model = notebooks.fill_in(release, fixtures.model_answers(assignment))
    auto_max = sum(
        points
        for cell_id, points in notebooks.points(release).items()
        if notebooks.is_autograded_test(notebooks.graded_cells(release)[cell_id])
    )
    # (name, files, status, score, exact, attack whose `place` finishes the folder or None)
    honest = [
        ("model", fixtures.notebook_files(assignment, model), "graded", auto_max, True, None),
        ("blank", fixtures.notebook_files(assignment, release), "graded", 0.0, True, None),
    ]
    for fixture in fixtures.discover_fixtures(fixtures_root, assignment_id):
        honest.append(
            (
                fixture.name,
                fixture.files(layout, assignment),
                "graded",
                float(fixture.expected["auto_score"]),
                True,
                None,
            )
        )
    broken = json.dumps(model)
    broken_kind = (
        "broken",
        {f"{assignment.main_notebook.stem}.ipynb": broken[: len(broken) // 2].encode()},
        "error",
        0.0,
        True,
        None,
    )
    attacks = []
    if assignment_id == ATTACKS_FOR:
        for attack in fixtures.discover_attacks(fixtures_root):
            if attack.name in SLOW_ATTACKS or attack.assignment_id(ATTACKS_FOR) != assignment_id:
                continue
            expect = attack.spec["expect"]
            exact = expect.get("auto_score")
            attacks.append(
                (
                    f"attack-{attack.name}",
                    attack.files(layout, assignment, fixtures_root),
                    expect["status"],
                    float(exact if exact is not None else expect["max_auto_score"]),
                    exact is not None,
                    attack,
                )
            )
    # A class: mostly honest work, one broken file in twenty, attacks in at most a third of the slots.
    n_broken = max(1, count // 20)
    n_attacks = min(len(attacks), count // 3)
    kinds = (
        [broken_kind] * n_broken
        + attacks[:n_attacks]
        + [honest[i % len(honest)] for i in range(max(count - n_broken - n_attacks, 0))]
    )[:count]
    expected = {}
    for index, (name, files, status, score, exact, attack) in enumerate(kinds):
        learner = f"learner{index:03d}-{name.replace('_', '-')}"
        if attack is None:
            fixtures.place_submission(layout, learner, assignment, files)
        else:
            attack.place(layout, assignment, fixtures_root, learner, files)
        expected[learner] = (status, score, exact)
    return expected


def unexpected(expected: dict[str, tuple[str, float, bool]], rows: dict[str, dict]) -> list[str]:
    """One line per graded submission whose status or score is not what its kind must get."""
    problems = []
    for learner, (status, score, exact) in expected.items():
        if learner not in rows:
            continue
        got_status, got_score = rows[learner]["status"], float(rows[learner]["auto_score"])
        score_ok = got_score == score if exact else got_score <= score
        if got_status != status or not score_ok:
            problems.append(
                f"{learner}: expected {status} {'' if exact else '<= '}{score:g}, got {got_status} {got_score:g}"
            )
    return problems


def run_once(workdir: Path, assignment_id: str, count: int, workers: int, fixtures_root: Path) -> dict:
    course = workdir / f"course-{workers}"
    shutil.copytree(REPOSITORY / "solutions" / assignment_id, course / "solutions" / assignment_id)
    shutil.copy(REPOSITORY / "nbgrader_config.py", course)
    layout = CourseLayout.from_directory(course, exchange=workdir / f"exchange-{workers}")
    pipeline.generate_release(layout, [assignment_id])
    expected = build_mix(layout, assignment_id, count, fixtures_root)
    run = grade(layout, workers=workers, feedback=False, log=lambda message: None)
    rows = {row["student"]: row for row in read_csv(run.csv_path)}
    mismatches = unexpected(expected, rows)
    mix = {
        "attacks": sum("-attack-" in learner for learner in expected),
        "broken": sum(status == "error" and "-attack-" not in learner for learner, (status, _, _) in expected.items()),
    }
    mix["honest, graded"] = len(expected) - mix["attacks"] - mix["broken"]
    missing = sorted(set(expected) - set(rows))
    seconds = [record.seconds for record in run.records if record.executed and record.seconds]
    return {
        "workers": workers,
        "submissions": len(expected),
        "rows": len(rows),
        "wall_s": run.wall_seconds,
        "per_submission_mean_s": round(statistics.mean(seconds), 2) if seconds else 0.0,
        "per_submission_median_s": round(statistics.median(seconds), 2) if seconds else 0.0,
        "per_submission_max_s": round(max(seconds), 2) if seconds else 0.0,
        "throughput_per_min": round(60 * len(expected) / run.wall_seconds, 1),
        "mix": mix,
        "mismatches": mismatches,
        "missing": missing,
        "sandbox": run.sandbox,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=60)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--assignment", default="ex1_manual_attention")
    parser.add_argument("--fixtures", default=str(REPOSITORY / "tests" / "submissions"))
    parser.add_argument("--report", help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary courses")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="course-load-"))
    results = []
    try:
        for workers in args.workers:
            print(f"grading {args.submissions} submissions with {workers} worker(s)...", flush=True)
            result = run_once(workdir, args.assignment, args.submissions, workers, Path(args.fixtures))
            results.append(result)
            print(
                f"  wall {result['wall_s']:.1f} s, per submission {result['per_submission_mean_s']:.1f} s "
                f"(median {result['per_submission_median_s']:.1f}, max {result['per_submission_max_s']:.1f}), "
                f"{result['rows']} CSV rows, {len(result['mismatches'])} unexpected scores",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    baseline = results[0]["wall_s"] if results else 0
    print("\n| workers | submissions | wall time (s) | per submission (s, mean / median / max) | speed-up |")
    print("|---|---|---|---|---|")
    for result in results:
        print(
            f"| {result['workers']} | {result['submissions']} | {result['wall_s']:.1f} | "
            f"{result['per_submission_mean_s']:.1f} / {result['per_submission_median_s']:.1f} / "
            f"{result['per_submission_max_s']:.1f} | {baseline / result['wall_s']:.2f}x |"
        )
    if results:
        print(f"\nmix: {results[0]['mix']}; sandbox: {results[0]['sandbox']}")
    if args.report:
        Path(args.report).write_text(json.dumps(results, indent=1))
    failed = [
        result
        for result in results
        if result["mismatches"] or result["missing"] or result["rows"] != result["submissions"]
    ]
    for result in failed:
        print(
            f"workers={result['workers']}: missing rows {result['missing']}; unexpected: {result['mismatches'][:10]}",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
