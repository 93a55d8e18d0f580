"""The stages of `course grade` (course_grader.autograde runs them in a row).

select   which submissions this run reads, which rows it keeps from the last run, and why
admit    each selected submission read as data: a job to run, or an error row
run      the jobs, in forked workers, in one sandbox session
publish  the rows: scores, manual grades, names, messages; feedback, state, CSV and report
records  what the stages hand each other and keep: GradeRecord, the state between runs, the points tables
"""
