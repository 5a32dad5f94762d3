"""Reaching a verdict: every rule the workspace has not turned off, each finding capped at the
rule's effective decision; deny if any finding denies, advise if any advises, else pass.

Judge first, answer, record after: `judge` reaches the verdict without writing anything, and
the verdict's `finish()` writes the call's records once the answer is out. A rule that raises
is an advisory naming it; recording that fails is a note in the debug output. Neither ever
turns a deny into a pass.

A spawn (a payload carrying a prompt) is recorded, never judged: it lands on the trail as an
agent_spawn event with the prompt as a blob, joined to a job only when the prompt's first
non-blank line is `lease: <id>`, and passes without a single rule evaluated.
"""

from __future__ import annotations

from proctor.guard.call import NOTIFY, POST_TOOL, PRE_TOOL, PROMPT, STOP, Call
from proctor import jobrecord

TYPE_CHECKING = False  # true for the type checker only: the hook never loads `typing`
if TYPE_CHECKING:
    from typing import Callable

DENY, ADVISE, PASS = "deny", "advise", "pass"


class Verdict:
    __slots__ = ("decision", "findings", "lease", "lease_from", "finish", "checkout")

    def __init__(
        self,
        findings: list[tuple[str, str, str]],
        lease: str | None = None,
        lease_from: str | None = None,
        checkout: str | None = None,
    ) -> None:
        self.findings = findings  # (rule, level, message)
        self.lease, self.lease_from = lease, lease_from
        self.checkout = checkout  # the checkout whose record answered, for marker and contested
        levels = {level for _, level, _ in findings}
        self.decision = DENY if DENY in levels else ADVISE if ADVISE in levels else PASS
        self.finish: Callable[[], list[str]] = lambda: []  # writes the call's records after the answer; returns notes

    def text(self) -> str:
        ordered = [f for f in self.findings if f[1] == DENY] + [f for f in self.findings if f[1] == ADVISE]
        lines = [f"{level} [{rule}]: {message}" for rule, level, message in ordered]
        if self.lease and self.lease_from in ("marker", "contested") and self.checkout:
            lines.append(
                f"(acting under lease {self.lease}, from {self.lease_from}: the record of checkout "
                f"{self.checkout}, where proctor job exec {self.lease} was run; every caller there that "
                f"reports no session acts under it)"
            )
        elif self.lease:
            lines.append(f"(acting under lease {self.lease}, from {self.lease_from})")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "decision": self.decision,
            "lease": self.lease,
            "lease_from": self.lease_from,
            "findings": [{"rule": r, "decision": level, "message": m} for r, level, m in self.findings],
        }


def spawn_job(prompt: str) -> str | None:
    """The job a delegation names: its first non-blank line must read `lease: <id>`."""
    for line in prompt.splitlines():
        if line.strip():
            head = line.strip()
            if head.lower().startswith("lease:"):
                candidate = head[len("lease:") :].strip()
                if jobrecord.is_job_id(candidate):
                    return candidate
            return None
    return None


def judge(call: Call, flag_lease: str | None, environ) -> Verdict:
    """The verdict, reached before anything is written. Its `finish()` then writes the call's
    records (bounded: a store not free at once is skipped, see Context.flush) and returns what
    it could not do, for the debug output. A rule that raises is reported as an advisory
    naming it, and every other finding stands: nothing that fails while judging or recording
    turns a deny into a pass."""
    from proctor.guard.context import Context
    from proctor.guard.rules import ALL

    ctx = Context(call, flag_lease, environ)
    try:
        if call.prompt is not None:
            if call.event == PRE_TOOL:
                ctx.later(_record_spawn(ctx))
            elif call.event == POST_TOOL:
                _guarded(ctx, "binding the spawn", lambda: _bind_spawned(ctx))
            _record_session(ctx, None)
            verdict = Verdict([])
        else:
            findings: list[tuple[str, str, str]] = []
            decisions = ctx.settings.get("rules", {})
            for rule in ALL:
                if call.event not in rule.EVENTS:
                    continue
                decision = decisions.get(rule.NAME, rule.DEFAULT)
                if decision == "off":
                    continue
                try:
                    found = list(rule.check(ctx) or ())
                except Exception as exc:  # one rule's failure is its own finding, never the verdict's end
                    findings.append(
                        (
                            rule.NAME,
                            ADVISE,
                            f"this rule could not judge the call ({type(exc).__name__}: "
                            f"{exc}); the other rules' findings stand",
                        )
                    )
                    continue
                for strength, message in found:
                    # "rule": a finding at the rule's full strength takes its effective decision;
                    # "advise": one the rule only ever advises (an uncertainty, an opt-in boundary).
                    level = decision if strength == "rule" else ADVISE
                    findings.append((rule.NAME, level, message))
            verdict = Verdict(findings, ctx.lease, ctx.lease_from, ctx.root)
            if call.event == PRE_TOOL and verdict.decision != DENY:
                ctx.pending.extend(ctx.allowed_only)
                _guarded(ctx, "binding proctor job exec", lambda: _bind_exec(ctx))
            _record_session(ctx, verdict)
    except BaseException:
        ctx.close()
        raise
    verdict.finish = ctx.finish
    return verdict


def _guarded(ctx, what: str, step) -> None:
    try:
        step()
    except Exception as exc:
        ctx.notes.append(f"{what} failed ({type(exc).__name__}: {exc}); skipped")


