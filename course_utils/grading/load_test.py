"""Load test: a class's worth of generated submissions graded in one run, timed, checked.

    python -m course_utils.grading.load_test                     # 60 submissions, 1 then 2 workers
    python -m course_utils.grading.load_test --submissions 20 --workers 1 2 4

The submissions are a fixed mix built from the assignment's model solution, its untouched release,
every fixture in tests/submissions/<assignment>/ (correct alternatives and typical mistakes) and a
notebook that is not valid JSON; each has a known expected score. For every worker count the whole
batch is graded from scratch in a temporary course; the run fails (exit status 1) unless the CSV has
exactly one row per submission with the expected score and status.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from . import fixtures, notebooks, pipeline
from .autograde import grade
from .layout import CourseLayout
from .report import read_csv

REPOSITORY = Path(__file__).resolve().parents[2]


def build_mix(layout: CourseLayout, assignment_id: str, count: int, fixtures_root: Path) -> dict[str, tuple[str, float]]:
    """Place `count` submissions; returns learner -> (expected status, expected autograded score)."""
    assignment = layout.assignment(assignment_id)
    release = fixtures.release_notebook(layout, assignment)
    model = notebooks.fill_in(release, fixtures.model_answers(assignment))
    auto_max = sum(points for cell_id, points in notebooks.points(release).items()
                   if notebooks.is_autograded_test(notebooks.graded_cells(release)[cell_id]))
    kinds = [("model", fixtures.notebook_files(assignment, model), "graded", auto_max),
             ("blank", fixtures.notebook_files(assignment, release), "graded", 0.0)]
    for fixture in fixtures.discover_fixtures(fixtures_root, assignment_id):
        kinds.append((fixture.name, fixture.files(layout, assignment), "graded", float(fixture.expected["auto_score"])))
    broken = json.dumps(model)
    kinds.append(("broken", {f"{assignment.main_notebook.stem}.ipynb": broken[: len(broken) // 2].encode()}, "error", 0.0))
    expected = {}
    for index in range(count):
        name, files, status, score = kinds[index % len(kinds)]
        learner = f"learner{index:03d}-{name.replace('_', '-')}"
        fixtures.place_submission(layout, learner, assignment, files)
        expected[learner] = (status, score)
    return expected


def run_once(workdir: Path, assignment_id: str, count: int, workers: int, fixtures_root: Path) -> dict:
    course = workdir / f"course-{workers}"
    shutil.copytree(REPOSITORY / "solutions" / assignment_id, course / "solutions" / assignment_id)
    shutil.copy(REPOSITORY / "nbgrader_config.py", course)
    layout = CourseLayout.from_directory(course, exchange=workdir / f"exchange-{workers}")
    pipeline.generate_release(layout, [assignment_id])
    expected = build_mix(layout, assignment_id, count, fixtures_root)
    run = grade(layout, workers=workers, feedback=False, log=lambda message: None)
    rows = {row["student"]: row for row in read_csv(run.csv_path)}
    mismatches = [f"{learner}: expected {status} {score:g}, got {rows[learner]['status']} {rows[learner]['auto_score']}"
                  for learner, (status, score) in expected.items()
                  if learner in rows and (rows[learner]["status"] != status or float(rows[learner]["auto_score"]) != score)]
    missing = sorted(set(expected) - set(rows))
    seconds = [record.seconds for record in run.records if record.executed and record.seconds]
    return {"workers": workers, "submissions": len(expected), "rows": len(rows), "wall_s": run.wall_seconds,
            "per_submission_mean_s": round(statistics.mean(seconds), 2) if seconds else 0.0,
            "per_submission_median_s": round(statistics.median(seconds), 2) if seconds else 0.0,
            "per_submission_max_s": round(max(seconds), 2) if seconds else 0.0,
            "throughput_per_min": round(60 * len(expected) / run.wall_seconds, 1),
            "mismatches": mismatches, "missing": missing, "sandbox": run.sandbox}


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
            print(f"  wall {result['wall_s']:.1f} s, per submission {result['per_submission_mean_s']:.1f} s "
                  f"(median {result['per_submission_median_s']:.1f}, max {result['per_submission_max_s']:.1f}), "
                  f"{result['rows']} CSV rows, {len(result['mismatches'])} unexpected scores", flush=True)
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    baseline = results[0]["wall_s"] if results else 0
    print("\n| workers | submissions | wall time (s) | per submission (s, mean / median / max) | speed-up |")
    print("|---|---|---|---|---|")
    for result in results:
        print(f"| {result['workers']} | {result['submissions']} | {result['wall_s']:.1f} | "
              f"{result['per_submission_mean_s']:.1f} / {result['per_submission_median_s']:.1f} / "
              f"{result['per_submission_max_s']:.1f} | {baseline / result['wall_s']:.2f}x |")
    if results:
        print(f"\nsandbox: {results[0]['sandbox']}")
    if args.report:
        Path(args.report).write_text(json.dumps(results, indent=1))
    failed = [result for result in results if result["mismatches"] or result["missing"]
              or result["rows"] != result["submissions"]]
    for result in failed:
        print(f"workers={result['workers']}: missing rows {result['missing']}; unexpected: {result['mismatches'][:10]}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
