"""nbgrader's cycle and the class's pages: release, fetch, submit, collect, feedback, export, the formgrader.

pipeline            nbgrader's cycle step by step, through its Python API
collect             nbgrader's collect with the exchange read as data
export              the grades CSV of `course export`
feedback            what a failing test shows a learner; feedback that follows every grade change
formgrader          learners' names, manual-grading flags kept, no unconfined autograde
validate            the lab's Validate button, telling the truth
validate_extension  the server extension behind that button
server_extension    the formgrader's Autograde button runs `course grade`
"""
