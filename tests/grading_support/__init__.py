"""What the grading tests share, and the load test (`make grade-load`): not part of the installed package.

fixtures     submissions built from answer files (tests/submissions/), attacks included
grade_load   a class's worth of generated submissions graded in one run, timed, checked
"""
