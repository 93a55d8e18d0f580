"""What the grader loads into every learner's kernel, by path and before any learner code (standard library only).

kernel_guard  the guard: output limits, the tests' references checked, threads and trace functions refused
references    the snapshot of the tests' references, compared and put back around each test
output        the limits on every output message and on each cell's total
kernel_calls  the judge's narrow channel: names looked up, functions called, results as data
"""
