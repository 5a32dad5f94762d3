"""Monitors: commands the server runs for a job at an interval, and the follow-ups that wake
the job's idle agent with what they printed.

store.py declares and lists monitors (every creation rule and its stable error code);
run.py runs one monitor command with its limits; scheduler.py keeps every monitor on its
schedule under the four-at-once cap; followups.py groups a job's events and delivers them.
"""
