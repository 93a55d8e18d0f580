"""Judging one notebook: read before it runs, run with its hidden tests decided outside the learner's kernel.

preflight      find, read, repair and inspect one submission before any of its code runs
static_checks  constructs in learners' code that can fake a grade, listed for review
execute        nbgrader's Execute step hardened (the guard's verdicts, dead kernels, timeouts)
judge          the hidden tests, decided in the grader's process
"""
