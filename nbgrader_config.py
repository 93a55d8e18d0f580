"""nbgrader configuration for "Transformers from the Ground Up".

nbgrader reads this file when it runs from the repository root (`nbgrader ...`, or the formgrader in
JupyterLab). The `course` command (course_utils.grading) loads the same file, so the two never disagree.

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

# Feedback must not reveal the hidden tests: they stay useful for the next cohort.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# A plain `nbgrader autograde` runs learners' code with the instructor's rights; use `course grade`
# (course_utils.grading), which confines every kernel. These limits apply to both.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.OverwriteCells.add_missing_cells = True
