"""course_utils.checks (bounded checks that record what they measured), the seed override, and the
tables of `course robustness`."""

from __future__ import annotations

import json
import math
import subprocess

import pytest
import torch

from course_tools import robustness
from course_utils import checks, env


def test_check_passes_inside_its_bounds_and_returns_the_value():
    assert checks.check("accuracy", torch.tensor(0.97), at_least=0.9, at_most=1.0) == pytest.approx(0.97)


def test_check_fails_with_a_message_that_names_the_quantity_and_the_bound():
    with pytest.raises(
        AssertionError, match=r"held-out accuracy: measured 0\.5, expected at least 0\.9\. it should learn"
    ):
        checks.check("held-out accuracy", 0.5, at_least=0.9, why="it should learn")
    with pytest.raises(AssertionError, match="at most 1.3"):
        checks.check("slope", 1.5, at_least=0.7, at_most=1.3)


def test_check_never_passes_nan_and_rejects_a_missing_or_empty_bound():
    with pytest.raises(AssertionError):
        checks.check("loss", math.nan, at_most=10.0)
    with pytest.raises(ValueError, match="needs at_least, at_most or both"):
        checks.check("loss", 1.0)
    with pytest.raises(ValueError, match="above at_most"):
        checks.check("loss", 1.0, at_least=2.0, at_most=1.0)
    with pytest.raises(TypeError, match="must be a number"):
        checks.check("loss", "high", at_most=1.0)


def test_check_records_every_value_when_asked(tmp_path, monkeypatch):
    record = tmp_path / "records.jsonl"
    monkeypatch.setenv(checks.RECORD_ENV, str(record))
    monkeypatch.setenv(env.SEED_ENV, "2")
    checks.check("a", 1.0, at_least=0.5)
    with pytest.raises(AssertionError):
        checks.check("b", 0.1, at_least=0.5)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(line["name"], line["passed"], line["seed_offset"]) for line in lines] == [("a", True, 2), ("b", False, 2)]


def test_course_seed_moves_every_seed_into_its_own_range(monkeypatch):
    monkeypatch.delenv(env.SEED_ENV, raising=False)
    assert env.seed_for(3) == 3, "without COURSE_SEED a chapter's seeds are the ones it wrote"
    first = torch.rand(3, generator=env.generator(0))
    monkeypatch.setenv(env.SEED_ENV, "1")
    assert env.seed_for(3) == 1003 and env.seed_everything(0) == 1000
    assert not torch.equal(first, torch.rand(3, generator=env.generator(0))), "COURSE_SEED must change the draws"
    monkeypatch.setenv(env.SEED_ENV, "one")
    with pytest.raises(ValueError, match="not a whole number"):
        env.seed_offset()


def test_robustness_table_keeps_the_worst_value_per_seed_and_the_margin(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for seed, values in ((0, [0.96, 0.94]), (1, [0.99])):
        (records / f"07_x.seed{seed}.jsonl").write_text(
            "".join(
                json.dumps({"name": "accuracy", "value": v, "at_least": 0.9, "at_most": None}) + "\n" for v in values
            )
        )
    rows = robustness.collect(tmp_path, ["07_x"], [0, 1])
    assert len(rows) == 1 and rows[0]["values"] == {0: 0.94, 1: 0.99}, "a check in a loop counts its worst pass"
    assert rows[0]["margin"] == pytest.approx(0.04)
    table = robustness.write_tables(rows, {("07_x", 0): ("ok", 1.0), ("07_x", 1): ("ok", 1.0)}, [0, 1], tmp_path)
    assert "| 07_x | accuracy | >= 0.9 | 0.94 | 0.99 | 0.94 | 0.99 | 0.04 |" in table.read_text()


@pytest.mark.slow  # runs a notebook through nbconvert
def test_robustness_busy_runs_a_competitor_for_the_whole_run_and_stops_it(tmp_path, monkeypatch):
    # A stand-in chapter that records one check and whether another process was busy while it ran.
    import nbformat

    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    code = (
        "import subprocess\n"
        "from course_utils import checks\n"
        "busy = 'while True: pass' in subprocess.run(['ps', '-eo', 'args'], capture_output=True, text=True).stdout\n"
        "checks.check('competitor running', float(busy), at_least=1, why='--busy keeps one core busy')\n"
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), notebooks / "01_x.ipynb")
    monkeypatch.setattr(robustness, "ROOT", tmp_path)
    out = tmp_path / "out"
    assert robustness.main(["--busy", "--seeds", "0", "--out", str(out)]) == 0
    table = (out / "spread.md").read_text()
    assert "--busy" in table and "| 01_x | competitor running | >= 1 | 1 |" in table
    left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "while True: pass" not in left, "the competing process should be stopped when the run ends"


def test_a_check_as_a_cells_last_line_echoes_no_bare_number():
    from IPython.core.formatters import DisplayFormatter

    value = checks.check("speed-up", 3.5, at_least=2, why="fused attention is faster")
    assert value == 3.5 and value * 2 == 7.0 and f"{value:.1f}" == "3.5", "the value is still a number to compute with"
    assert DisplayFormatter().format(value) == ({}, {}), "Jupyter would print the bare float under the check cell"
    assert DisplayFormatter().format(3.5)[0], "a plain float is echoed (the formatter works)"
