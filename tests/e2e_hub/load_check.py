"""Load check of a class on one JupyterHub (`make hub-load`): N learners at once, nothing lost.

    COURSE_PREFIX=/opt/transformers-course-hubtest python tests/e2e_hub/load_check.py [--learners 30]

The class is built as for the browser test (hub.py: deploy/setup_course.sh, deploy/add_learners.sh,
`course release --publish`, JupyterHub with deploy/jupyterhub_config.py on loopback). Then:

1. every learner's server is started at once through the Hub's REST API; the time until all are
   ready is measured, and the memory of each server (the proportional set size, PSS, of the
   account's processes, so that shared libraries are counted once across servers);
2. every learner, concurrently, fetches ex1_manual_attention, saves answers (even-numbered learners
   the model solution, odd-numbered ones the untouched notebook) and submits, through their own
   server's nbgrader endpoints and Jupyter's contents API (each as their own account);
3. the servers are stopped; the grader account collects (`course collect`) and grades (`course grade`).

It fails unless the exchange holds N submissions, N are collected and the grades CSV has N rows with
the scores each kind must get. Everything is bounded (each request, each phase, the whole run) and
stays on 127.0.0.1; the accounts and folders are removed at the end, also on failure. A summary
is printed and written as JSON to .e2e/hub-load.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "e2e"))  # jupyter_servers.py, which hub.py shares

import hub as hubs  # noqa: E402

ASSIGNMENT = "ex1_manual_attention"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
PHASE_TIMEOUT_S = 900


def pss_mib(pids: list[int]) -> float:
    total_kib = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
        except (OSError, ValueError):
            pass
    return total_kib / 1024


def start_all(klass, names: list[str]) -> dict:
    started = time.monotonic()
    for name in names:
        klass.api("POST", f"/users/{name}")
    # All at once: the Hub answers a start request only after a few seconds (slow_spawn_timeout),
    # so one request at a time would start the servers one after another.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
        list(pool.map(lambda name: klass.api("POST", f"/users/{name}/server", timeout_s=120), names))
    ready_at: dict[str, float] = {}
    deadline = started + PHASE_TIMEOUT_S
    while len(ready_at) < len(names):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"only {len(ready_at)} of {len(names)} servers ready after {PHASE_TIMEOUT_S} s:\n{klass.log_tail()}"
            )
        for user in klass.api("GET", "/users?state=ready&limit=1000"):
            if user["name"] in names and user["name"] not in ready_at:
                ready_at[user["name"]] = time.monotonic() - started
        time.sleep(1)
    return ready_at


def learner_round(klass, name: str, solved: bool, answers: dict[str, str]) -> float:
    """Fetch, save answers, submit: through the learner's own server (their account, their files)."""
    from course_grader.ground import notebooks

    started = time.monotonic()
    query = urllib.parse.urlencode({"course_id": hubs.COURSE_ID, "assignment_id": ASSIGNMENT})
    klass.request("POST", f"/user/{name}/assignments/fetch?{query}", raw=b"", timeout_s=300)
    path = f"/user/{name}/api/contents/{ASSIGNMENT}/{NOTEBOOK}"
    model = klass.request("GET", f"{path}?content=1", timeout_s=120)
    content = model["content"]
    if solved:
        content = notebooks.fill_in(content, answers)
    klass.request("PUT", path, {"type": "notebook", "format": "json", "content": content}, timeout_s=120)
    result = klass.request("POST", f"/user/{name}/assignments/submit?{query}", raw=b"", timeout_s=300)
    if isinstance(result, dict) and result.get("success") is False:
        raise AssertionError(f"{name}: submit failed: {result}")
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--workers", type=int, default=1, help="course grade --workers (default 1: a shared machine)")
    parser.add_argument("--report", default=str(hubs.REPOSITORY / ".e2e" / "hub-load.json"))
    args = parser.parse_args(argv)
    if not 1 <= args.learners <= 60:
        parser.error("--learners must be between 1 and 60 (a load check, bounded)")
    hubs.stop_on_sigterm()
    shorts = [f"l{index:02d}" for index in range(args.learners)]
    summary: dict = {"learners": args.learners}
    run_started = time.monotonic()
    with hubs.HubClass(shorts, instructor_names=[]) as klass:
        summary["set_up_s"] = round(time.monotonic() - run_started, 1)
        names = [klass.user(short).name for short in shorts]
        from course_grader.ground import notebooks

        source = notebooks.load_json(klass.course_dir / "solutions" / ASSIGNMENT / NOTEBOOK)
        cells = notebooks.graded_cells(source)
        model = {
            grade_id: text
            for grade_id, text in notebooks.solution_answers(source).items()
            if cells[grade_id]["cell_type"] == "code"
        }
        auto_max = sum(
            points
            for grade_id, points in notebooks.points(source).items()
            if notebooks.is_autograded_test(cells[grade_id])
        )

        print(f"[load] starting {len(names)} servers at once ...", flush=True)
        ready_at = start_all(klass, names)
        summary["start_all_s"] = round(max(ready_at.values()), 1)
        summary["start_median_s"] = round(statistics.median(ready_at.values()), 1)
        time.sleep(5)  # let the servers settle before measuring them
        memory = {name: pss_mib(klass.server_pids(name)) for name in names}
        summary["server_pss_mib"] = {
            "median": round(statistics.median(memory.values()), 1),
            "min": round(min(memory.values()), 1),
            "max": round(max(memory.values()), 1),
            "total": round(sum(memory.values()), 1),
        }
        print(
            f"[load] {len(names)} servers ready in {summary['start_all_s']} s; PSS per server {summary['server_pss_mib']}",
            flush=True,
        )

        print(f"[load] {len(names)} learners fetch, answer and submit at once ...", flush=True)
        solved = {name: index % 2 == 0 for index, name in enumerate(names)}
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
            futures = {pool.submit(learner_round, klass, name, solved[name], model): name for name in names}
            rounds, failures = {}, {}
            for future in concurrent.futures.as_completed(futures, timeout=PHASE_TIMEOUT_S):
                try:
                    rounds[futures[future]] = future.result()
                except Exception as error:
                    failures[futures[future]] = repr(error)
        summary["fetch_submit_all_s"] = round(time.monotonic() - started, 1)
        summary["fetch_submit_median_s"] = round(statistics.median(rounds.values()), 1) if rounds else None
        if failures:
            raise AssertionError(f"{len(failures)} learners could not fetch or submit: {failures}")
        inbound = sorted(p.name.split("+")[0] for p in (klass.exchange / hubs.COURSE_ID / "inbound").iterdir())
        assert inbound == sorted(names), f"the exchange should hold one submission per learner, it holds {inbound}"

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
            list(pool.map(lambda name: klass.api("DELETE", f"/users/{name}/server", timeout_s=120), names))
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while any(klass.server_pids(name) for name in names):
            assert time.monotonic() < deadline, "servers still running after they were stopped"
            time.sleep(1)
        summary["stop_all_s"] = round(time.monotonic() - started, 1)

        started = time.monotonic()
        klass.as_user(
            klass.grader,
            ["course", "collect", "--assignment", ASSIGNMENT, "--course-dir", str(klass.course_dir)],
            "course collect",
        )
        summary["collect_s"] = round(time.monotonic() - started, 1)
        collected = sorted(p.parent.name for p in (klass.course_dir / "submitted").glob(f"*/{ASSIGNMENT}"))
        assert collected == sorted(names), f"collect should bring in {len(names)} submissions, it brought {collected}"

        print(f"[load] course grade ({len(names)} submissions, {args.workers} worker(s)) ...", flush=True)
        started = time.monotonic()
        result = klass.as_user(
            klass.grader,
            [
                "course",
                "grade",
                "--assignment",
                ASSIGNMENT,
                "--workers",
                str(args.workers),
                "--strict",
                "--course-dir",
                str(klass.course_dir),
            ],
            "course grade",
            timeout_s=PHASE_TIMEOUT_S,
        )
        summary["grade_s"] = round(time.monotonic() - started, 1)
        print(result.stdout[-3000:], flush=True)
        with open(klass.course_dir / "build" / "grading" / "grades.csv", newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT]
        by_student = {row["student"]: row for row in rows}
        assert len(rows) == len(names) and set(by_student) == set(names), (
            f"the grades CSV should have one row per learner ({len(names)}), it has {len(rows)}"
        )
        wrong = {
            name: (row["status"], row["auto_score"])
            for name, row in by_student.items()
            if row["status"] != "graded" or float(row["auto_score"]) != (auto_max if solved[name] else 0.0)
        }
        assert not wrong, f"unexpected grades (solved ones must get {auto_max:g}, untouched ones 0): {wrong}"
        summary["grade_rows"] = len(rows)
        summary["submissions_collected"] = len(collected)
        hub_pids = [klass.hub.pid]
        summary["hub_pss_mib"] = round(pss_mib(hub_pids), 1)
    summary["total_s"] = round(time.monotonic() - run_started, 1)
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(summary, indent=1))
    print("\n[load] summary\n" + "\n".join(f"  {key}: {value}" for key, value in summary.items()), flush=True)
    print(f"[load] written to {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
