"""The maintainers' and set-up tools of the course: the `course` command and what it runs for the learner and
the maintainer (set-up, the book, the contents, the robustness sweep, the notebooks' clean filter).

    cli            the `course` command: setup, lab, test, release, grade, html, bench, ...
    learner_setup  `course setup`: the learner's exercises, Jupyter configuration, start page, git's clean filter
    contents       the chapters and exercises in order, read from the notebooks (titles, links, exercises)
    book           `course html`: the chapters as one static book
    book_theme     the book's style sheet and the HTML around each page
    robustness     `course robustness`: the chapters run with other seeds and settings
    nbclean        notebooks stored clean (no outputs): the command and git's clean filter

Built on the learner's library (course_utils) and the grader (course_grader); neither imports this package.
"""
