"""Declaring, listing and removing monitors, with the spec's rules and stable errors.

Intervals run from 10 s to 24 h; the description defaults to a readable excerpt of the
command; a card (a job) has at most eight monitors; the command's directory must be the
repository, the job's checkout, or a worktree attached to the job; the caller must
acknowledge that the command runs outside the sandbox (--allow-unsandboxed). Monitors are
deleted for good when their job leaves an active column, is archived, trashed or deleted, or
its column becomes passive. Adding and removing a monitor (a person's, an agent's, or the
server's pruning) goes on the activity trail (`monitor_added`, `monitor_removed`).

Also the records a person reads: each run of a monitor (`runs`) and each follow-up (`followups`,
`followup`).
"""

from __future__ import annotations

import os

from proctor import config as config_mod, jobrecord
from proctor import errors
from proctor.store import monitors as mrows
from proctor.store import rows
from proctor.timeutil import iso, now, parse_duration

MIN_INTERVAL, MAX_INTERVAL = 10.0, 86400.0
MAX_PER_JOB = 8
MAX_DESCRIPTION = 200  # characters; a description is one line of every follow-up it is in

# the codes are proctor/errors.py's; these names are kept for their readers
UNSANDBOXED_ACK_REQUIRED = errors.MONITOR_UNSANDBOXED_ACK_REQUIRED
INTERVAL_INVALID = errors.MONITOR_INTERVAL_INVALID
CWD_OUTSIDE_CARD = errors.MONITOR_CWD_OUTSIDE_CARD
LIMIT_REACHED = errors.MONITOR_LIMIT_REACHED
CARD_INACTIVE = errors.MONITOR_CARD_INACTIVE
NOT_FOUND = errors.MONITOR_NOT_FOUND
OUT_OF_SCOPE = errors.MONITOR_OUT_OF_SCOPE
FOLLOWUP_NOT_FOUND = errors.FOLLOWUP_NOT_FOUND
SANDBOXED_JOB = errors.MONITOR_SANDBOXED_JOB
MAX_ID = 2**62  # an id at or past this is no monitor's, nor a follow-up's (and a store's integer holds it)

_COLUMNS = mrows.COLUMNS


def _refuse(code: str, message: str) -> errors.Refused:
    return errors.Refused([(code, message)])


def excerpt(command: str, width: int = 60) -> str:
    """A readable excerpt of a command: one line, its whitespace folded, cut with an ellipsis."""
    text = " ".join(command.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def description_of(description, command: str) -> str:
    """The description a monitor is stored with: the one given, on one line (a newline would
    forge a line of the follow-ups it heads), without control characters, cut at
    MAX_DESCRIPTION characters with an ellipsis; else an excerpt of the command."""
    if isinstance(description, str):
        text = " ".join("".join(c if c.isprintable() else " " for c in description).split())
        if text:
            return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1].rstrip() + "…"
    return excerpt(command)


def parse_interval(raw) -> float:
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        raise _refuse(INTERVAL_INVALID, f"interval {raw!r}: {exc}; give 10s to 24h") from None
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise _refuse(INTERVAL_INVALID, f"interval {raw!r} is outside 10s to 24h")
    return seconds


def repository_root(checkout_root: str, common_dir: str) -> str:
    """The main work tree of the repository (worktrees hang off its git dir)."""
    if os.path.basename(common_dir.rstrip("/")) == ".git":
        return os.path.realpath(os.path.dirname(common_dir.rstrip("/")))
    return os.path.realpath(checkout_root)


def allowed_cwd(job: dict, cwd: str, repo_root: str) -> tuple[str, str]:
    """(the directory, what it lies in) where `job`'s monitor may run: the repository, the
    job's checkout (the worktree its holder took it in), or a worktree attached to it, or a
    directory inside one of them, resolved (a symlink out, a `..`, are where they lead). A
    directory inside another checkout nested in one of them (another job's worktree made in
    the tree), or inside a git directory, is not the job's."""
    from proctor.paths import find_checkout

    real = os.path.realpath(cwd)
    places = [(repo_root, "the repository")]
    if job.get("checkout_root"):
        places.append((os.path.realpath(job["checkout_root"]), f"{job['id']}'s checkout"))
    for path in job.get("worktrees") or ():
        places.append((os.path.realpath(path), f"a worktree attached to {job['id']}"))
    refusal = _refuse(
        CWD_OUTSIDE_CARD,
        f"{cwd} is not in the repository ({repo_root}), {job['id']}'s checkout"
        f"{' (' + places[1][0] + ')' if len(places) > 1 else ''}, nor a worktree "
        f"attached to it; run the command from one of those",
    )
    if not os.path.isdir(real):
        raise refusal
    try:
        checkout = os.path.realpath(find_checkout(real).root)
    except errors.ProctorError:
        raise refusal from None
    for root, what in places:
        if checkout != root or not (real == root or real.startswith(root.rstrip("/") + "/")):
            continue
        if ".git" in os.path.relpath(real, root).split(os.sep):
            raise _refuse(CWD_OUTSIDE_CARD, f"{cwd} is inside a git directory; run the command from the work tree")
        return real, what
    raise refusal