def _record_spawn(ctx):
    call = ctx.call
    job = spawn_job(call.prompt or "")

    def action(conn, state_dir):
        from proctor import trail

        trail.append(
            conn,
            state_dir,
            "agent_spawn",
            f"session:{call.host}:{call.session or '-'}",
            job,
            {
                "host": call.host,
                "session": call.session,
                "subagent": call.subagent,
                "action": call.spawn_label,
                "tool_use_id": call.tool_use_id,
                "job": job,
                "trace": ctx.environ.get("TRACEPARENT"),
                "spawner": ctx.baggage.get("proctor.spawner"),
            },
            payload=(call.prompt or "").encode("utf-8", "surrogateescape"),
        )

    return action


def _bind_spawned(ctx) -> None:
    """A subagent launched with `lease: <id>` is bound to that job by its agent id, when its
    own first call has not bound it already (see Context._subagent_job)."""
    call = ctx.call
    agent_id = (call.response or {}).get("agentId")
    job = spawn_job(call.prompt or "")
    if not (isinstance(agent_id, str) and agent_id and call.session and job):
        return
    if ctx.spawn_refusal(job, ctx.lease) is not None:
        return  # the spawner's own lease, or the job's state, forbids it (see Context.spawn_refusal)
    from proctor.store.rows import agent_scope

    ctx.take_for_agent(job, agent_scope(call.host, call.session, agent_id), agent_id)


def _taken_here(ctx) -> list:
    """The jobs this call takes in the caller's own checkout: `proctor job exec <id>` in a shell,
    or proctor's MCP tool job_exec (the host started `proctor mcp` in the session's directory).
    One taken with a worktree is for whoever works there, not for the caller making it."""
    call = ctx.call
    if call.proctor_tool:
        args = call.tool_args if isinstance(call.tool_args, dict) else {}
        job = args.get("id")
        return [job] if call.proctor_tool == "job_exec" and isinstance(job, str) and not args.get("worktree") else []
    out = []
    for argv in ctx.proctor_commands():
        if argv[:2] != ["job", "exec"]:
            continue
        if any(a == "--worktree" or a.startswith("--worktree=") for a in argv):
            continue
        out.append(next(iter(ctx.positional(argv[2:])), None))
    return out


def _bind_exec(ctx) -> None:
    """When `proctor job exec <id>` goes through, the caller acts under that job from now on."""
    call = ctx.call
    if not (call.session or call.subagent):
        return  # a caller with no ids is bound by the checkout's record, which exec itself writes
    for job in _taken_here(ctx):
        row = ctx.job_row(job) if job else None
        if row is None or not jobrecord.in_flight(row["state"]):
            continue
        if row["state"] == "running" and not jobrecord.taken_here(row, ctx.root):
            continue  # taken in another checkout: the store refuses this exec
        if ctx.job is not None and ctx.job["id"] != job and jobrecord.in_flight(ctx.job["state"]):
            continue  # one-way while the held job is in flight; the store refuses the exec

        def action(conn, state_dir, job=job):
            from proctor.store import rows
            from proctor.timeutil import iso

            rows.bind(conn, rows.agent_scope(call.host, call.session or "", call.subagent), job, iso(ctx.now))

        ctx.later(action)


# What a session's main thread is doing, from the event its hook just saw. A monitor's
# follow-up is held while it is anything but idle (proctor monitor wait reads this).
WORKING, IDLE, PERSON, PLAN = "working", "idle", "person", "plan"
_WAITS_FOR_PERSON = frozenset(("permission_prompt", "elicitation_dialog"))


def session_activity(call: Call, verdict: Verdict | None) -> str | None:
    """working: a prompt, a tool call, a Stop refused (the agent carries on); idle: a Stop let
    through, or the host's idle notice; person: a permission prompt, a question, an
    elicitation; plan: a plan put to the person for approval (ExitPlanMode), until the tool
    returns. A subagent's events leave its session's main thread as it was."""
    if call.subagent:
        return None
    event = call.event
    if event == PRE_TOOL:
        return PLAN if call.tool == "ExitPlanMode" else PERSON if call.tool == "AskUserQuestion" else WORKING
    if event in (POST_TOOL, PROMPT):
        return WORKING
    if event == STOP:
        return WORKING if verdict is not None and verdict.decision == DENY else IDLE
    if event == NOTIFY:
        kind = call.raw.get("notification_type")
        return PERSON if kind in _WAITS_FOR_PERSON else IDLE if kind == "idle_prompt" else None
    return None


def _record_session(ctx, verdict: Verdict | None) -> None:
    call = ctx.call
    if not (call.session or call.subagent) and ctx.job is None:
        return

    activity = ctx.activity = session_activity(call, verdict)
    blocked = None if call.event != STOP or call.subagent else int(verdict is not None and verdict.decision == DENY)
    if blocked and getattr(ctx, "stop_counted", False):
        blocked = None  # monitor-followup counted this refusal itself, before answering
    if call.event == PROMPT and not call.subagent:
        blocked = 0  # a prompt starts a new row: the refusals before it are not counted on

    def action(conn, state_dir):
        from proctor import trail
        from proctor.store import sessions
        from proctor.timeutil import iso

        sessions.record_call(
            conn,
            call.host,
            call.session or "",
            call.subagent or "",
            iso(ctx.now),
            ctx.cwd,
            ctx.lease,
            ctx.lease_from,
            ctx.environ.get("TRACEPARENT"),
            ctx.baggage.get("proctor.spawner"),
            activity,
            blocked,
        )
        if verdict is not None and ctx.job is not None and call.event == PRE_TOOL:
            trail.append(
                conn,
                state_dir,
                "tool_call",
                f"session:{call.host}:{call.session or '-'}",
                ctx.job["id"],
                {
                    "tool": call.tool,
                    "decision": verdict.decision,
                    "subagent": call.subagent,
                    "lease_from": ctx.lease_from,
                },
                when=ctx.now,
            )

    ctx.later(action)
