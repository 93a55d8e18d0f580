"""Attacks on the grader: every submission under tests/submissions/attacks/ is graded in one run.

Each attack folder says what the submission does (attack.json) and what grading must give: the score
the honest part of the work deserves at most, the findings or runtime reports that must flag it, what
its outputs must (not) show, which files must not appear. An honest control submission is graded in
the same run and must come out untouched. The outcomes are written to build/grading/attack_table.md
(generated, not tracked); `course attack-table --write-doc` copies a complete run's table into docs/grader.md.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from grading_support import fixtures

from course_grader import attack_table
from course_grader.autograde import grade
from course_grader.exchange import pipeline
from course_grader.ground import notebooks
from course_grader.ground.layout import CourseLayout
from course_grader.sandbox.session import sandbox_processes

REPOSITORY = Path(__file__).resolve().parents[1]
SUBMISSIONS = REPOSITORY / "tests" / "submissions"
ASSIGNMENT = "ex1_manual_attention"
# COURSE_GRADING_ATTACKS=name,name grades only these attacks (next to the control); no table is written then.
SELECTED = [name for name in os.environ.get("COURSE_GRADING_ATTACKS", "").split(",") if name]
ATTACKS = [attack for attack in fixtures.discover_attacks(SUBMISSIONS) if not SELECTED or attack.name in SELECTED]
TABLE = attack_table.BUILD_TABLE
CELL_TIMEOUT_S = 10
# Every kernel's CPU budget in this run (ex1's `cpu_s`, set in the temporary course only; the course's
# own is 300 s): low enough that forked_training reaches it well within two cell timeouts, several times
# what the honest control spends.
CPU_BUDGET_S = 15
OUTCOMES: dict[str, dict] = {}

pytestmark = pytest.mark.slow


ATTACKED = sorted({attack.assignment_id(ASSIGNMENT) for attack in ATTACKS} | {ASSIGNMENT})


@pytest.fixture(scope="module")
def attack_course(tmp_path_factory) -> CourseLayout:
    root = tmp_path_factory.mktemp("attacked-course")
    for assignment_id in ATTACKED:
        shutil.copytree(REPOSITORY / "solutions" / assignment_id, root / "solutions" / assignment_id)
    source = root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook = json.loads(source.read_text(encoding="utf-8"))
    notebook["metadata"]["course_grading"]["cpu_s"] = CPU_BUDGET_S
    source.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    shutil.copy(REPOSITORY / "nbgrader_config.py", root)
    layout = CourseLayout.from_directory(root, exchange=root / "exchange")
    pipeline.generate_release(layout)
    for assignment_id in ATTACKED:
        pipeline.release_assignment(layout, assignment_id)  # the exchange exists, as during a real course
    return layout


@pytest.fixture(scope="module")
def attack_run(attack_course):
    assignment = attack_course.assignment(ASSIGNMENT)
    release = fixtures.release_notebook(attack_course, assignment)
    control = notebooks.fill_in(release, fixtures.model_answers(assignment))
    fixtures.place_submission(attack_course, "control", assignment, fixtures.notebook_files(assignment, control))
    for attack in ATTACKS:
        target = attack_course.assignment(attack.assignment_id(ASSIGNMENT))
        attack.place(attack_course, target, SUBMISSIONS, f"attack-{attack.name}")
    run = grade(attack_course, workers=2, cell_timeout=CELL_TIMEOUT_S, feedback=False, log=print)
    yield run
    if len(OUTCOMES) == len(ATTACKS) and not SELECTED:
        _write_table(run)


def _row(run, student):
    rows = [record for record in run.records if record.student == student]
    assert len(rows) == 1, f"expected one grade row for {student}, found {len(rows)}"
    return rows[0]


def _outputs(layout: CourseLayout, student: str, assignment_id: str = ASSIGNMENT) -> str:
    """The graded notebooks' outputs as a learner reads them. One print can reach the notebook as several
    stream messages (IPython flushes stdout on a timer, so under load "left the answer in" and " /tmp"
    arrive apart); a cell's messages of one stream are joined as Jupyter shows them."""
    texts = []
    for path in (layout.autograded_dir / student / assignment_id).glob("*.ipynb"):
        for cell in notebooks.load_json(path)["cells"]:
            streams: dict[str, str] = {}
            for output in cell.get("outputs", []):
                text = notebooks.source_text({"source": output.get("text", "")})
                if output.get("output_type") == "stream":
                    streams[output.get("name", "stdout")] = streams.get(output.get("name", "stdout"), "") + text
                else:
                    texts.extend([text, str(output.get("evalue", ""))])
            texts.extend(streams.values())
    return "\n".join(texts)


