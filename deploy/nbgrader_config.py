"""nbgrader's global configuration for every account of the class (installed by deploy/install.sh as
<prefix>/etc/jupyter/nbgrader_config.py, which every server of that environment reads).

It names the course and the exchange, so that a learner's Assignment List shows this course and its
Fetch/Submit buttons use the shared exchange. Both come from the environment JupyterHub gives each
server (deploy/jupyterhub_config.py: COURSE_ID, COURSE_EXCHANGE). The instructor's course directory has
its own nbgrader_config.py (the repository's), read on top of this one.
"""

import os

c = get_config()  # noqa: F821  (injected by traitlets)

c.CourseDirectory.course_id = os.environ.get("COURSE_ID", "transformers-ground-up")
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
