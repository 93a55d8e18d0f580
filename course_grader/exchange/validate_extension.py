"""A Jupyter server extension: the lab's Validate button checks with the course's validator (validate.py).

nbgrader's validate extension answers the Validate button with ``nbgrader.validator.Validator``, which its
handler looks up in its own module when a request comes. Loading this extension puts the course's
``CourseValidator`` there, in the server's own process; the button, its URL and its answer's form stay
nbgrader's. Enabled for learners by `course lab` (course_tools/learner_setup.py) and deploy/install.sh:

    {"ServerApp": {"jpserver_extensions": {"course_grader.exchange.validate_extension": true}}}
"""

from __future__ import annotations


def _jupyter_server_extension_points():
    return [{"module": "course_grader.exchange.validate_extension"}]


def _load_jupyter_server_extension(serverapp) -> None:
    from nbgrader.server_extensions.validate_assignment import handlers

    from .validate import CourseValidator

    handlers.Validator = CourseValidator
    serverapp.log.info("course: the Validate button checks syntax and missing graded cells first")