def evaluate(attack, record, layout: CourseLayout) -> dict:
    """Compare one graded attack with its expectations; returns the outcome and any broken promise."""
    expect = attack.spec["expect"]
    defended = _defended(expect, record)
    problems = (
        _score_problems(expect, record, defended)
        + _report_problems(expect, record)
        + _output_problems(expect, record, layout)
        + _file_problems(expect, record, layout)
    )
    # For the table: what the grader did at run time first, then what the preflight found.
    # The temporary course's path differs from run to run: the table shows it as <course>.
    runtime = [reason.replace(str(layout.root), "<course>") for reason in record.reasons if not reason.startswith("[")]
    found = sorted({finding["code"] for finding in record.findings if finding["severity"] != "info"})
    return {
        "verdict": _verdict(defended, record.needs_review),
        "problems": problems,
        "score": f"{record.auto_score:g}/{record.auto_max:g}",
        "status": record.status,
        "runtime": runtime,
        "found": found,
    }


def _defended(expect: dict, record) -> bool:
    """The attack earned no more than the honest part of its work: at most `max_auto_score`, exactly `auto_score`."""
    bound, exact = expect.get("max_auto_score"), expect.get("auto_score")
    return (bound is None or record.auto_score <= bound) and (exact is None or record.auto_score == exact)


def _score_problems(expect: dict, record, defended: bool) -> list[str]:
    """The grade row itself: its status, its auto score and the points it was graded out of."""
    problems = []
    if record.status != expect["status"]:
        problems.append(f"status {record.status}, expected {expect['status']}")
    if not defended:
        bound, exact = expect.get("max_auto_score"), expect.get("auto_score")
        problems.append(
            f"auto score {record.auto_score} (expected {'= ' + str(exact) if exact is not None else '<= ' + str(bound)})"
        )
    if "max_score" in expect and record.max_score != expect["max_score"]:
        problems.append(f"max score {record.max_score}, expected {expect['max_score']}")
    return problems


def _report_problems(expect: dict, record) -> list[str]:
    """What the preflight's findings and the runtime's reasons must say about the attack."""
    problems = []
    codes = {finding["code"] for finding in record.findings}
    reasons = " | ".join(record.reasons)
    for code in expect.get("findings", []) + expect.get("flags", []):
        if code not in codes:
            problems.append(f"finding {code} missing (found {sorted(codes)})")
    for fragment in expect.get("runtime", []):
        if fragment not in reasons:
            problems.append(f"runtime report lacks {fragment!r}")
    if expect.get("canary") and "did not run to its end" not in reasons:
        problems.append("the canary did not report the skipped tests")
    for fragment in expect.get("reasons", []):
        if fragment not in reasons:
            problems.append(f"no reason mentions {fragment!r}")
    return problems


def _output_problems(expect: dict, record, layout: CourseLayout) -> list[str]:
    """What the learner reads in the graded notebooks' outputs must (not) show."""
    problems = []
    outputs = (
        _outputs(layout, record.student, record.assignment)
        if ("outputs_contain" in expect or "outputs_lack" in expect)
        else ""
    )
    for fragment in expect.get("outputs_contain", []):
        if fragment not in outputs:
            problems.append(f"outputs lack {fragment!r}")
    for fragment in expect.get("outputs_lack", []):
        if fragment in outputs:
            problems.append(f"outputs show {fragment!r}: the sandbox let it through")
    return problems


