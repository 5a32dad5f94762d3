"""monitor-followup: a session bound to a job is handed its monitors' follow-ups, and woken for them.

See proctor/monitors/wake.py for the three ways a follow-up reaches the model and when it
counts as delivered.
"""

from __future__ import annotations

from proctor.guard.call import PROMPT, STOP
from proctor.guard.context import Context

NAME = "monitor-followup"
DEFAULT = "deny"
EVENTS = (STOP, PROMPT)
ORDER = 170  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a session bound to a job stops while its monitors' follow-up is waiting, or with no wait to wake it"
CATCHES = (
    "At the Stop of a session acting under a job: the oldest follow-up of that job's monitors that the "
    "model has not been given yet (the stop is refused with it as the reason); or, when the job has "
    "live monitors and no `proctor monitor wait` runs among the session's background tasks, the stop "
    "is refused once with the command to start, so the session is woken when a follow-up is ready. "
    "At most three refusals in a row, then the stop goes through. With advise, nothing is refused: "
    "the person is told, and the follow-up goes to the model with the next prompt, or from a wait "
    "the session started."
)
WHY = (
    "A monitor watches something for the job after the agent's own command ended (CI, a deploy, a "
    "log). Its events wait while the agent is working and go as soon as it is idle; an idle session "
    "is woken only by something it started, so it starts the wait."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    call = ctx.call
    if ctx.job is None or ctx.conn is None or call.subagent:
        return []
    from proctor.monitors import wake

    job = ctx.job["id"]
    try:
        pending = wake.undelivered(ctx.conn, job)
        live = wake.live_monitors(ctx.conn, job)
    except Exception:  # a store without monitors (an older schema) has nothing to hand over
        return []
    who = f"{call.host}:{call.session or '-'}"
    reader = who if call.session else "-"
    if call.event == PROMPT:
        # the person's prompt goes to the model now: the oldest follow-up goes with it
        if not pending:
            return []
        ready = pending[0]
        if wake.fits_a_hook(ready["text"]):
            ctx.later(_delivered(ready["id"], f"prompt:{who}"))
            return [("advise", ready["text"])]
        ctx.later(_printed(ready["id"], reader))  # pointed to; delivered once the transcript shows it read
        return [("advise", wake.too_long_text(ready, job))]
    # what the model was given whole from a wait's output (or a pointer's read): delivered
    printed = [f for f in pending if f["printed"]]
    if printed and call.transcript:
        seen = wake.read_by_model(call.transcript, {f["id"]: (wake.header(f["id"], job), f["text"]) for f in printed})
        for fid in seen:
            ctx.later(_delivered(fid, f"monitor-wait:{who}"))
        pending = [f for f in pending if f["id"] not in seen]
    blocking = ctx.settings.get("rules", {}).get(NAME, DEFAULT) == "deny"
    # refusals in a row, counted by the hook in the store and reset by any stop let through or
    # any prompt: a host's stop_hook_active is not needed to bound them
    blocks = wake.stop_blocks(ctx.conn, call.host, call.session or "")
    waiter = wake.waiter_running(call.raw.get("background_tasks"), job, call.host, call.session)
    # only Claude Code wakes an idle session when a background task ends: the wait is asked of
    # it; never of a `proctor work` worker, whose runner resumes it with the follow-up itself
    ask = live > 0 and not waiter and call.host == "claude" and not _worker(ctx)
    if not pending and not ask:
        return []
    # the wait is asked for once in a row of refusals (the first, or with each follow-up):
    # a model that does not start it is not asked again until its next stop chain
    if blocking and blocks < wake.MAX_STOP_BLOCKS and not (not pending and blocks > 0):
        asking = wake.ask_text(job, live, call.host, call.session) if ask else ""
        actions = [_counted(call)]
        if pending:
            ready = pending[0]
            if wake.fits_a_hook(ready["text"], len(asking) + 400):
                text, mark = ready["text"], _delivered(ready["id"], f"stop-hook:{who}")
            else:
                text, mark = wake.too_long_text(ready, job), _printed(ready["id"], reader)
            actions.append(mark)
            text += ("\n\n" + asking) if asking else ""
        else:
            text = asking
        # the count and the hand-over are written before the answer: a refusal the store could
        # not record would be repeated for ever, so it becomes a stop let through
        if _write_now(ctx, actions):
            ctx.stop_counted = True
            return [("rule", text)]
        blocks = wake.MAX_STOP_BLOCKS
        blocking = False
    # the stop goes through; the person is told, the model gets it later (prompt or wait)
    parts = []
    if pending:
        parts.append(
            f"{len(pending)} follow-up{'s' if len(pending) != 1 else ''} of job {job}'s monitors "
            f"wait{'s' if len(pending) == 1 else ''} for the model: "
            f"{'it goes' if len(pending) == 1 else 'they go'} with the next prompt"
            + (", or when the running wait wakes the session" if waiter else "")
        )
    if ask:
        parts.append(
            f"nothing will wake this session for them; `{wake.wait_command(job, call.host, call.session)}`"
            f" in the background would"
        )
    if blocks >= wake.MAX_STOP_BLOCKS:
        parts.append(
            f"the stop goes through after {blocks} refusals in a row"
            if blocking
            else "the store could not record a refusal, so the stop goes through"
        )
    return [("advise", "; ".join(parts) + ".")]


def _write_now(ctx, actions) -> bool:
    store = getattr(ctx, "_store", None)
    if store is None or not store.writable:
        return False
    try:
        with store.write() as conn:
            for action in actions:
                action(conn, store.state_dir)
        return True
    except Exception:
        return False


def _counted(call):
    def action(conn, state_dir):
        from proctor.store import sessions
        from proctor.timeutil import iso, now

        sessions.count_stop_block(conn, call.host, call.session or "", iso(now()))

    return action


def _delivered(followup: int, via: str):
    def action(conn, state_dir):
        from proctor.monitors import wake

        wake.mark_delivered(conn, followup, via)

    return action


def _printed(followup: int, reader: str):
    def action(conn, state_dir):
        from proctor.monitors import wake

        wake.mark_printed(conn, followup, reader)

    return action


def _worker(ctx) -> bool:
    """A `proctor work` worker: its hook is pinned by proctor (PROCTOR_WORKER_HOOK, under env -i)
    or inherits the runner's tag."""
    return bool(ctx.environ.get("PROCTOR_WORKER_HOOK") or ctx.environ.get("PROCTOR_WORKER_TAG"))
