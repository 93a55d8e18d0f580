"""nbgrader configuration for "Transformers from the Ground Up".

nbgrader reads this file when it runs from the repository root (`nbgrader ...`, or the formgrader in
JupyterLab). The `course` command (course_grader) loads the same file, so the two never disagree.

Layout: the repository root is the course directory; assignments live in `solutions/<id>/<id>.ipynb`
(the nbgrader "source" directory); release/, submitted/, autograded/, feedback/ and gradebook.db are
generated and never committed.
"""

import os

c = get_config()  # noqa: F821  (injected by traitlets when it loads this file)

COURSE_ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "transformers-ground-up"
c.CourseDirectory.root = COURSE_ROOT
c.CourseDirectory.source_directory = "solutions"

# The exchange is the folder shared with learners (release -> fetch -> submit -> collect). Point
# COURSE_EXCHANGE at a folder every learner can reach, e.g. /srv/nbgrader/exchange on a JupyterHub.
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", os.path.join(COURSE_ROOT, "exchange"))

# Collecting reads the exchange's inbound folder, which every learner can write: the course's collect
# copies folders and regular files only and never follows a link there (course_grader/exchange/collect.py),
# for `course collect`, `nbgrader collect` and the formgrader's collect button alike.
c.ExchangeFactory.collect = "course_grader.exchange.collect.SafeExchangeCollect"

# Feedback must not reveal the hidden tests: they stay useful for the next cohort. ClearHiddenTests
# takes them out of the cells' code, LearnerErrors out of the tracebacks (a failing test shows its
# message and the frames of the learner's own code; course_grader/exchange/feedback.py).
c.GenerateFeedback.preprocessors = [
    "course_grader.exchange.feedback.FeedbackLabels",  # nbgrader's GetGrades, and each part's title for the page
    "nbgrader.preprocessors.ClearHiddenTests",
    "course_grader.exchange.feedback.LearnerErrors",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# What learners write is data: the pages made from their notebooks (the feedback, the formgrader's
# grading pages) show their Markdown, HTML and rich outputs sanitised, and run none of their
# JavaScript (nbconvert's sanitize_html, with ammonia's sanitiser: course_grader/ground/safe_html.py).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {
    "markdown2html": "course_grader.ground.safe_html.markdown2html",
    "clean_html": "course_grader.ground.safe_html.clean_html",
}

# A plain `nbgrader autograde` (and the formgrader's per-submission Autograde button, which runs it)
# would run learners' code with the instructor's rights: it refuses to start, before it writes
# anything, and names the command to use, `course grade` (course_grader), which confines every
# kernel. The course's server extension makes the formgrader's button run `course grade` itself
# (course_grader/exchange/formgrader.py, server_extension.py).
c.Autograde.exporter_class = "course_grader.exchange.formgrader.ConfinedOnlyExporter"

# `nbgrader export` (and `course export`): unsubmitted work has empty scores and a `submitted` column says so,
# where nbgrader's own export writes 0.0; fields are quoted (course_grader/exchange/export.py).
c.ExportApp.plugin_class = "course_grader.exchange.export.CourseCsvExport"

# Execution settings (`course grade` puts each assignment's own time limits on top).
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.OverwriteCells.add_missing_cells = True