def job_is_active(cfg: config_mod.Config, job: dict) -> bool:
    column = config_mod.column_of_job(cfg, job)
    return bool(column and column[1])


def add(
    conn,
    cfg: config_mod.Config,
    repo_root: str,
    job_id: str,
    command: str | None,
    interval,
    description: str | None,
    cwd: str,
    acknowledged: bool,
    actor: str,
) -> dict:
    if not acknowledged:
        raise _refuse(
            UNSANDBOXED_ACK_REQUIRED,
            "monitor commands run outside the agent sandbox, with the server's "
            "own rights; pass --allow-unsandboxed to acknowledge that",
        )
    if not isinstance(command, str) or not command.strip():
        raise errors.ProctorError("a monitor needs a command (--cmd)")
    seconds = parse_interval(interval)
    job = jobrecord.require(rows.get(conn, job_id), job_id)
    if not job_is_active(cfg, job):
        column = config_mod.column_of_job(cfg, job)
        raise _refuse(
            CARD_INACTIVE,
            f"{job_id} is in column {column[0] if column else '(none)'}, which is not "
            f"active; monitors run only for jobs in an active column",
        )
    brokered = os.environ.get("PROCTOR_BROKERED")
    if brokered:
        # a sandboxed worker's command (its broker's: proctor/broker.py), whatever job it names
        # and the checkout's proctor.toml says
        raise _refuse(
            SANDBOXED_JOB,
            f"{brokered}'s worker runs in the sandbox, and a monitor runs with the server's "
            f"own rights, outside it: a sandboxed worker cannot add one. The person adds "
            f"it (proctor monitor add with the server's token, outside the job)",
        )
    if actor.startswith("job:") and cfg["sandbox.mode"] != "off":
        from proctor import sandbox

        if sandbox.narrows(job) and sandbox.kernel_abi():
            raise _refuse(
                SANDBOXED_JOB,
                f"the sandbox narrows {job_id} to its write paths, and a monitor runs with the "
                f"server's own rights, outside it: its agent cannot acknowledge that for "
                f"itself. The person adds it (proctor monitor add with the server's token, "
                f'outside the job), or the job runs with [sandbox] mode = "off"',
            )
    real_cwd, where = allowed_cwd(job, cwd, repo_root)
    count = mrows.count_live(conn, job_id)
    if count >= MAX_PER_JOB:
        raise _refuse(
            LIMIT_REACHED,
            f"{job_id} has {count} monitors, the most a card may have; remove one first (proctor monitor remove <id>)",
        )
    text = description_of(description, command)
    at = iso(now())
    monitor = get(conn, mrows.insert(conn, job_id, command, seconds, text, real_cwd, at, actor, f"{at} by {actor}"))
    assert monitor is not None  # the row just inserted, read back in the same transaction
    _record(
        conn,
        "monitor_added",
        actor,
        monitor,
        {
            "where": where,
            "command": excerpt(command, 1000),
            "interval": seconds,
            "acknowledged": monitor["acknowledged"],
        },
    )
    return monitor


def _record(conn, kind: str, actor: str, monitor: dict, extra: dict) -> None:
    """A monitor's addition or removal, on the activity trail."""
    from proctor import trail

    data = {"monitor": monitor["id"], "description": monitor["description"], "cwd": monitor["cwd"], **extra}
    trail.append(conn, conn.store.state_dir, kind, actor, job=monitor["job"], data=data)


def get(conn, monitor_id: int) -> dict | None:
    return mrows.get(conn, monitor_id)


def live(conn, job: str | None = None) -> list[dict]:
    return mrows.live(conn, job)


