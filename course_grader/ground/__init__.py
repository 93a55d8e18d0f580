"""The ground the grader's parts share: what one process hands another, where the files live, and how a
learner's files and text are read.

    messages   every file and JSON line one grading process hands another, as typed records
    layout     where the course's grading files live; the assignments, discovered from solutions/
    notebooks  nbgrader's marks in notebooks: cell roles, solution regions, hidden tests
    untrusted  learners' folders and the exchange read as data (no link followed, only regular files opened)
    report     the grades CSV, the Markdown grading report and the terminal summary
    render     learners' Markdown rendered in a separate process, with a size and a time budget
    safe_html  learners' HTML made safe to show (nh3)
"""
