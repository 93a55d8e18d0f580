"""Every chapter's code on the meta device as on a GPU: no cell may mix devices (tests/device_audit.py).

The library's own entry points are checked in ``tests/test_devices.py``; this runs each chapter's code
cells, helpers and direct calls alike, with ``COURSE_DEVICE=meta``, so that a tensor a cell makes on the
CPU and hands to the device (chapter 04 once passed ``torch.tensor([64])`` with queries on the GPU) fails
here as it would on a learner's GPU. A chapter costs about as much as running it: training is cut to a
few steps, and a cell that loops on values a meta tensor does not have stops at its deadline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("[01]*.ipynb"))
CHAPTER_BUDGET_S = 240


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_chapter_keeps_one_device(chapter):
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "device_audit.py"), str(chapter), str(CHAPTER_BUDGET_S)],
        capture_output=True,
        text=True,
        timeout=CHAPTER_BUDGET_S + 120,
        cwd=chapter.parent,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("AUDIT ")]
    assert lines, f"the audit of {chapter.name} printed no report:\n{result.stderr[-3000:]}"
    report = json.loads(lines[-1][len("AUDIT ") :])
    mixed = [cell for cell in report["cells"] if cell["status"] == "device-mix"]
    assert not mixed, f"{chapter.name} mixes devices (it would fail on a GPU): " + "; ".join(
        f"cell {cell['cell']}: {cell['detail']}" for cell in mixed
    )
    ran = [cell for cell in report["cells"] if cell["status"] != "not-run"]
    assert len(ran) == len(report["cells"]), f"{chapter.name}: the audit ran out of time before the last cells"
