import os

import pytest
import torch

# One thread per test worker keeps two workers from fighting over two cores.
torch.set_num_threads(int(os.environ.get("COURSE_THREADS", "1")))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
