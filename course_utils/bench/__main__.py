"""``python -m course_utils.bench``: see :mod:`course_utils.bench.cli`."""

import sys

from .cli import main

sys.exit(main())