def _file_problems(expect: dict, record, layout: CourseLayout) -> list[str]:
    """Files the attack must not have created, and how large its graded notebook may grow."""
    problems = []
    substitutions = {"{{COURSE_DIR}}": str(layout.root), "{{EXCHANGE_DIR}}": str(layout.exchange_dir)}
    for template in expect.get("no_files", []):
        path = template
        for placeholder, value in substitutions.items():
            path = path.replace(placeholder, value)
        if os.path.exists(path):
            problems.append(f"{path} was created")
    if "max_notebook_mb" in expect:
        sizes = [
            path.stat().st_size for path in (layout.autograded_dir / record.student / record.assignment).glob("*.ipynb")
        ]
        if not sizes or max(sizes) > expect["max_notebook_mb"] * (1 << 20):
            problems.append(f"autograded notebook size {sizes} bytes exceeds {expect['max_notebook_mb']} MB")
    return problems


def _verdict(defended: bool, flagged: bool) -> str:
    """An attack is held off if it earned nothing it should not (defended) or a person is asked to look (flagged)."""
    return (
        "defended and flagged"
        if defended and flagged
        else "defended"
        if defended
        else "flagged"
        if flagged
        else "NOT DEFENDED"
    )


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_earns_nothing_it_did_not_earn_and_is_reported(attack_run, attack_course, attack):
    record = _row(attack_run, f"attack-{attack.name}")
    outcome = evaluate(attack, record, attack_course)
    OUTCOMES[attack.name] = dict(
        outcome, name=attack.name, threat=attack.threat, description=attack.spec["description"]
    )
    assert outcome["verdict"] != "NOT DEFENDED", f"{attack.name}: {outcome}"
    assert not outcome["problems"], (
        f"attack {attack.name} ({attack.threat}): {'; '.join(outcome['problems'])}. "
        f"Reasons: {record.reasons}. Log: {record.log}"
    )


def test_honest_control_is_graded_normally_next_to_the_attacks(attack_run):
    control = _row(attack_run, "control")
    assert control.status == "graded" and control.auto_score == control.auto_max == 16, (
        f"the honest submission graded next to the attacks was affected: {control.auto_score}/{control.auto_max}, "
        f"reasons {control.reasons}"
    )
    assert not control.needs_review, f"the honest submission was flagged: {control.reasons}"


def test_every_attack_has_exactly_one_row(attack_run, attack_course):
    folders = sorted(path.name for path in attack_course.submitted_dir.iterdir())
    rows = sorted(record.student for record in attack_run.records)
    assert rows == folders, f"submissions without a row: {set(folders) - set(rows)}"


def test_the_gradebook_was_not_tampered_with(attack_run, attack_course):
    from nbgrader.api import Gradebook

    assert not attack_course.gradebook_path.read_bytes().endswith(b"tampered"), "a kernel wrote to the gradebook"
    with Gradebook(attack_course.db_url, attack_course.course_id) as gradebook:
        notebook = gradebook.find_notebook(ASSIGNMENT, ASSIGNMENT)
        points = {cell.name: cell.max_score for cell in notebook.grade_cells}
    assert sum(points.values()) == 18, f"the gradebook's points changed: {points}"


@pytest.mark.skipif(os.geteuid() != 0, reason="uid isolation needs root; this run used a user namespace")
def test_root_runs_give_every_kernel_its_own_uid_no_network_and_hidden_files(attack_run):
    description = attack_run.sandbox
    for promise in ("own unprivileged uid", "course files hidden", "no network"):
        assert promise in description, f"the sandbox is weaker than it should be as root: {description}"


def test_no_kernel_process_survives_the_run(attack_run):
    survivors = [(pid, uid) for pid, uid in sandbox_processes(0, 1 << 32) if uid in attack_run.sandbox_uids]
    assert not survivors, f"sandboxed processes still running after grading: {survivors}"


def _write_table(run) -> None:
    text = attack_table.render(
        [OUTCOMES[attack.name] for attack in ATTACKS],
        workers=run.workers,
        cell_timeout_s=CELL_TIMEOUT_S,
        sandbox=run.sandbox,
    )
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(text, encoding="utf-8")
