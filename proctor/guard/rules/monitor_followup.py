"""monitor-followup: an idle session bound to a job is handed its monitors' follow-up."""

from __future__ import annotations

from proctor.guard.call import STOP

NAME = "monitor-followup"
DEFAULT = "deny"
EVENTS = (STOP,)
SUMMARY = "a session bound to a job stops while its monitors' follow-up is waiting"
CATCHES = ("At the Stop of a session acting under a job, the oldest follow-up of that job's monitors "
           "that nobody has been handed yet. The stop is refused with the follow-up as its reason, so the "
           "agent carries on with what its monitors saw; each follow-up is handed over once.")
WHY = ("A monitor watches something for the job after the agent's own command ended (CI, a deploy, a "
       "log). Its events wait while the agent is working and go as soon as it is idle; the Stop hook is "
       "the moment an interactive session becomes idle.")


def check(ctx) -> list[tuple[str, str]]:
    if ctx.job is None or ctx.conn is None or ctx.call.subagent:
        return []
    try:
        from proctor.store import followups

        ready = followups.next_ready(ctx.conn, ctx.job["id"])
    except Exception:  # a store without monitors (an older schema) has nothing to hand over
        return []
    if ready is None:
        return []
    via = f"stop-hook:{ctx.call.host}:{ctx.call.session or '-'}"

    def delivered(conn, state_dir, followup=ready["id"]):
        from proctor.store import followups as store

        store.mark_delivered(conn, followup, via)

    ctx.later(delivered)
    return [("rule", ready["text"])]
