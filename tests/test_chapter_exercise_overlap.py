"""Chapter 02 teaches what graded exercise 1 practises, on other numbers.

Exercise ``ex1_manual_attention`` asks for scores, weights and outputs of self-attention computed by
hand (part 1, 6 of its 16 automatic points). A chapter that computes them on the same inputs hands the
answers out. Two guards:

- static: no matrix written in chapter 02's code is one of the exercise's literal matrices (its
  inputs, its answers, its test arrays), rows in any order;
- executed: chapter 02, run from top to bottom, prints no row of the exercise's graded weights or
  outputs (whatever route computed them).
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "02_self_attention.ipynb"
EXERCISE = ROOT / "solutions" / "ex1_manual_attention" / "ex1_manual_attention.ipynb"


def code_sources(path: Path) -> list[str]:
    """The code cells of a notebook, IPython magics and shell lines removed so that ``ast`` can parse them."""
    notebook = nbformat.read(path, as_version=4)
    return [
        "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def _as_matrix(node: ast.AST) -> np.ndarray | None:
    """A list/tuple of equally long lists/tuples of plain numbers, as a float array; otherwise None."""
    if not isinstance(node, (ast.List, ast.Tuple)) or len(node.elts) < 2:
        return None
    if not all(isinstance(row, (ast.List, ast.Tuple)) and row.elts for row in node.elts):
        return None
    try:
        rows = ast.literal_eval(node)
    except ValueError:
        return None
    if len({len(row) for row in rows}) != 1:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for row in rows for x in row):
        return None
    return np.array(rows, dtype=float)


def literal_matrices(source: str) -> list[np.ndarray]:
    """Every matrix written out in ``source`` (``[[1, 0], [0, 1]]``, inside ``np.array(...)``,
    ``torch.tensor(...)`` or anywhere else)."""
    return [matrix for node in ast.walk(ast.parse(source)) if (matrix := _as_matrix(node)) is not None]


def same_up_to_row_order(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    return any(np.allclose(a[list(order)], b) for order in itertools.permutations(range(a.shape[0])))


def graded_rows() -> list[np.ndarray]:
    """The rows of the exercise's hand-computed weights and outputs (the solution's ``*_by_hand``).

    The scaled scores are left out: with d_k = 2 and integer vectors they are multiples of 1/sqrt(2),
    numbers any such example shows; the weights and outputs belong to the exercise's inputs alone.
    """
    rows = []
    for source in code_sources(EXERCISE):
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_by_hand")
                and "scores" not in node.targets[0].id
            ):
                matrix = _as_matrix(node.value)
                if matrix is not None:
                    rows.extend(matrix)
    return rows


_NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def printed_rows_matching(text: str, row: np.ndarray, tolerance: float = 6e-4) -> list[str]:
    """Lines of ``text`` with consecutive numbers equal to ``row``'s entries in any order."""
    hits = []
    target = np.sort(row)
    for line in text.splitlines():
        numbers = [float(n) for n in _NUMBER.findall(line)]
        for start in range(len(numbers) - len(row) + 1):
            window = np.sort(numbers[start : start + len(row)])
            if np.allclose(window, target, atol=tolerance, rtol=0):
                hits.append(line.strip())
                break
    return hits


# --------------------------------------------------------------------------------------------
# The guards work (each can fail)
# --------------------------------------------------------------------------------------------


def test_the_exercise_inputs_are_found():
    exercise = [m for source in code_sources(EXERCISE) for m in literal_matrices(source)]
    part_one_input = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert any(np.array_equal(m, part_one_input) for m in exercise), (
        "the parser should find the exercise's X of part 1 (if the exercise changed, update this test)"
    )
    assert len(graded_rows()) == 6, "three rows of weights and three rows of outputs are graded by hand"


def test_the_static_guard_catches_the_exercise_input_in_any_form():
    part_one_input = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    for source in (
        "X = torch.tensor([[1., 0.], [0., 1.], [1., 1.]], dtype=torch.float64)",
        "X = np.array(((0, 1), (1, 1), (1, 0)))",
        "rows = [[1.0, 0.0],\n        [0.0, 1.0],\n        [1.0, 1.0]]",
    ):
        found = literal_matrices(source)
        assert any(same_up_to_row_order(m, part_one_input) for m in found), source
    other = literal_matrices("X = torch.tensor([[1., 0.], [0., 1.], [2., 1.]])")
    assert other and not any(same_up_to_row_order(m, part_one_input) for m in other)


def test_the_output_guard_catches_printed_weights_in_any_layout():
    row = np.array([0.4011, 0.1978, 0.4011])
    assert printed_rows_matching("tensor([[0.4011, 0.1978, 0.4011],", row)
    assert printed_rows_matching("weights [[0.198, 0.401, 0.401], [...]]", row), "rounded and permuted"
    assert not printed_rows_matching("tensor([[0.4011, 0.2978, 0.4011],", row)


# --------------------------------------------------------------------------------------------
# Chapter 02 against exercise 1
# --------------------------------------------------------------------------------------------


def test_chapter_02_code_does_not_contain_the_exercise_matrices():
    exercise = [m for source in code_sources(EXERCISE) for m in literal_matrices(source)]
    for index, source in enumerate(code_sources(CHAPTER)):
        for matrix in literal_matrices(source):
            for used in exercise:
                assert not same_up_to_row_order(matrix, used), (
                    f"code cell {index} of chapter 02 writes the matrix {matrix.tolist()}, which exercise "
                    "ex1_manual_attention uses: the chapter would compute the exercise's answers. Use other numbers."
                )


def test_chapter_02_markdown_does_not_restate_the_exercise_vectors():
    notebook = nbformat.read(CHAPTER, as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    written = re.findall(r"\[\s*(-?\d+(?:\s*,\s*-?\d+)+)\s*\]", text)  # e.g. "[1, 0]" in "x_1 = [1, 0]"
    vectors = {tuple(float(x) for x in found.split(",")) for found in written}
    exercise_vectors = {(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)}
    assert not exercise_vectors <= vectors, "chapter 02's text states all three of the exercise's vectors"


@pytest.mark.slow
@pytest.mark.notebook
def test_chapter_02_prints_none_of_the_graded_values(tmp_path):
    from nbclient import NotebookClient

    notebook = nbformat.read(CHAPTER, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(CHAPTER.parent)}}
    ).execute()
    rows = graded_rows()
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        text = "\n".join(
            output.get("text", "") + output.get("data", {}).get("text/plain", "") for output in cell.get("outputs", [])
        )
        for row in rows:
            hits = printed_rows_matching(text, row)
            assert not hits, (
                f"chapter 02's code cell {index} prints {hits[0]!r}, a row of the graded answers "
                f"{row.tolist()} of ex1_manual_attention"
            )
