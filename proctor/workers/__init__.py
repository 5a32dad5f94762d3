"""Workers: agent CLIs run on jobs unattended (`proctor work`).

executors/ turns each CLI's stream into proctor's events (one module per CLI, one small
interface); runner.py runs one attempt and stops it (idle limit, grace window after the final
reply, wall clock, spend, a fatal error); commit.py writes the commit a worker cannot forge;
work.py runs a job (or its children in depends_on order) up the ladder of workers, grades
each attempt with the code `proctor job wait` uses, and commits what passed.
"""