def remove(conn, monitor_id: int, scope_job: str | None, why: str = "removed", actor: str | None = None) -> dict:
    if not 0 < monitor_id < MAX_ID:
        raise _refuse(NOT_FOUND, f"no monitor {monitor_id}")
    monitor = get(conn, monitor_id)
    if monitor is None or monitor["deleted"]:
        raise _refuse(NOT_FOUND, f"no monitor {monitor_id}; proctor monitor list shows them")
    if scope_job is not None and monitor["job"] != scope_job:
        raise _refuse(
            OUT_OF_SCOPE,
            f"monitor {monitor_id} belongs to {monitor['job']}; with a job's secret you "
            f"manage {scope_job}'s monitors only",
        )
    mrows.mark_deleted(conn, monitor_id, f"{iso(now())} {why}")
    monitor = get(conn, monitor_id)
    assert monitor is not None  # read just above in the same transaction; marked deleted, not deleted
    _record(conn, "monitor_removed", actor or (f"job:{scope_job}" if scope_job else "token"), monitor, {"why": why})
    return monitor


def prunable(conn, cfg: config_mod.Config) -> list[tuple[dict, str]]:
    """Every live monitor whose job left an active column or the board, and why (read only)."""
    found = []
    for monitor in live(conn):
        job = rows.get(conn, monitor["job"])
        if job is None:
            why = "its job was deleted"
        elif job.get("archived"):
            why = "its job was archived"
        elif job.get("trashed"):
            why = "its job was trashed"
        elif not job_is_active(cfg, job):
            column = config_mod.column_of_job(cfg, job)
            why = f"its job is in column {column[0] if column else '(none)'}, which is passive"
        else:
            continue
        found.append((monitor, why))
    return found


def prune(conn, cfg: config_mod.Config) -> list[tuple[int, str]]:
    """Delete, for good, every monitor whose job left an active column or the board."""
    gone = []
    for monitor, why in prunable(conn, cfg):
        mrows.mark_deleted(conn, monitor["id"], f"{iso(now())} {why}")
        _record(conn, "monitor_removed", "server", {**monitor, "deleted": why}, {"why": why})
        gone.append((monitor["id"], why))
    return gone


def events(conn, job: str | None = None, limit: int = 1000) -> list[dict]:
    rows_ = mrows.latest_events(conn, job, limit)
    out = []
    for monitor, run, time_, line, truncated, followup, job_id, delivered in reversed(rows_):
        # "the follow-up they went out in, or pending": a batch not handed over yet is pending
        out.append(
            {
                "monitor": monitor,
                "run": run,
                "time": time_,
                "line": line,
                "truncated": bool(truncated),
                "followup": followup if followup is not None and delivered else "pending",
                "job": job_id,
                "batch": followup,
                "delivered": delivered,
            }
        )
    return out


_RUN_COLUMNS = (
    "id",
    "monitor",
    "job",
    "started",
    "ended",
    "exit_code",
    "timed_out",
    "timeout",
    "truncated",
    "lines",
    "bytes",
    "error",
    "stderr",
    "pid",
)


def runs(conn, job: str | None = None, monitor: int | None = None, limit: int = 100) -> list[dict]:
    """The latest `limit` runs (of one job's monitors, of one monitor), oldest first: start, end,
    exit code, whether it timed out and its timeout, whether output was cut, its lines and
    bytes, an error of the loop that ran it, its stderr."""
    found = mrows.latest_runs(conn, job, monitor, limit)
    out = []
    for row in reversed(found):
        run = dict(zip(_RUN_COLUMNS, row))
        run["timed_out"], run["truncated"] = bool(run["timed_out"]), bool(run["truncated"])
        out.append(run)
    return out


_FOLLOWUP_COLUMNS = mrows.FOLLOWUP_COLUMNS


def followups(conn, job: str | None = None, limit: int = 100) -> list[dict]:
    """The latest `limit` follow-ups (of one job), oldest first, without their text: events,
    bytes, created, pending or delivered (when, and `via` how), and a wait that printed it."""
    found = mrows.latest_followups(conn, job, limit)
    out = []
    for row in reversed(found):
        item = dict(zip(_FOLLOWUP_COLUMNS, row))
        item["state"] = "delivered" if item["delivered"] else "pending"
        out.append(item)
    return out


def followup(conn, followup_id: int, scope_job: str | None = None) -> dict:
    """One follow-up with its text; refused for another job's under a job's secret."""
    if not 0 < followup_id < MAX_ID:
        raise _refuse(FOLLOWUP_NOT_FOUND, f"no follow-up {followup_id}")
    row = mrows.followup_row(conn, followup_id)
    if row is None or (scope_job is not None and row[1] != scope_job):
        raise _refuse(
            FOLLOWUP_NOT_FOUND,
            f"no follow-up {followup_id}"
            + (f" of {scope_job}" if scope_job is not None else "")
            + "; proctor monitor followups lists them",
        )
    item = dict(zip(_FOLLOWUP_COLUMNS + ("text",), row))
    item["state"] = "delivered" if item["delivered"] else "pending"
    return item
