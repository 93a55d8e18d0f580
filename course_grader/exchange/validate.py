"""The lab's Validate button, telling the truth: a syntax error by its cell and line, a missing test cell by name.

nbgrader's Validate runs the notebook and lists the test cells that failed. Two situations mislead a
learner there: a syntax error in an answer cell shows only as one NameError per test below it (the
function was never defined), and a test cell deleted outside the lab is not missed at all ("Success!"),
while the grader will restore it and run it. `CourseValidator` checks both before nbgrader's own run:

- every code cell is parsed as IPython would run it (magics included); the first that does not parse is
  the whole answer: "SyntaxError in the cell that starts with `def self_attention(...` (line 4): ...";
- the release lists its graded cells in the notebook's metadata (``course_grading.graded_cells``,
  written by ``course release``); any of them missing from the learner's copy is named, with what to do.

The validate server extension (``validate_extension.py``) makes the lab's Validate button use it.
"""

from __future__ import annotations

import os
from pathlib import Path

from nbgrader.validator import Validator

GRADED_CELLS = "graded_cells"  # metadata["course_grading"][GRADED_CELLS]: grade ids of the release's graded cells


def graded_cell_ids(nb) -> list[str]:
    """The grade ids of a notebook's graded cells (tests, written answers), in order."""
    return [
        str(cell.metadata["nbgrader"]["grade_id"])
        for cell in nb.cells
        if (cell.get("metadata", {}).get("nbgrader") or {}).get("grade") and "grade_id" in cell.metadata["nbgrader"]
    ]


def record_graded_cells(release_notebook: Path) -> None:
    """Write the release notebook's graded cells into its metadata, for the Validate button of every copy."""
    import nbformat

    nb = nbformat.read(release_notebook, as_version=4)
    nb.metadata.setdefault("course_grading", {})[GRADED_CELLS] = graded_cell_ids(nb)
    nbformat.write(nb, release_notebook)


def syntax_errors(nb) -> list[dict]:
    """The code cells that do not parse as IPython runs them: [{"source", "error"}], at most the first one."""
    from IPython.core.inputtransformer2 import TransformerManager

    transformer = TransformerManager()
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        try:
            compile(transformer.transform_cell(source), "<cell>", "exec")
        except SyntaxError as error:
            first = next((line for line in source.splitlines() if line.strip()), "")
            where = f"line {error.lineno}" if error.lineno else "somewhere"
            bad_line = (error.text or "").rstrip()
            message = (
                f"SyntaxError in the cell that starts with `{first[:60]}` ({where}): {error.msg}"
                + (f"\n    {bad_line}" if bad_line else "")
                + "\nFix it first: nothing defined in that cell exists, so the tests below it cannot run."
            )
            return [{"source": source.strip(), "error": message, "raw_error": message}]
        except (ValueError, TypeError) as error:  # null bytes and the like
            message = f"The cell that starts with `{source[:60]}` cannot be read by Python: {error}"
            return [{"source": source.strip(), "error": message, "raw_error": message}]
    return []


def missing_graded_cells(nb) -> list[dict]:
    """Graded cells of the release that the learner's copy no longer has (deleted, or their metadata lost)."""
    expected = (nb.metadata.get("course_grading") or {}).get(GRADED_CELLS) or []
    present = set(graded_cell_ids(nb))
    missing = [str(grade_id) for grade_id in expected if str(grade_id) not in present]
    return [
        {
            "source": f"(the graded cell {grade_id!r} of the release)",
            "error": (
                f"The graded cell {grade_id!r} is missing from this notebook (deleted, or pasted without its "
                "metadata). The grader puts the release's version back and grades that one: copy your work "
                "into a fresh copy of the exercise (fetch it again, or use the release) to see the tests it holds."
            ),
            "raw_error": f"missing graded cell {grade_id}",
        }
        for grade_id in missing
    ]


class CourseValidator(Validator):
    """nbgrader's Validator, after the course's two checks (see the module's docstring)."""

    def validate(self, filename: str) -> dict:
        import nbformat

        nb = nbformat.read(os.path.abspath(filename), as_version=4)
        broken = syntax_errors(nb)
        if broken:
            return {"failed": broken}  # the NameErrors that would follow say nothing more
        results = super().validate(filename)
        missing = missing_graded_cells(nb)
        if missing:
            results["failed"] = missing + list(results.get("failed", []))
        return results
