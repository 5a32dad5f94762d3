"""lease-store: what a leased session may run on the job store."""

from __future__ import annotations

import json

from proctor.guard.call import PRE_TOOL

NAME = "lease-store"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
SUMMARY = "a leased session forks outside its own job, or waits on a job not beneath it"
CATCHES = ("`proctor job fork` by a session under a live job that names neither its own job (shrinking "
           "its write paths) nor --parent <its job> (as flags, or a --stdin record in a quoted "
           "heredoc); and `proctor job wait` on any job that is not one of its descendants.")
WHY = ("One author per job: widening a boundary, changing the plan's shape and verifying a result "
       "are the forking session's. The store refuses these too; the guard refuses them at the call, "
       "with the caller's session known, before anything runs.")


def check(ctx) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None:
        return []
    lease = job["id"]
    findings = []
    for argv in ctx.proctor_commands():
        if argv[:2] == ["job", "fork"]:
            verdict = _fork_allowed(argv[2:], lease, ctx.shell_writes.heredocs)
            if verdict:
                findings.append(("rule", verdict))
        elif argv[:2] == ["job", "wait"]:
            target = next((a for a in argv[2:] if not a.startswith("-")), None)
            if target and target not in ctx.descendants(lease):
                findings.append(("rule", f"proctor job wait {target}: a session holding {lease} waits only on "
                                         f"jobs forked beneath it; verifying {target} is its forking session's"))
    return findings


def _fork_allowed(args: list[str], lease: str, heredocs: list[str]) -> str | None:
    if "--schema" in args:
        return None
    job_id, parent = None, None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--parent" and i + 1 < len(args):
            parent = args[i + 1]
            i += 2
            continue
        if arg.startswith("--parent="):
            parent = arg.split("=", 1)[1]
        elif arg in ("--criteria", "--write-paths", "--deny-paths", "--read-paths", "--check", "--depends-on",
                     "--timeout", "--model", "--checkpoint", "--lease", "-o", "--output"):
            i += 2
            continue
        elif not arg.startswith("-") and job_id is None:
            job_id = arg
        i += 1
    if "--stdin" in args and parent is None and job_id is None:
        for body in heredocs:
            try:
                record = json.loads(body)
            except ValueError:
                continue
            if isinstance(record, dict):
                job_id, parent = record.get("id"), record.get("parent")
                break
        else:
            return None  # a record proctor cannot see here; the store grades it
    if job_id == lease or parent == lease:
        return None
    return (f"proctor job fork {job_id or ''}: a session holding {lease} may fork only children of its own "
            f"job (--parent {lease}) or shrink its own write paths; anything else is its forking session's")
