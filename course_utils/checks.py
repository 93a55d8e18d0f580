"""Check cells that say what they measured, so that their bounds can be justified.

A chapter proves a claim about a measurement (an accuracy, a slope, a speed-up) with a bound. A
bound is only honest if it holds for other random seeds and other machines, so every such check
goes through :func:`check`::

    checks.check("greedy exact match on held-out dates", greedy_accuracy, at_least=0.95,
                 why="greedy decoding of a trained model should get almost every date right")

It raises ``AssertionError`` with a message a learner can act on when the value is out of bounds,
and returns the value (a float that Jupyter does not echo, so that a check as a cell's last line shows
nothing more than an ``assert`` would). When ``$COURSE_RECORD`` names a file, it also appends one JSON line there (the
quantity, its bounds, the value, the seed offset), which ``course robustness`` collects from runs
with ``COURSE_SEED=0, 1, 2`` into a table of each quantity's spread next to its bound.

Exact identities (shapes, ``torch.allclose`` against an oracle) stay plain ``assert`` statements:
they do not depend on luck, so there is no spread to measure.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

__all__ = ["check", "Checked", "RECORD_ENV"]

RECORD_ENV = "COURSE_RECORD"


class Checked(float):
    """The value a check measured: a float in every computation, but not echoed as a cell's result."""

    def _ipython_display_(self) -> None:
        pass


def _as_number(value, name: str) -> float:
    try:
        number = float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        raise TypeError(f"check {name!r}: the value must be a number, got {type(value).__name__}") from None
    return number


def _record(entry: dict) -> None:
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def check(
    name: str, value, *, at_least: float | None = None, at_most: float | None = None, why: str = "", unit: str = ""
) -> float:
    """Assert ``at_least <= value <= at_most`` (either bound may be omitted) and record the value.

    ``name`` says what was measured, ``why`` what the claim is; both appear in the error message.
    NaN never passes. Returns the value as a float (a :class:`Checked`, which Jupyter does not echo).
    """
    if at_least is None and at_most is None:
        raise ValueError(f"check {name!r} needs at_least, at_most or both")
    if at_least is not None and at_most is not None and at_least > at_most:
        raise ValueError(f"check {name!r}: at_least={at_least} is above at_most={at_most}")
    number = _as_number(value, name)
    from . import env

    passed = (
        not math.isnan(number) and (at_least is None or number >= at_least) and (at_most is None or number <= at_most)
    )
    _record(
        {
            "name": name,
            "value": number,
            "at_least": at_least,
            "at_most": at_most,
            "passed": passed,
            "seed_offset": env.seed_offset(),
            "unit": unit,
        }
    )
    if not passed:
        bounds = " and ".join(
            part
            for part in (
                f"at least {at_least:g}{unit}" if at_least is not None else "",
                f"at most {at_most:g}{unit}" if at_most is not None else "",
            )
            if part
        )
        message = f"{name}: measured {number:.4g}{unit}, expected {bounds}"
        if why:
            message += f". {why}"
        raise AssertionError(message)
    return Checked(number)
