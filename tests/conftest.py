import os

import pytest
import torch

# One thread per test worker keeps two workers from fighting over two cores.
torch.set_num_threads(int(os.environ.get("COURSE_THREADS", "1")))

# The modules that take longest, longest first: `course test` hands whole modules to its two workers
# in collection order, and the grading pipeline (56 submissions graded) must not start after the others:
# it did, alphabetically, and the part took 20 minutes instead of 13. Measured with --durations on a
# 2-core AMD EPYC from a fresh clone: pipeline about 700 s, attacks 280, learner path 150, feedback 110,
# book 65, every other module under 60. The order only changes how the work is shared, never what runs.
SLOWEST_MODULES_FIRST = (
    "test_grading_pipeline.py",
    "test_grading_attacks.py",
    "test_devices_chapters.py",
    "test_learner_path.py",
    "test_grading_feedback.py",
    "test_html.py",
)


def pytest_collection_modifyitems(config, items):
    from course_utils.cli import named_first

    items[:] = named_first(items, SLOWEST_MODULES_FIRST, lambda item: item.path.name)  # a module keeps its order


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
