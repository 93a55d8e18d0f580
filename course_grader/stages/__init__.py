"""The stages of `course grade`, in a row (course_grader.autograde runs them; each is `stage(context, input)`).

select   which submissions this run reads, which rows it keeps from the last run, and why
admit    each selected submission read as data: a job to run, or an error row
run      the jobs, in forked workers, in one sandbox session
score    a row for every submission: scores, manual grades kept, review reasons, failing tests' messages
publish  the rows written down: names, feedback, the state between runs, the CSV and the report
records  the run's context, and what the stages hand each other and keep (Selection, Admission, Execution,
         Scored, GradeRecord, GradingRun); the state between runs
points   each assignment's points table, and a row's scores read from the gradebook against it
"""
